#!/usr/bin/python3
"""A real PyTorch job under Rondo (jobs/pytorch-cpu.nomad.hcl): an MLP
learns a fixed random "teacher" MLP's function on CPU, a deterministic
synthetic regression (torch.manual_seed): the dataset, the initial weights
and every step's mini-batch follow from the seed, so a run that resumes
from a checkpoint computes exactly the losses an uninterrupted run would.

It runs under rondo.torch.Trainer: resumes from the checkpoint in
RONDO_CHECKPOINT_DIR (model, optimizer, step, RNG states), logs
`step=S loss=L t=UNIX` lines, reports progress and measured steps/s to the
lease API, checkpoints (atomically) every --checkpoint-every steps and when
Rondo says (SIGTERM: checkpoint and exit 0; checkpoint_now; a lease that
ends). Debian's python3-torch: run it with /usr/bin/python3.

    /usr/bin/python3 jobs/python/train_mlp.py --steps 3000
    RONDO_CHECKPOINT_DIR=/tmp/ck /usr/bin/python3 jobs/python/train_mlp.py --steps 300   # standalone
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # the rondo package beside this file

try:
    import torch
except ImportError:
    sys.stderr.write("train_mlp: no torch for %s: install Debian's python3-torch (apt-get install python3-torch) "
                     "and run /usr/bin/python3\n" % sys.executable)
    sys.exit(2)

import rondo  # noqa: E402
from rondo.torch import Trainer  # noqa: E402


def meta(key, default=None):
    for k in ("NOMAD_META_rondo." + key, "NOMAD_META_rondo_" + key):
        if os.environ.get(k):
            return os.environ[k]
    return default


def mlp(d_in, hidden, d_out, depth):
    layers, d = [], d_in
    for _ in range(depth):
        layers += [torch.nn.Linear(d, hidden), torch.nn.Tanh()]
        d = hidden
    layers.append(torch.nn.Linear(d, d_out))
    return torch.nn.Sequential(*layers)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=int(meta("steps", "2000")), help="total steps (default: meta rondo.steps)")
    p.add_argument("--batch", type=int, default=int(meta("batch_size", "256")), help="batch size (an elastic two-role job: the lease's share)")
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--depth", type=int, default=3)
    p.add_argument("--inputs", type=int, default=32)
    p.add_argument("--samples", type=int, default=8192)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--checkpoint-every", type=int, default=int(os.environ.get("RONDO_CHECKPOINT_EVERY", "500")),
                   help="steps between periodic checkpoints (0: only when told)")
    p.add_argument("--log-every", type=int, default=20)
    p.add_argument("--threads", type=int, default=int(os.environ.get("RONDO_TORCH_THREADS", "1")))
    a = p.parse_args(argv)
    torch.set_num_threads(a.threads)

    session = rondo.Session.from_env().start()

    # The dataset: a fixed teacher's outputs on fixed inputs, plus noise.
    g = torch.Generator().manual_seed(a.seed)
    x_all = torch.randn(a.samples, a.inputs, generator=g)
    torch.manual_seed(a.seed + 1)
    teacher = mlp(a.inputs, 64, 1, 2)
    with torch.no_grad():
        for w in teacher.parameters():
            w.mul_(2.5)  # a more nonlinear function: the loss falls over ~1000 steps, not 100
        y_all = teacher(x_all)
        y_all = (y_all - y_all.mean()) / y_all.std()  # unit variance: a model predicting 0 has loss 1
        y_all += 0.01 * torch.randn(y_all.shape, generator=g)

    torch.manual_seed(a.seed + 2)  # the student's initial weights
    model = mlp(a.inputs, a.hidden, 1, a.depth)
    opt = torch.optim.Adam(model.parameters(), lr=a.lr)

    def batch(step):
        # Every step's mini-batch follows from (seed, step): resumes exactly.
        n = session.batch_size(a.batch)
        idx = torch.randint(0, a.samples, (n,), generator=torch.Generator().manual_seed(a.seed * 1000003 + step))
        return x_all[idx], y_all[idx]

    print("train_mlp: %d samples, %d inputs, MLP %dx%d, batch %d, %d steps, checkpoints in %s, gpu type %s, torch %s"
          % (a.samples, a.inputs, a.depth, a.hidden, a.batch, a.steps, session.checkpoint_dir, session.gpu_type,
             torch.__version__), flush=True)
    t = Trainer(model, opt, session=session, loss_fn=torch.nn.functional.mse_loss,
                checkpoint_every_steps=a.checkpoint_every, log_every=a.log_every, total_steps=a.steps)
    res = t.fit(batch, a.steps)
    print("train_mlp: %s at step=%d loss=%s, this run %.1f steps/s" % (
        "stopped" if res.stopped else "done", res.step, "%.6g" % res.loss if res.loss is not None else "none",
        res.steps_per_s or 0), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
