import datetime as dt
import json
import os
import signal
import subprocess
import sys
import time
import unittest

from rondo import Session, parse_time
from rondo.session import gpu_type_from_env

from . import rig


def setUpModule():
    rig.require()


def wait(cond, timeout=10.0, what="condition"):
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(0.05)
    raise AssertionError("timed out waiting for " + what)


class SessionTest(unittest.TestCase):
    def session(self, job, **kw):
        env = rig.task_env(job, RONDO_REPORT_INTERVAL=kw.pop("every", "200ms"))
        return Session.from_env(env, install_signals=False, log=lambda m: None, **kw).start()

    def test_reports_measured_throughput(self):
        rig.grant("s-rate")
        s = self.session("s-rate")
        try:
            self.assertEqual(s.checkpoint_dir, s._env["RONDO_CHECKPOINT_DIR"])
            s.resumed(500)
            time.sleep(0.5)  # loading: not training, not measured
            t0, step = time.monotonic(), 500
            while time.monotonic() - t0 < 1.5:
                time.sleep(0.01)
                step += 1
                s.step(step)
            rate = (step - 501) / (time.monotonic() - t0)
            r = wait(lambda: [x for x in rig.reports("s-rate") if x["steps_done"] > 600], what="reports")
            # Training stops (a stop's checkpoint, an API that answers
            # slowly): the time after the last step is in no report's rate.
            time.sleep(1.0)
        finally:
            s.close()
        got = rig.reports("s-rate")
        idle = [x for x in got if x["steps_done"] == step][1:]  # the first holds the last steps
        self.assertTrue(idle and all(x["throughput_steps_per_s"] == 0 for x in idle), idle)
        got = [x for x in got if x["steps_done"] < step or x["throughput_steps_per_s"] > 0]
        self.assertGreaterEqual(len(got), 4)
        self.assertTrue(all(x["gpu_type"] == "v100" for x in got))
        # Every report measures steps over wall time since the previous one:
        # their mean is the loop's rate.
        rates = [x["throughput_steps_per_s"] for x in got]
        mean = sum(rates) / len(rates)
        self.assertLess(abs(mean - rate) / rate, 0.15, (rates, rate))
        # restore_s: process start to the first step, the loading included.
        self.assertGreater(got[0]["restore_s"], 0.5)
        self.assertEqual(rig.reports("s-rate")[-1]["steps_done"], step)  # close() sent the last

    def test_renews_before_the_lease_expires(self):
        rig.grant("s-renew", expires_in_s=0.8)
        s = self.session("s-renew", every="30s")
        try:
            n0 = rig.leases("s-renew")
            time.sleep(2.2)
            n = rig.leases("s-renew") - n0
        finally:
            s.close()
        self.assertGreaterEqual(n, 3, "a lease of 0.8 s is asked for again at least every 0.5-0.8 s")
        now = dt.datetime.now(dt.timezone.utc)
        s.lease.expires_at = now + dt.timedelta(seconds=100)
        self.assertEqual(s.next_wait(now), 30.0)
        s.lease.expires_at = now + dt.timedelta(seconds=5)
        self.assertEqual(s.next_wait(now), 4.0)
        s.lease.expires_at = now - dt.timedelta(seconds=1)
        self.assertEqual(s.next_wait(now), 0.5)

    def test_notice_once_and_lease_end(self):
        rig.grant("s-notice")
        s = self.session("s-notice")
        try:
            s.step(1)
            self.assertIsNone(s.checkpoint_due())
            rig.grant("s-notice", checkpoint_now=True, stop_in_s=30)
            wait(lambda: s.checkpoint_due() == "notice", what="notice")
            s.checkpointed(1, seconds=0.25)
            time.sleep(0.6)  # answers carry the same notice: acted on once
            self.assertIsNone(s.checkpoint_due())
            r = wait(lambda: [x for x in rig.reports("s-notice") if x["checkpoint_at"]], what="checkpoint report")
            self.assertEqual(r[-1]["checkpoint_s"], 0.25)
            self.assertLess(abs((parse_time(r[-1]["checkpoint_at"]) - dt.datetime.now(dt.timezone.utc)).total_seconds()), 5)
            rig.grant("s-notice", checkpoint_now=True, stop_in_s=90)  # a new notice: a new stop_at
            wait(lambda: s.checkpoint_due() == "notice", what="second notice")
            s.checkpointed(2)
            rig.grant("s-notice", cont=False)
            wait(lambda: s.checkpoint_due() == "lease_end", what="lease end")
            s.checkpointed(3)
            time.sleep(0.5)
            self.assertIsNone(s.checkpoint_due(), "one checkpoint per lease end")
            self.assertFalse(s.stop_requested)
        finally:
            s.close()

    def test_batch_split(self):
        rig.grant("s-batch", role="worker", workers=2, ps=1, total_batch=10, index=0)
        changes = []
        s = self.session("s-batch")
        s.on_batch_change = lambda b, w, l: changes.append((b, w))
        try:
            self.assertEqual(s.batch_size(64), 5)  # the first lease is asked before training
            rig.grant("s-batch", role="worker", workers=3, ps=1, total_batch=10, index=0)
            wait(lambda: s.batch_size(64) == 4, what="the new split")
            self.assertEqual(changes, [(4, 3)])
        finally:
            s.close()
        rig.grant("s-plain")
        s = self.session("s-plain")
        try:
            self.assertEqual(s.batch_size(64), 64)  # not a two-role job: the job's own
        finally:
            s.close()

    def test_standalone_and_env(self):
        s = Session.from_env({"RONDO_CHECKPOINT_DIR": os.path.join(rig.task_env("x")["RONDO_CHECKPOINT_DIR"], "d")},
                             install_signals=False, log=lambda m: None).start()
        self.assertIsNone(s.client)
        self.assertTrue(os.path.isdir(s.checkpoint_dir))
        s.step(1)
        s.close()
        self.assertEqual(gpu_type_from_env({"CUDA_VISIBLE_DEVICES": "GPU-k80-3,GPU-k80-4"}), "k80")
        self.assertEqual(gpu_type_from_env({"RONDO_GPU_TYPE": "a100", "CUDA_VISIBLE_DEVICES": "GPU-k80-3"}), "a100")
        self.assertIsNone(gpu_type_from_env({}))
        with self.assertRaises(ValueError):
            Session.from_env({"RONDO_REPORT_INTERVAL": "soon"})

    def test_sigterm_handshake(self):
        """SIGTERM: the task checkpoints, reports the checkpoint (time and
        cost) and exits 0; started again it resumes there and reports how
        long its restart took."""
        rig.grant("s-term")
        env = rig.task_env("s-term", RONDO_REPORT_INTERVAL="300ms")
        task = os.path.join(os.path.dirname(os.path.abspath(__file__)), "handshake_task.py")
        p = subprocess.Popen([sys.executable, task], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.assertTrue(p.stdout.readline().startswith("ready step=0"))
        wait(lambda: rig.reports("s-term"), what="a report")
        p.send_signal(signal.SIGTERM)
        out, _ = p.communicate(timeout=20)
        self.assertEqual(p.returncode, 0, out)
        self.assertIn("SIGTERM: checkpoint and exit", out)
        with open(os.path.join(env["RONDO_CHECKPOINT_DIR"], "ck.json")) as f:
            ck = json.load(f)
        last = rig.reports("s-term")[-1]
        self.assertEqual(last["steps_done"], ck["step"])
        self.assertAlmostEqual(parse_time(last["checkpoint_at"]).timestamp(), ck["at"], delta=0.001)
        self.assertGreaterEqual(last["checkpoint_s"], 0.2)
        n = len(rig.reports("s-term"))
        p = subprocess.Popen([sys.executable, task], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            self.assertEqual(p.stdout.readline().strip(), "ready step=%d" % ck["step"])
            r = wait(lambda: rig.reports("s-term")[n:], what="a report after the restart")
            self.assertGreaterEqual(r[0]["steps_done"], ck["step"])
            self.assertAlmostEqual(parse_time(r[0]["checkpoint_at"]).timestamp(), ck["at"], delta=0.001)
            self.assertGreater(r[0]["restore_s"], 0)
        finally:
            p.send_signal(signal.SIGINT)  # SIGINT too
            out, _ = p.communicate(timeout=20)
        self.assertEqual(p.returncode, 0, out)
        self.assertIn("SIGINT: checkpoint and exit", out)


if __name__ == "__main__":
    unittest.main()
