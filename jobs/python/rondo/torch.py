"""A plain-PyTorch training loop under Rondo.

    from rondo.torch import Trainer
    t = Trainer(model, optimizer, loss_fn=torch.nn.functional.mse_loss,
                checkpoint_every_steps=200)
    result = t.fit(batch_of_step, steps=2000)   # batch_of_step(step) -> (x, y)
    sys.exit(0)

fit resumes from the latest checkpoint in the session's checkpoint
directory (model, optimizer, scheduler, step, last loss and the torch,
Python and numpy RNG states), trains to `steps`, reports progress and
steps/s (measured over wall time) through the session, checkpoints every
checkpoint_every_steps / checkpoint_every_s and whenever the session says
(a stop: SIGTERM; a notice; a lease that ends), and returns. After a stop
it returns with result.stopped True: exit 0 then (the checkpoint is
written and reported).

Checkpoints are written atomically: torch.save to a temporary file in the
same directory, fsync, os.replace over checkpoint.pt; a checkpoint.json
beside it ({"steps", "total", "at", "loss"}) is what the Nomad backend and
`rondo status` read for progress (the format rondo-trainer writes).

Log lines (stdout, one per log_every steps and always the first step of a
run) are `step=S loss=L t=UNIX`, parsed by the e2e test; a resume prints
`resumed from PATH at step=S loss=L`, a checkpoint `checkpoint (WHY) at
step=S loss=L in X s`.
"""

import json
import os
import random
import time

import torch

from .session import Session

__all__ = ["Trainer", "train", "save_atomic", "load_latest", "CHECKPOINT_FILE"]

CHECKPOINT_FILE = "checkpoint.pt"
PROGRESS_FILE = "checkpoint.json"


def _rng_state():
    st = {"torch": torch.get_rng_state(), "python": random.getstate()}
    if torch.cuda.is_available():
        st["cuda"] = torch.cuda.get_rng_state_all()
    try:
        import numpy

        st["numpy"] = numpy.random.get_state()
    except ImportError:
        pass
    return st


def _set_rng_state(st):
    if not st:
        return
    if "torch" in st:
        torch.set_rng_state(st["torch"])
    if "python" in st:
        random.setstate(st["python"])
    if "cuda" in st and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(st["cuda"])
    if "numpy" in st:
        try:
            import numpy

            numpy.random.set_state(st["numpy"])
        except ImportError:
            pass


def _write_atomic(path, write):
    tmp = "%s.tmp.%d" % (path, os.getpid())
    try:
        with open(tmp, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)  # readers see the old file or the new one, never half of one
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    try:
        fd = os.open(os.path.dirname(path) or ".", os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:
        pass


def save_atomic(obj, path):
    """torch.save to a temporary file beside path, fsync, rename over path."""
    _write_atomic(path, lambda f: torch.save(obj, f))


def load_latest(directory, name=CHECKPOINT_FILE, map_location="cpu"):
    """The checkpoint in directory (a dict), or None when there is none."""
    path = os.path.join(directory, name)
    if not os.path.exists(path):
        return None
    return torch.load(path, map_location=map_location)


class Result:
    """What fit did: step (steps done since the job's first start), loss
    (the last), stopped (a signal stopped it: exit 0), done (it reached
    its steps), resumed_from (the step it resumed at, None: from scratch),
    steps_per_s (this run's steps over its wall time, the first step
    excluded), checkpoints (how many it wrote)."""

    def __init__(self):
        self.step = 0
        self.loss = None
        self.stopped = False
        self.done = False
        self.resumed_from = None
        self.steps_per_s = None
        self.checkpoints = 0

    def __repr__(self):
        return "Result(%r)" % (self.__dict__,)


class Trainer:
    """Trains model with optimizer under a rondo Session (module doc).

    loss_fn(output, target) with batches (x, y), or step_fn(model, batch)
    returning the loss tensor for any other batch. scheduler: an LR
    scheduler stepped after each optimizer step (saved and restored).
    extra_state: a dict of objects with state_dict/load_state_dict (or
    plain values) saved with the checkpoint. log: a function of one string
    (default print to stdout, flushed).
    """

    def __init__(self, model, optimizer, session=None, loss_fn=None, step_fn=None, scheduler=None,
                 checkpoint_every_steps=0, checkpoint_every_s=0.0, log_every=10, extra_state=None, log=None,
                 checkpoint_name=CHECKPOINT_FILE, total_steps=None):
        if loss_fn is None and step_fn is None:
            raise ValueError("Trainer: give loss_fn (batches (x, y)) or step_fn(model, batch) -> loss")
        self.model = model
        self.optimizer = optimizer
        self.session = session
        self.loss_fn = loss_fn
        self.step_fn = step_fn
        self.scheduler = scheduler
        self.checkpoint_every_steps = int(checkpoint_every_steps or 0)
        self.checkpoint_every_s = float(checkpoint_every_s or 0)
        self.log_every = max(int(log_every), 1)
        self.extra_state = extra_state or {}
        self.log = log or (lambda msg: print(msg, flush=True))
        self.checkpoint_name = checkpoint_name
        self.total_steps = total_steps
        self.step = 0
        self.loss = None

    # -- checkpoints -----------------------------------------------------

    @property
    def checkpoint_path(self):
        return os.path.join(self.session.checkpoint_dir, self.checkpoint_name)

    def state_dict(self):
        st = {"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(), "step": self.step,
              "loss": self.loss, "rng": _rng_state(), "at": time.time()}
        if self.scheduler is not None:
            st["scheduler"] = self.scheduler.state_dict()
        extra = {}
        for k, v in self.extra_state.items():
            extra[k] = v.state_dict() if hasattr(v, "state_dict") else v
        st["extra"] = extra
        return st

    def load_state_dict(self, st):
        self.model.load_state_dict(st["model"])
        self.optimizer.load_state_dict(st["optimizer"])
        if self.scheduler is not None and "scheduler" in st:
            self.scheduler.load_state_dict(st["scheduler"])
        for k, v in st.get("extra", {}).items():
            cur = self.extra_state.get(k)
            if cur is not None and hasattr(cur, "load_state_dict"):
                cur.load_state_dict(v)
            else:
                self.extra_state[k] = v
        _set_rng_state(st.get("rng"))
        self.step = int(st["step"])
        self.loss = st.get("loss")

    def restore(self):
        """Loads the latest checkpoint, if any; returns the step it holds
        (0: none) and tells the session."""
        began = time.time()
        st = load_latest(self.session.checkpoint_dir, self.checkpoint_name)
        if st is None:
            self.log("rondo.torch: no checkpoint in %s: starting at step=0" % self.session.checkpoint_dir)
            return 0
        self.load_state_dict(st)
        self.session.resumed(self.step, checkpoint_at=st.get("at"))
        self.log("rondo.torch: resumed from %s at step=%d loss=%s (loaded in %.3f s)" % (
            self.checkpoint_path, self.step, _fmt(self.loss), time.time() - began))
        return self.step

    def save(self, why="periodic"):
        """Writes a checkpoint atomically (and checkpoint.json) and tells
        the session; returns the seconds it took."""
        began = time.time()
        st = self.state_dict()
        save_atomic(st, self.checkpoint_path)
        prog = {"steps": self.step, "at": _rfc3339(st["at"]), "loss": self.loss}
        if self.total_steps:
            prog["total"] = self.total_steps
        _write_atomic(os.path.join(self.session.checkpoint_dir, PROGRESS_FILE),
                      lambda f: f.write(json.dumps(prog).encode()))
        took = time.time() - began
        self.session.checkpointed(self.step, seconds=took, at=st["at"])
        self.log("rondo.torch: checkpoint (%s) at step=%d loss=%s in %.3f s" % (why, self.step, _fmt(self.loss), took))
        return took

    # -- training --------------------------------------------------------

    def _train_step(self, batch):
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        if self.step_fn is not None:
            loss = self.step_fn(self.model, batch)
        else:
            x, y = batch
            loss = self.loss_fn(self.model(x), y)
        loss.backward()
        self.optimizer.step()
        if self.scheduler is not None:
            self.scheduler.step()
        return float(loss.detach())

    def fit(self, data, steps):
        """Trains until steps (steps done since the job's first start).
        data: a function of the step returning its batch (deterministic
        data resumes exactly), or an iterable (iterated again from its
        start when exhausted, and on every resume). Returns a Result."""
        own = self.session is None
        if own:
            self.session = Session.from_env().start()
        if self.total_steps is None:
            self.total_steps = steps
        res = Result()
        self.restore()
        res.resumed_from = self.step if self.step > 0 else None
        it = None
        if not callable(data):
            it = iter(data)
        last_ck, last_ck_step = time.monotonic(), self.step
        t0, s0 = None, None
        first = True
        try:
            while self.step < steps:
                why = self.session.checkpoint_due()
                if why == "stop":
                    break
                if why is not None:
                    self.save(why)
                    res.checkpoints += 1
                    last_ck, last_ck_step = time.monotonic(), self.step
                if callable(data):
                    batch = data(self.step)
                else:
                    try:
                        batch = next(it)
                    except StopIteration:
                        it = iter(data)
                        batch = next(it)
                self.loss = self._train_step(batch)
                self.step += 1
                self.session.step(self.step)
                now = time.monotonic()
                if t0 is None:
                    t0, s0 = now, self.step
                if first or self.step % self.log_every == 0 or self.step == steps:
                    self.log("step=%d loss=%s t=%.3f" % (self.step, _fmt(self.loss), time.time()))
                    first = False
                if self.step < steps and (
                        (self.checkpoint_every_steps and self.step - last_ck_step >= self.checkpoint_every_steps) or
                        (self.checkpoint_every_s and now - last_ck >= self.checkpoint_every_s)):
                    self.save("periodic")
                    res.checkpoints += 1
                    last_ck, last_ck_step = time.monotonic(), self.step
            if self.session.stop_requested and self.step < steps:
                res.stopped = True
            # The last checkpoint: at a stop (the handshake), or done.
            if res.stopped or self.step >= steps:
                self.save("stop" if res.stopped else "done")
                res.checkpoints += 1
            res.done = self.step >= steps and not res.stopped
        finally:
            if t0 is not None and self.step > s0:
                res.steps_per_s = (self.step - s0) / max(time.monotonic() - t0, 1e-9)
            res.step, res.loss = self.step, self.loss
            if own or res.stopped or res.done:
                self.session.close()
        if res.stopped:
            self.log("rondo.torch: stopped at step=%d: checkpointed, exiting 0" % self.step)
        elif res.done:
            self.log("rondo.torch: done, step=%d loss=%s" % (self.step, _fmt(self.loss)))
        return res


def train(model, optimizer, data, steps, **kw):
    """Trainer(model, optimizer, **kw).fit(data, steps)."""
    return Trainer(model, optimizer, **kw).fit(data, steps)


def _fmt(loss):
    return "none" if loss is None else "%.6g" % loss


def _rfc3339(t):
    from .client import format_time

    return format_time(t)
