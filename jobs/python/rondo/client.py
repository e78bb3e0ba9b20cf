"""The lease API's HTTP client (allocator/lease/README.md is the contract).

Stdlib only. The task finds the API and its identity as rondo-trainer and
jobs/lease-client.sh do:

* RONDO_LEASE_ADDR: host:port or URL of the allocator's lease API;
* RONDO_LEASE_ADDR_FILE: a file naming it (a line RONDO_LEASE_ADDR=URL, as a
  Nomad template over the agents' rondo-lease service renders it, or the
  bare URL), re-read on every call, so a running task follows the agents
  when an upgrade replaces them all; one of the two is required;
* RONDO_CACERT: for an https:// address, the CA that signed the agent's
  certificate (its tls {} block; default the system's roots);
  RONDO_CLIENT_CERT and RONDO_CLIENT_KEY when the agent verifies clients;
* NOMAD_JOB_ID, NOMAD_ALLOC_ID, NOMAD_NAMESPACE: set by Nomad (RONDO_JOB
  overrides the job id, as in lease-client.sh);
* the bearer token, first found: the file $RONDO_IDENTITY_FILE,
  $NOMAD_TOKEN_rondo, $NOMAD_SECRETS_DIR/nomad_rondo.jwt, $NOMAD_TOKEN,
  $NOMAD_SECRETS_DIR/nomad_token -- re-read on every call, because Nomad
  renews the workload identity at half its TTL.
"""

import datetime as _dt
import json
import math
import os
import ssl
import urllib.error
import urllib.request

IDENTITY_NAME = "rondo"
AUDIENCE = "rondo-lease"

__all__ = ["Client", "Lease", "LeaseAPIError", "batch_share", "token_from_env", "format_time", "parse_time"]


class LeaseAPIError(Exception):
    """A refusal by the API (4xx/5xx), or a transport failure (status 0)."""

    def __init__(self, status, message, field=None):
        self.status = status
        self.message = message
        self.field = field
        if field:
            text = "lease api: %d: %s (field %s)" % (status, message, field)
        else:
            text = "lease api: %d: %s" % (status, message)
        super().__init__(text)

    @property
    def temporary(self):
        """Whether retrying later may succeed (5xx, or no answer at all)."""
        return self.status == 0 or self.status >= 500


def format_time(t):
    """RFC 3339 (UTC, microseconds) of a datetime or a Unix time in seconds."""
    if isinstance(t, (int, float)):
        t = _dt.datetime.fromtimestamp(t, tz=_dt.timezone.utc)
    if t.tzinfo is None:
        raise ValueError("format_time: a naive datetime has no zone; use timezone.utc")
    return t.astimezone(_dt.timezone.utc).isoformat().replace("+00:00", "Z")


def parse_time(s):
    """Parses the RFC 3339 times the API answers (Go's encoding, nanoseconds
    and a Z or offset zone) into an aware datetime; None for None or ""."""
    if not s:
        return None
    s = s.strip()
    if s.endswith("Z") or s.endswith("z"):
        s = s[:-1] + "+00:00"
    # Python parses at most 6 fractional digits; Go writes up to 9.
    if "." in s:
        head, rest = s.split(".", 1)
        i = 0
        while i < len(rest) and rest[i].isdigit():
            i += 1
        frac, zone = rest[:i], rest[i:]
        s = head + ("." + frac[:6] if frac else "") + zone
    t = _dt.datetime.fromisoformat(s)
    if t.tzinfo is None:
        raise ValueError("parse_time: %r has no zone" % s)
    return t


def batch_share(total, workers, index):
    """Worker index's share of a total batch split as evenly as possible over
    workers, the lower indexes one more (256 over 3: 86, 85, 85); 0 when index
    is not in [0, workers) or total is not positive. The same split as the
    lease answer's batch (lease.BatchShare)."""
    if total <= 0 or workers <= 0 or index < 0 or index >= workers:
        return 0
    b = total // workers
    if index < total % workers:
        b += 1
    return b


class Lease:
    """A lease answer (POST /v1/lease).

    continue_ (bool): False -- checkpoint now and stop training; the
      allocator reuses the GPUs (it stops the task, SIGTERM, soon).
    expires_at (datetime): ask again before this (the next round's start).
    round (int), checkpoint_dir (str or None).
    checkpoint_now (bool), stop_at (datetime or None): a notice --
      checkpoint now, go on training, you are stopped at stop_at.
    role ("worker", "ps" or None), workers, ps, batch, total_batch (ints,
      0 when absent): a two-role elastic job's size in force and this
      worker's share of the total batch (two_role is True then).
    raw: the answer's JSON object, unknown fields included.
    """

    __slots__ = ("continue_", "expires_at", "round", "checkpoint_dir", "checkpoint_now", "stop_at", "role",
                 "workers", "ps", "batch", "total_batch", "raw", "received_at")

    def __init__(self, raw, received_at=None):
        self.raw = raw
        self.continue_ = bool(raw.get("continue", False))
        self.expires_at = parse_time(raw.get("lease_expires_at"))
        self.round = int(raw.get("round", 0))
        self.checkpoint_dir = raw.get("checkpoint_dir") or None
        self.checkpoint_now = bool(raw.get("checkpoint_now", False))
        self.stop_at = parse_time(raw.get("stop_at"))
        self.role = raw.get("role") or None
        self.workers = int(raw.get("workers", 0))
        self.ps = int(raw.get("ps", 0))
        self.batch = int(raw.get("batch", 0))
        self.total_batch = int(raw.get("total_batch", 0))
        self.received_at = received_at or _dt.datetime.now(_dt.timezone.utc)

    @property
    def two_role(self):
        return self.role is not None

    def __repr__(self):
        return "Lease(%r)" % (self.raw,)


def _read(path):
    try:
        with open(path, "r") as f:
            return f.read().strip()
    except OSError:
        return ""


def token_from_env(environ=None):
    """Returns a function that returns the task's bearer token, trying in
    order: the file $RONDO_IDENTITY_FILE, $NOMAD_TOKEN_rondo,
    $NOMAD_SECRETS_DIR/nomad_rondo.jwt, $NOMAD_TOKEN,
    $NOMAD_SECRETS_DIR/nomad_token. It reads them on every call (Nomad
    renews the identity)."""
    env = os.environ if environ is None else environ

    def token():
        secrets = env.get("NOMAD_SECRETS_DIR", "")
        if env.get("RONDO_IDENTITY_FILE"):
            v = _read(env["RONDO_IDENTITY_FILE"])
            if v:
                return v
        v = env.get("NOMAD_TOKEN_" + IDENTITY_NAME, "").strip()
        if v:
            return v
        if secrets:
            v = _read(os.path.join(secrets, "nomad_%s.jwt" % IDENTITY_NAME))
            if v:
                return v
        v = env.get("NOMAD_TOKEN", "").strip()
        if v:
            return v
        if secrets:
            v = _read(os.path.join(secrets, "nomad_token"))
            if v:
                return v
        raise LeaseAPIError(401, "no workload identity: add an identity block with env or file to the task "
                                 "(identity { name = \"rondo\" aud = [\"rondo-lease\"] file = true }), "
                                 "or set RONDO_IDENTITY_FILE")

    return token


def _number(name, v):
    v = float(v)
    if not math.isfinite(v) or v < 0:
        raise ValueError("%s must be a finite number >= 0 (got %r)" % (name, v))
    return v


def _norm_addr(addr):
    addr = (addr or "").strip()
    if not addr:
        return ""
    if "://" not in addr:
        addr = "http://" + addr
    return addr.rstrip("/")


def _addr_from_file(name):
    """An address file's address: the value of its last RONDO_LEASE_ADDR=
    line, or its last bare line; "" when it cannot be read or names none."""
    if not name:
        return ""
    try:
        with open(name) as f:
            text = f.read()
    except OSError:
        return ""
    addr = ""
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("RONDO_LEASE_ADDR="):
            addr = line[len("RONDO_LEASE_ADDR="):].strip("\"'")
        elif "=" not in line:
            addr = line
    return _norm_addr(addr)


class Client:
    """The lease API client.

        c = Client.from_env()
        c.report(steps_done=1200, steps_per_s=3.5, gpu_type="v100")
        l = c.lease()
        if not l.continue_: checkpoint to l.checkpoint_dir, stop
        if l.checkpoint_now: checkpoint now, go on; stopped at l.stop_at
    """

    def __init__(self, addr, job, alloc="", namespace="", token=None, timeout=30.0, cafile=None, certfile=None,
                 keyfile=None, addr_file=None):
        # addr_file: read before every call for the address (module doc);
        # addr serves while it is missing or names none.
        self.addr_file = addr_file or None
        addr = _norm_addr(addr) or _addr_from_file(self.addr_file)
        if not addr:
            raise ValueError("Client: no address")
        self.addr = addr
        self.job = job
        self.alloc = alloc or ""
        self.namespace = namespace or ""
        if token is None:
            token = token_from_env()
        elif isinstance(token, str):
            tok = token
            token = lambda: tok  # noqa: E731
        self.token = token
        self.timeout = timeout
        # An https agent with a private CA (its tls {} block).
        self._ssl = None
        if (cafile or certfile) and (self.addr.startswith("https://") or self.addr_file):
            self._ssl = ssl.create_default_context(cafile=cafile or None)
            if certfile:
                self._ssl.load_cert_chain(certfile, keyfile or None)

    @classmethod
    def from_env(cls, environ=None, timeout=30.0):
        """A client from the task's environment (module doc). Raises
        LookupError when RONDO_LEASE_ADDR or the job id is missing."""
        env = os.environ if environ is None else environ
        addr_file = env.get("RONDO_LEASE_ADDR_FILE", "")
        addr = env.get("RONDO_LEASE_ADDR", "") or _addr_from_file(addr_file)
        if not addr:
            if addr_file:
                raise LookupError("lease client: RONDO_LEASE_ADDR is not set and RONDO_LEASE_ADDR_FILE (%s) names "
                                  "no address" % addr_file)
            raise LookupError("lease client: RONDO_LEASE_ADDR is not set")
        job = env.get("RONDO_JOB") or env.get("NOMAD_JOB_ID", "")
        if not job:
            raise LookupError("lease client: NOMAD_JOB_ID is not set (not running under Nomad?)")
        return cls(addr, job, alloc=env.get("NOMAD_ALLOC_ID", ""), namespace=env.get("NOMAD_NAMESPACE", ""),
                   token=token_from_env(env), timeout=timeout, cafile=env.get("RONDO_CACERT") or None,
                   certfile=env.get("RONDO_CLIENT_CERT") or None, keyfile=env.get("RONDO_CLIENT_KEY") or None,
                   addr_file=addr_file or None)

    def base(self):
        """The address of the next call: addr_file's when it names one,
        else addr."""
        return _addr_from_file(self.addr_file) or self.addr

    def _ids(self):
        body = {"job": self.job}
        if self.alloc:
            body["alloc"] = self.alloc
        if self.namespace:
            body["namespace"] = self.namespace
        return body

    def _post(self, path, body, timeout=None):
        data = json.dumps(body).encode()
        req = urllib.request.Request(self.base() + path, data=data, method="POST", headers={
            "Content-Type": "application/json", "Authorization": "Bearer " + self.token()})
        try:
            with urllib.request.urlopen(req, timeout=self.timeout if timeout is None else timeout,
                                        context=self._ssl) as resp:
                raw = resp.read(1 << 20)
                return resp.status, raw
        except urllib.error.HTTPError as e:
            raw = e.read(1 << 20)
            msg, field = raw.decode("utf-8", "replace").strip(), None
            try:
                j = json.loads(raw)
                msg, field = j.get("error") or msg, j.get("field")
            except ValueError:
                pass
            raise LeaseAPIError(e.code, msg, field) from None
        except (urllib.error.URLError, OSError) as e:
            raise LeaseAPIError(0, "%s: %s" % (path, getattr(e, "reason", e))) from None

    def report(self, steps_done, steps_per_s, gpu_type, partner=None, epochs_done=None, checkpoint_at=None,
               checkpoint_s=None, restore_s=None, timeout=None):
        """POST /v1/progress: steps done since the job's first start
        (checkpointed progress), the whole job's steps/s measured since the
        last report, the GPU type it ran on; optionally the job it shares
        its GPUs with, epochs done, when it last wrote a checkpoint (a
        datetime or Unix seconds), how long that took and how long its last
        (re)start took until it trained again (seconds)."""
        body = self._ids()
        body["steps_done"] = int(steps_done)
        if body["steps_done"] < 0:
            raise ValueError("steps_done must be >= 0")
        body["throughput_steps_per_s"] = _number("steps_per_s", steps_per_s)
        if not gpu_type:
            raise ValueError("gpu_type is required")
        body["gpu_type"] = gpu_type
        if partner:
            body["partner"] = partner
        if epochs_done is not None:
            body["epochs_done"] = _number("epochs_done", epochs_done)
        if checkpoint_at is not None:
            body["checkpoint_at"] = format_time(checkpoint_at)
        if checkpoint_s is not None:
            body["checkpoint_s"] = _number("checkpoint_s", checkpoint_s)
        if restore_s is not None:
            body["restore_s"] = _number("restore_s", restore_s)
        self._post("/v1/progress", body, timeout)

    def lease(self, timeout=None):
        """POST /v1/lease: whether the lease continues (a Lease)."""
        _, raw = self._post("/v1/lease", self._ids(), timeout)
        try:
            return Lease(json.loads(raw))
        except (ValueError, TypeError) as e:
            raise LeaseAPIError(0, "/v1/lease: decode answer: %s" % e) from None

    def health(self, timeout=None):
        """GET /v1/health (no token): True when the API answers ok."""
        try:
            with urllib.request.urlopen(self.base() + "/v1/health", timeout=self.timeout if timeout is None else timeout,
                                        context=self._ssl) as r:
                return json.loads(r.read()).get("status") == "ok"
        except (urllib.error.URLError, OSError, ValueError):
            return False
