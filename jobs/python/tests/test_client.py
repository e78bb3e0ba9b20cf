import datetime as dt
import os
import tempfile
import time
import unittest

from rondo import Client, LeaseAPIError, batch_share, format_time, parse_time, token_from_env

from . import rig


def setUpModule():
    rig.require()


class ClientTest(unittest.TestCase):
    def test_from_env_report_and_lease(self):
        rig.grant("c-train", round=7, checkpoint_dir="/ck/c-train", expires_in_s=30)
        env = rig.task_env("c-train", alloc="a-7")
        c = Client.from_env(env)
        self.assertEqual(c.addr, rig.API)  # scheme added
        self.assertEqual((c.job, c.alloc, c.namespace), ("c-train", "a-7", "default"))
        at = dt.datetime(2026, 1, 2, 3, 4, 5, 123456, tzinfo=dt.timezone.utc)
        c.report(1200, 3.5, "v100", checkpoint_at=at, checkpoint_s=2.5, restore_s=0.0)
        c.report(1300, 4.0, "k80", partner="other", epochs_done=1.5)
        r = rig.reports("c-train")
        self.assertEqual(len(r), 2)
        self.assertEqual((r[0]["steps_done"], r[0]["throughput_steps_per_s"], r[0]["gpu_type"], r[0]["alloc"]),
                         (1200, 3.5, "v100", "a-7"))
        self.assertEqual(parse_time(r[0]["checkpoint_at"]), at)
        self.assertEqual((r[0]["checkpoint_s"], r[0]["restore_s"], r[0]["epochs_done"]), (2.5, 0.0, None))
        self.assertEqual((r[1]["partner"], r[1]["epochs_done"], r[1]["checkpoint_at"], r[1]["checkpoint_s"],
                          r[1]["restore_s"]), ("other", 1.5, None, None, None))
        l = c.lease()
        self.assertTrue(l.continue_)
        self.assertEqual((l.round, l.checkpoint_dir, l.checkpoint_now, l.stop_at, l.two_role), (7, "/ck/c-train", False,
                                                                                              None, False))
        left = (l.expires_at - dt.datetime.now(dt.timezone.utc)).total_seconds()
        self.assertTrue(25 < left <= 30, left)
        self.assertTrue(c.health())

    def test_lease_answers(self):
        env = rig.task_env("c-answers")
        c = Client.from_env(env)
        rig.grant("c-answers", cont=False)
        self.assertFalse(c.lease().continue_)
        rig.grant("c-answers", checkpoint_now=True, stop_in_s=20)
        l = c.lease()
        self.assertTrue(l.continue_ and l.checkpoint_now)
        self.assertTrue(15 < (l.stop_at - dt.datetime.now(dt.timezone.utc)).total_seconds() <= 20)
        rig.grant("c-answers", role="worker", workers=3, ps=1, total_batch=256, index=1)
        l = c.lease()
        self.assertTrue(l.two_role)
        self.assertEqual((l.role, l.workers, l.ps, l.batch, l.total_batch), ("worker", 3, 1, 85, 256))
        self.assertEqual([batch_share(256, 3, i) for i in range(4)], [86, 85, 85, 0])
        self.assertEqual(batch_share(0, 3, 0), 0)
        rig.grant("c-answers", role="ps", workers=2, ps=1, total_batch=256)
        l = c.lease()
        self.assertEqual((l.role, l.workers, l.ps, l.batch), ("ps", 2, 1, 0))

    def test_addr_file(self):
        # RONDO_LEASE_ADDR_FILE, re-read on every call, wins over
        # RONDO_LEASE_ADDR (a dead agent's address here): the env file a
        # template over the rondo-lease service re-renders.
        rig.grant("c-addr")
        d = tempfile.mkdtemp()
        f = os.path.join(d, "rondo-lease.env")
        env = rig.task_env("c-addr", RONDO_LEASE_ADDR="127.0.0.1:9", RONDO_LEASE_ADDR_FILE=f)
        with self.assertRaisesRegex(LeaseAPIError, "lease api: 0: "):  # a transport failure
            Client.from_env(env).report(1, 1.0, "v100")  # no file yet: RONDO_LEASE_ADDR
        with open(f, "w") as fh:
            fh.write("\nRONDO_LEASE_ADDR=" + rig.API + "\n")
        c = Client.from_env(env)
        c.report(2, 1.0, "v100")
        with open(f, "w") as fh:
            fh.write("127.0.0.1:9\n")  # a bare address
        with self.assertRaisesRegex(LeaseAPIError, "lease api: 0: "):  # a transport failure
            c.report(3, 1.0, "v100")
        with open(f, "w") as fh:
            fh.write("RONDO_LEASE_ADDR=" + rig.API.replace("http://", "") + "/\n")
        c.report(4, 1.0, "v100")
        self.assertEqual([r["steps_done"] for r in rig.reports("c-addr")], [2, 4])
        del env["RONDO_LEASE_ADDR"]
        os.remove(f)
        with self.assertRaisesRegex(LookupError, "names no address"):
            Client.from_env(env)

    def test_token_order(self):
        # Each source in turn is the only good one; the ones before it are
        # empty and the ones after it wrong: the API accepts the call only
        # if the client read that source.
        rig.grant("c-tok")
        good = rig.token("c-tok")
        bad = rig.token("c-other")
        d = tempfile.mkdtemp()

        def write(name, v):
            p = os.path.join(d, name)
            with open(p, "w") as f:
                f.write(v)
            return p

        cases = [
            {"RONDO_IDENTITY_FILE": write("id", good), "NOMAD_TOKEN_rondo": bad},
            {"NOMAD_TOKEN_rondo": good, "NOMAD_SECRETS_DIR": d, "x": write("nomad_rondo.jwt", bad)},
            {"NOMAD_SECRETS_DIR": d, "x": write("nomad_rondo.jwt", good), "NOMAD_TOKEN": bad},
            {"NOMAD_TOKEN": good, "NOMAD_SECRETS_DIR": tempfile.mkdtemp()},
        ]
        for i, extra in enumerate(cases):
            env = {"RONDO_LEASE_ADDR": rig.API, "NOMAD_JOB_ID": "c-tok", "NOMAD_ALLOC_ID": "alloc-1"}
            env.update(extra)
            with self.subTest(i=i):
                self.assertTrue(Client.from_env(env).lease().continue_)
        d2 = tempfile.mkdtemp()
        with open(os.path.join(d2, "nomad_token"), "w") as f:
            f.write(good)
        self.assertEqual(token_from_env({"NOMAD_SECRETS_DIR": d2})(), good)
        with self.assertRaises(LeaseAPIError):
            token_from_env({})()
        # RONDO_JOB overrides the job id (as in lease-client.sh).
        self.assertEqual(Client.from_env({"RONDO_LEASE_ADDR": "x:1", "NOMAD_JOB_ID": "a", "RONDO_JOB": "b"}).job, "b")
        for env in ({}, {"RONDO_LEASE_ADDR": "x:1"}):
            with self.assertRaises(LookupError):
                Client.from_env(env)

    def test_refusals(self):
        rig.grant("c-ref")
        api = rig.API
        cases = [
            ("wrong audience", Client(api, "c-ref", "alloc-1", token=rig.token("c-ref", aud="nomad.io")), 401, None),
            ("expired", Client(api, "c-ref", "alloc-1", token=rig.token("c-ref", expired_s=3600)), 401, None),
            ("another job", Client(api, "c-ref", "alloc-1", token=rig.token("c-someone")), 403, "job"),
            ("another alloc", Client(api, "c-ref", "alloc-2", token=rig.token("c-ref", alloc="alloc-1")), 403, "alloc"),
            ("unknown job", Client(api, "c-nobody", "alloc-1", token=rig.token("c-nobody")), 404, None),
        ]
        for name, c, status, field in cases:
            with self.subTest(name):
                with self.assertRaises(LeaseAPIError) as cm:
                    c.lease()
                self.assertEqual(cm.exception.status, status, cm.exception)
                self.assertEqual(cm.exception.field, field, cm.exception)
                self.assertFalse(cm.exception.temporary)
        c = Client(api, "c-ref", "alloc-1", token=rig.token("c-ref"))
        # The server checks what the client cannot: a checkpoint time in the future.
        with self.assertRaises(LeaseAPIError) as cm:
            c.report(1, 1.0, "v100", checkpoint_at=time.time() + 3600)
        self.assertEqual((cm.exception.status, cm.exception.field), (400, "checkpoint_at"))
        for bad in (dict(steps_done=-1, steps_per_s=1), dict(steps_done=1, steps_per_s=float("nan")),
                    dict(steps_done=1, steps_per_s=float("inf")), dict(steps_done=1, steps_per_s=-1)):
            with self.assertRaises(ValueError):
                c.report(gpu_type="v100", **bad)
        with self.assertRaises(ValueError):
            c.report(1, 1.0, "")
        # Nothing listening: a transport error, temporary.
        with self.assertRaises(LeaseAPIError) as cm:
            Client("127.0.0.1:1", "c-ref", token="x", timeout=2).lease()
        self.assertEqual(cm.exception.status, 0)
        self.assertTrue(cm.exception.temporary)
        self.assertFalse(Client("127.0.0.1:1", "c-ref", token="x", timeout=2).health())

    def test_times(self):
        self.assertEqual(parse_time("2026-01-02T03:04:05.123456789Z"),
                         dt.datetime(2026, 1, 2, 3, 4, 5, 123456, tzinfo=dt.timezone.utc))
        self.assertEqual(parse_time("2026-01-02T05:04:05+02:00"),
                         dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc))
        self.assertIsNone(parse_time(""))
        self.assertEqual(format_time(0), "1970-01-01T00:00:00Z")
        with self.assertRaises(ValueError):
            format_time(dt.datetime(2026, 1, 1))


if __name__ == "__main__":
    unittest.main()
