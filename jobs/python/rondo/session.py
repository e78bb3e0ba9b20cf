"""A training task's side of Rondo: progress and throughput reports, lease
renewal in a background thread, the checkpoint directory, the checkpoint
handshake and the batch split.

    s = Session.from_env().start()       # signals, first lease, reporter thread
    step = restore(s.checkpoint_dir)     # resume; then s.resumed(step)
    while step < total:
        train one step; step += 1
        s.step(step)                     # progress (steps done since the job's first start)
        why = s.checkpoint_due()         # "stop", "notice", "lease_end" or None
        if why:
            t = time.time(); save(...); s.checkpointed(step, seconds=time.time() - t)
            if why == "stop":            # SIGTERM/SIGINT: Rondo suspends the job
                s.close(); sys.exit(0)
    s.close()

The handshake (allocator/lease/README.md):

* SIGTERM or SIGINT (Nomad stops the task: a suspension, a migration)
  -> checkpoint_due() says "stop": checkpoint, report it (close() sends
  the last report with checkpoint_at/checkpoint_s), exit 0 within the
  task's kill_timeout.
* a lease answer with checkpoint_now (a notice) -> "notice" once per
  notice: checkpoint now and go on training; the job is stopped at
  stop_at.
* a lease answer with continue false -> "lease_end": checkpoint now and
  keep running until Nomad stops the task (a task that exited on its own
  would look finished to Nomad).
"""

import datetime as _dt
import os
import signal
import sys
import threading
import time

from .client import Client, LeaseAPIError

__all__ = ["Session", "process_start_time", "gpu_type_from_env"]

_KNOWN_TYPES = ("v100", "p100", "k80", "a100", "h100", "h200", "a10", "l4", "t4")


def process_start_time():
    """The Unix time this process started (Linux: /proc/self/stat), so that
    restore_s counts the interpreter's and the libraries' start too; else
    the time this module was imported."""
    try:
        with open("/proc/self/stat") as f:
            stat = f.read()
        ticks = int(stat.rsplit(")", 1)[1].split()[19])  # field 22, starttime
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        age = uptime - ticks / os.sysconf("SC_CLK_TCK")
        if age >= 0:
            return time.time() - age
    except (OSError, ValueError, IndexError):
        pass
    return _IMPORTED


_IMPORTED = time.time()


def gpu_type_from_env(environ=None):
    """RONDO_GPU_TYPE (jobs set it from node meta ${meta.rondo_gpu_type}),
    else a known type word in the first visible GPU's uuid, else None."""
    env = os.environ if environ is None else environ
    t = env.get("RONDO_GPU_TYPE", "").strip()
    if t:
        return t
    vis = env.get("CUDA_VISIBLE_DEVICES", "")
    if vis:
        low = vis.split(",")[0].lower()
        for k in _KNOWN_TYPES:
            if k in low:
                return k
    return None


def _env_seconds(env, key, default):
    v = env.get(key, "")
    if not v:
        return default
    mult = 1.0
    for suf, m in (("ms", 1e-3), ("s", 1.0), ("m", 60.0), ("h", 3600.0)):
        if v.endswith(suf):
            v, mult = v[: -len(suf)], m
            break
    try:
        x = float(v) * mult
    except ValueError:
        raise ValueError("%s=%r: want seconds or a duration like 500ms, 2s, 1m" % (key, env.get(key)))
    if x < 0:
        raise ValueError("%s=%r: must be >= 0" % (key, env.get(key)))
    return x


class Session:
    """One task's session with Rondo (module doc). Thread-safe: the trainer
    calls step/checkpoint_due/checkpointed from its loop; a daemon thread
    reports and renews the lease."""

    def __init__(self, client=None, gpu_type=None, checkpoint_dir=None, report_every=1.0, partner=None,
                 chief=True, alloc_index=0, log=None, install_signals=True):
        self.client = client
        self.gpu_type = gpu_type or "unknown"
        self._gpu_type_known = gpu_type is not None
        self._dir = checkpoint_dir
        self.report_every = max(float(report_every), 0.05)
        self.partner = partner or None
        self.chief = chief
        self.alloc_index = alloc_index
        self.log = log or (lambda msg: print("rondo: " + msg, flush=True))
        self.install_signals = install_signals
        self.started_at = process_start_time()
        self.epochs_done = None  # set it to report epochs_done (a two-role job)
        self.on_batch_change = None  # called with (batch, workers, lease) when the split changes

        self._mu = threading.Lock()
        self._steps = 0  # steps done since the job's first start
        self._first_step_at = None  # monotonic time of the first step of this process
        self._last_step_at = None  # monotonic time of the last step
        self._win_steps = None  # the steps at the start of the throughput window
        self._win_at = None
        self._ck_at = None  # Unix time of the last checkpoint (written, or resumed from)
        self._ck_s = None  # how long the last write took
        self._restore_s = None
        self._stop_signal = None
        self._notice = None  # the stop_at of a notice not yet acted on
        self._noticed = None  # the stop_at of the last notice seen
        self._lease_end = False
        self._continuing = True
        self._lease = None
        self._failing = False
        self._closed = threading.Event()
        self._thread = None
        self.last_rate = None  # the steps/s of the last report sent
        self.reports = 0
        self.debug = False  # log every report (RONDO_DEBUG=1)

    # -- construction --------------------------------------------------

    @classmethod
    def from_env(cls, environ=None, log=None, install_signals=True, **kw):
        """A session from the task's environment: the lease client
        (RONDO_LEASE_ADDR etc., rondo.client), RONDO_GPU_TYPE,
        RONDO_CHECKPOINT_DIR, RONDO_REPORT_INTERVAL (seconds or a duration,
        default 10s: the reporter also asks shortly before each lease
        expires), RONDO_PARTNER, NOMAD_ALLOC_INDEX (only index 0 reports
        progress; every task asks for its lease), RONDO_DEBUG=1 (log every
        report). Without RONDO_LEASE_ADDR or RONDO_LEASE_ADDR_FILE
        the session runs without the API (standalone)."""
        env = os.environ if environ is None else environ
        lg = log or (lambda msg: print("rondo: " + msg, flush=True))
        client = None
        if env.get("RONDO_LEASE_ADDR") or env.get("RONDO_LEASE_ADDR_FILE"):
            try:
                client = Client.from_env(env)
            except LookupError as e:
                lg("lease API off: %s" % e)
        try:
            index = int(env.get("NOMAD_ALLOC_INDEX", "0") or 0)
        except ValueError:
            index = 0
        kw.setdefault("gpu_type", gpu_type_from_env(env))
        kw.setdefault("checkpoint_dir", env.get("RONDO_CHECKPOINT_DIR") or None)
        kw.setdefault("report_every", _env_seconds(env, "RONDO_REPORT_INTERVAL", 10.0))
        kw.setdefault("partner", env.get("RONDO_PARTNER") or None)
        kw.setdefault("chief", index == 0)
        kw.setdefault("alloc_index", index)
        s = cls(client=client, log=lg, install_signals=install_signals, **kw)
        s._env = env
        s.debug = env.get("RONDO_DEBUG", "") not in ("", "0", "false")
        return s

    def start(self):
        """Installs the SIGTERM/SIGINT handlers (main thread only), asks for
        the first lease (its checkpoint_dir and batch are then known) and
        starts the reporter thread. Returns self."""
        if self.install_signals and threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                signal.signal(sig, self._on_signal)
        if self.client is not None:
            if not self._gpu_type_known and self.chief:
                self.log("RONDO_GPU_TYPE is not set: reporting gpu_type %r (set it from ${meta.rondo_gpu_type})"
                         % self.gpu_type)
            self._ask_lease(timeout=10)
            self._thread = threading.Thread(target=self._loop, name="rondo-lease", daemon=True)
            self._thread.start()
        return self

    def __enter__(self):
        return self.start() if self._thread is None else self

    def __exit__(self, *exc):
        self.close()
        return False

    # -- what the trainer reads ----------------------------------------

    @property
    def checkpoint_dir(self):
        """RONDO_CHECKPOINT_DIR, else the lease answer's checkpoint_dir, else
        $NOMAD_ALLOC_DIR/checkpoint (lost when the job moves), else
        ./checkpoint. Created on first use."""
        d = self._dir
        if not d:
            with self._mu:
                d = self._lease.checkpoint_dir if self._lease is not None else None
        if not d:
            env = getattr(self, "_env", os.environ)
            alloc = env.get("NOMAD_ALLOC_DIR")
            d = os.path.join(alloc, "checkpoint") if alloc else os.path.abspath("checkpoint")
        os.makedirs(d, exist_ok=True)
        return d

    @property
    def lease(self):
        """The last lease answer (a rondo.Lease), or None."""
        with self._mu:
            return self._lease

    @property
    def stop_requested(self):
        """True once SIGTERM or SIGINT arrived: checkpoint and exit 0."""
        return self._stop_signal is not None

    def batch_size(self, default):
        """This worker's batch: the lease answer's batch (a two-role elastic
        job: its share of the total batch over the workers in force), else
        default. Read it every step: a live resize changes it."""
        with self._mu:
            l = self._lease
        if l is not None and l.two_role and l.batch > 0:
            return l.batch
        return default

    def checkpoint_due(self):
        """Why to checkpoint now: "stop" (a signal: then exit 0), "notice"
        (checkpoint_now: then go on), "lease_end" (continue false: then go
        on until stopped), or None."""
        with self._mu:
            if self._stop_signal is not None:
                return "stop"
            if self._notice is not None:
                return "notice"
            if self._lease_end:
                return "lease_end"
        return None

    # -- what the trainer tells ----------------------------------------

    def resumed(self, steps, checkpoint_at=None):
        """The trainer loaded a checkpoint holding steps (checkpoint_at: when
        it was written, Unix seconds or a datetime; it is reported as the
        last checkpoint until a new one is written)."""
        if isinstance(checkpoint_at, _dt.datetime):
            checkpoint_at = checkpoint_at.timestamp()
        with self._mu:
            self._steps = int(steps)
            if checkpoint_at is not None:
                self._ck_at = float(checkpoint_at)

    def step(self, steps_done):
        """Progress: steps done since the job's first start. The first call
        of the process fixes restore_s (process start to this step) and
        starts the throughput window."""
        now = time.monotonic()
        with self._mu:
            if self._first_step_at is None:
                self._first_step_at = now
                self._restore_s = max(time.time() - self.started_at, 0.0)
                self._win_steps, self._win_at = int(steps_done), now
            self._steps = int(steps_done)
            self._last_step_at = now

    @property
    def restore_s(self):
        return self._restore_s

    def checkpointed(self, steps=None, seconds=None, at=None):
        """A checkpoint was written (steps it holds, seconds writing it took,
        at: when, default now). Clears a pending notice or lease end; the
        next report carries checkpoint_at and checkpoint_s."""
        if isinstance(at, _dt.datetime):
            at = at.timestamp()
        with self._mu:
            self._ck_at = time.time() if at is None else float(at)
            if seconds is not None:
                self._ck_s = max(float(seconds), 0.0)
            if steps is not None:
                self._steps = int(steps)
            self._notice = None
            self._lease_end = False

    def close(self, report=True, timeout=5.0):
        """Stops the reporter and sends a last report (steps, the checkpoint
        just written) synchronously. Call it before exiting."""
        if self._closed.is_set():
            return
        self._closed.set()
        if self._thread is not None:
            # A call of the reporter's in flight may wait on the API (it
            # answers slowly while the allocator enforces a round): the
            # last report does not wait for it (the thread is a daemon).
            self._thread.join(timeout=min(timeout, 1.0))
        if report and self.client is not None and self.chief:
            self._report(final=True, timeout=timeout)

    # -- internals -------------------------------------------------------

    def _on_signal(self, signum, frame):
        if self._stop_signal is None:
            self._stop_signal = signum
            name = signal.Signals(signum).name
            # os.write, not print: the handler may interrupt a print of the
            # main thread, and sys.stdout's buffer is not reentrant.
            try:
                os.write(sys.stdout.fileno(), ("rondo: %s: checkpoint and exit\n" % name).encode())
            except (OSError, ValueError, AttributeError):
                pass

    def _report(self, final=False, timeout=None):
        # The window runs from the end of the previous one to the last
        # step: steps over the wall time they took, stalls included, but
        # never the time after training stopped (a stop, the end, a report
        # that waited on the API).
        with self._mu:
            if self._first_step_at is None:
                return  # not trained yet: nothing measured, restore_s unknown
            steps, end = self._steps, self._last_step_at
            dt = end - self._win_at
            rate = (steps - self._win_steps) / dt if dt > 0 else 0.0
            ck_at, ck_s, restore_s = self._ck_at, self._ck_s, self._restore_s
            epochs = self.epochs_done
        if final and dt < 0.5:
            rate = 0.0  # too short a window to measure: progress only
        try:
            self.client.report(steps, max(rate, 0.0), self.gpu_type, partner=self.partner, epochs_done=epochs,
                               checkpoint_at=ck_at, checkpoint_s=ck_s, restore_s=restore_s, timeout=timeout)
        except LeaseAPIError as e:
            self._api_error(e)
            return
        with self._mu:
            self._win_steps, self._win_at = steps, end
        self.last_rate = rate
        self.reports += 1
        if self.debug:
            self.log("report: steps_done=%d steps_per_s=%.3f over %.3f s%s" % (steps, rate, dt, " (last)" if final else ""))

    def _api_error(self, e):
        if not self._failing:
            self.log("lease API: %s" % e)
        self._failing = True

    def _ask_lease(self, timeout=None):
        try:
            l = self.client.lease(timeout=timeout)
        except LeaseAPIError as e:
            self._api_error(e)
            return None
        if self._failing:
            self.log("lease API reachable again")
        self._failing = False
        changed_batch = False
        with self._mu:
            old = self._lease
            self._lease = l
            if l.two_role and (old is None or (old.batch, old.workers, old.ps) != (l.batch, l.workers, l.ps)):
                changed_batch = True
            if not l.continue_ and self._continuing:
                self._lease_end = True
            new_notice = l.continue_ and l.checkpoint_now and l.stop_at != self._noticed
            if new_notice:
                self._noticed = l.stop_at
                self._notice = l.stop_at
            was = self._continuing
            self._continuing = l.continue_
        if changed_batch:
            if l.role == "ps":
                self.log("parameter server %d: %d workers, %d ps" % (self.alloc_index, l.workers, l.ps))
            else:
                self.log("batch %d of %d, worker %d of %d, %d ps" % (l.batch, l.total_batch, self.alloc_index,
                                                                     l.workers, l.ps))
            if self.on_batch_change is not None:
                self.on_batch_change(l.batch, l.workers, l)
        if l.continue_ != was:
            self.log("lease continue=%s (round %d, until %s)" % (str(l.continue_).lower(), l.round,
                                                                  l.expires_at.isoformat() if l.expires_at else "?"))
        if new_notice:
            self.log("notice: checkpoint now, stop at %s (round %d)" % (l.stop_at.isoformat() if l.stop_at else "?",
                                                                        l.round))
        return l

    def next_wait(self, now=None):
        """Seconds until the next report and lease request: the report
        interval, but never past about one second before the lease expires
        (the lease answer's interval), and soon after it expired."""
        l = self.lease
        every = self.report_every
        if l is None or l.expires_at is None:
            return every
        now = now if now is not None else _dt.datetime.now(_dt.timezone.utc)
        remaining = (l.expires_at - now).total_seconds()
        if remaining > 0:
            return min(every, max(0.5, remaining - 1.0))
        return min(every, 0.5)

    def _loop(self):
        while not self._closed.wait(self.next_wait()):
            if self.chief:
                self._report()
            if self._closed.is_set():
                return
            self._ask_lease()
