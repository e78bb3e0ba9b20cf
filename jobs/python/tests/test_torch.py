import os
import re
import signal
import subprocess
import sys
import time
import unittest

from rondo import Session, parse_time

from . import rig

try:
    import torch
except ImportError:  # TestPythonClient fails first, naming python3-torch
    torch = None


def setUpModule():
    rig.require()
    if torch is None:
        raise unittest.SkipTest("no torch in %s: install Debian's python3-torch" % sys.executable)


def tiny():
    torch.manual_seed(3)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    return model, torch.optim.Adam(model.parameters(), lr=1e-2)


def data(step):
    # Draws from the global RNG: only a resume that restores it
    # reproduces the uninterrupted run.
    x = torch.randn(16, 4)
    return x, x.sum(dim=1, keepdim=True)


class TrainerTest(unittest.TestCase):
    def session(self, job, env=None):
        env = env or rig.task_env(job, RONDO_REPORT_INTERVAL="200ms")
        return Session.from_env(env, install_signals=False, log=lambda m: None).start(), env

    def test_resume_is_exact(self):
        from rondo.torch import Trainer, load_latest

        rig.grant("t-exact")
        logs = []
        s, env = self.session("t-exact")
        model, opt = tiny()
        torch.manual_seed(7)
        Trainer(model, opt, session=s, loss_fn=torch.nn.functional.mse_loss, log_every=1, log=logs.append).fit(data, 30)
        whole = [float(m.group(1)) for m in (re.search(r"^step=\d+ loss=(\S+)", l) for l in logs) if m]
        self.assertEqual(len(whole), 30)
        self.assertLess(whole[-1], whole[0] / 2)

        rig.grant("t-split")
        env2 = rig.task_env("t-split", RONDO_REPORT_INTERVAL="200ms")
        logs = []
        s, _ = self.session("t-split", env2)
        model, opt = tiny()
        torch.manual_seed(7)
        r = Trainer(model, opt, session=s, loss_fn=torch.nn.functional.mse_loss, log_every=1, log=logs.append).fit(data, 12)
        self.assertTrue(r.done and r.resumed_from is None and r.step == 12)
        ck = load_latest(env2["RONDO_CHECKPOINT_DIR"])
        self.assertEqual(ck["step"], 12)
        self.assertTrue(os.path.exists(os.path.join(env2["RONDO_CHECKPOINT_DIR"], "checkpoint.json")))
        self.assertEqual([f for f in os.listdir(env2["RONDO_CHECKPOINT_DIR"]) if ".tmp" in f], [])
        # A new process: fresh weights and RNG; the checkpoint restores both.
        s, _ = self.session("t-split", env2)
        model, opt = tiny()
        torch.manual_seed(12345)
        r = Trainer(model, opt, session=s, loss_fn=torch.nn.functional.mse_loss, log_every=1, log=logs.append).fit(data, 30)
        self.assertEqual(r.resumed_from, 12)
        self.assertTrue(any("resumed from" in l and "step=12 " in l for l in logs), logs)
        split = [float(m.group(1)) for m in (re.search(r"^step=\d+ loss=(\S+)", l) for l in logs) if m]
        self.assertEqual(split, whole)  # the same losses as the uninterrupted run
        reps = rig.reports("t-split")
        self.assertEqual(reps[-1]["steps_done"], 30)
        self.assertIsNotNone(reps[-1]["checkpoint_at"])

    def test_notice_and_periodic_checkpoints(self):
        from rondo.torch import Trainer

        rig.grant("t-notice")
        s, env = self.session("t-notice")
        logs = []
        model, opt = tiny()

        def slow(step):
            time.sleep(0.01)
            if step == 20:
                rig.grant("t-notice", checkpoint_now=True, stop_in_s=60)
            return data(step)

        r = Trainer(model, opt, session=s, loss_fn=torch.nn.functional.mse_loss, log=logs.append,
                    checkpoint_every_steps=50).fit(slow, 120)
        self.assertTrue(r.done)
        kinds = [re.search(r"checkpoint \((\w+)\)", l).group(1) for l in logs if "checkpoint (" in l]
        # One checkpoint per notice; periodic ones every 50 steps since the
        # last checkpoint of any kind; the last when done.
        self.assertEqual(kinds, ["notice", "periodic", "done"], logs)
        at = [int(re.search(r"at step=(\d+)", l).group(1)) for l in logs if "checkpoint (" in l]
        self.assertEqual(at[1] - at[0], 50)

    def test_train_mlp_stop_and_resume(self):
        """The example job: SIGTERM checkpoints and exits 0; the restart
        resumes at the checkpointed step with a loss continuing from it,
        finishes, and its reports carry the measured steps/s, restore_s
        and the checkpoint."""
        rig.grant("t-mlp")
        env = rig.task_env("t-mlp", RONDO_REPORT_INTERVAL="300ms")
        cmd = [sys.executable, os.path.join(rig.HERE, "train_mlp.py"), "--steps", "400", "--log-every", "10",
               "--hidden", "32", "--samples", "2048"]
        p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        out1 = []
        for line in p.stdout:
            out1.append(line)
            m = re.match(r"step=(\d+) ", line)
            if m and int(m.group(1)) >= 150:
                p.send_signal(signal.SIGTERM)
                break
        rest, _ = p.communicate(timeout=30)
        out1 = "".join(out1) + rest
        self.assertEqual(p.returncode, 0, out1)
        ck = re.search(r"checkpoint \(stop\) at step=(\d+) loss=(\S+)", out1)
        self.assertIsNotNone(ck, out1)
        ck_step, ck_loss = int(ck.group(1)), float(ck.group(2))
        first_loss = float(re.search(r"step=1 loss=(\S+)", out1).group(1))
        out2 = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120).stdout
        self.assertIn("resumed from", out2)
        self.assertIn("at step=%d " % ck_step, out2)
        m = re.search(r"^step=(\d+) loss=(\S+)", out2, re.M)
        self.assertEqual(int(m.group(1)), ck_step + 1)
        self.assertLess(float(m.group(2)), first_loss / 2, (ck_loss, out2))
        self.assertIn("done at step=400", out2)
        reps = rig.reports("t-mlp")
        self.assertEqual(reps[-1]["steps_done"], 400)
        self.assertTrue(all(r["restore_s"] > 0 for r in reps))
        rates = [r["throughput_steps_per_s"] for r in reps if r["throughput_steps_per_s"] > 0]
        self.assertTrue(rates)


class CallbackTest(unittest.TestCase):
    def session(self, job):
        return Session.from_env(rig.task_env(job, RONDO_REPORT_INTERVAL="200ms"), install_signals=False,
                                log=lambda m: None).start()

    def test_lightning_style(self):
        from rondo.callbacks import LightningCallback, latest_lightning_checkpoint

        rig.grant("cb-pl")
        s = self.session("cb-pl")

        class FakePL:  # what the callback touches of a Lightning Trainer
            global_step = 0
            should_stop = False

            def save_checkpoint(self, path):
                with open(path, "w") as f:
                    f.write(str(self.global_step))

        tr, cb = FakePL(), LightningCallback(s)
        self.assertIsNone(latest_lightning_checkpoint(s.checkpoint_dir))
        cb.on_train_start(tr, None)
        for i in range(5):
            tr.global_step += 1
            cb.on_train_batch_end(tr, None, None, None, i)
        self.assertFalse(tr.should_stop)
        s._on_signal(signal.SIGTERM, None)  # what Nomad's stop does
        tr.global_step += 1
        cb.on_train_batch_end(tr, None, None, None, 5)
        self.assertTrue(tr.should_stop)
        p = latest_lightning_checkpoint(s.checkpoint_dir)
        with open(p) as f:
            self.assertEqual(f.read(), "6")
        cb.on_train_end(tr, None)
        last = rig.reports("cb-pl")[-1]
        self.assertEqual(last["steps_done"], 6)
        self.assertIsNotNone(last["checkpoint_at"])

    def test_hf_style(self):
        from rondo.callbacks import HFCallback, latest_hf_checkpoint

        rig.grant("cb-hf")
        s = self.session("cb-hf")

        class State:
            global_step = 0

        class Control:
            should_save = False
            should_training_stop = False

        st, ctl, cb = State(), Control(), HFCallback(s)
        cb.on_train_begin(None, st, ctl)
        st.global_step = 3
        cb.on_step_end(None, st, ctl)
        self.assertFalse(ctl.should_save)
        rig.grant("cb-hf", checkpoint_now=True, stop_in_s=60)
        deadline = time.time() + 10
        while not ctl.should_save and time.time() < deadline:
            time.sleep(0.05)
            st.global_step += 1
            cb.on_step_end(None, st, ctl)
        self.assertTrue(ctl.should_save)
        self.assertFalse(ctl.should_training_stop)
        os.makedirs(os.path.join(s.checkpoint_dir, "checkpoint-%d" % st.global_step))  # what the Trainer saves
        os.makedirs(os.path.join(s.checkpoint_dir, "checkpoint-2"))
        cb.on_save(None, st, ctl)
        self.assertIsNone(s.checkpoint_due())
        self.assertTrue(latest_hf_checkpoint(s.checkpoint_dir).endswith("checkpoint-%d" % st.global_step))
        s._on_signal(signal.SIGTERM, None)
        ctl.should_save = False
        cb.on_step_end(None, st, ctl)
        self.assertTrue(ctl.should_save and ctl.should_training_stop)
        cb.on_save(None, st, ctl)
        cb.on_train_end(None, st, ctl)
        last = rig.reports("cb-hf")[-1]
        self.assertEqual(last["steps_done"], st.global_step)
        self.assertIsNotNone(last["checkpoint_s"])
        self.assertLess(abs(parse_time(last["checkpoint_at"]).timestamp() - time.time()), 10)


if __name__ == "__main__":
    unittest.main()
