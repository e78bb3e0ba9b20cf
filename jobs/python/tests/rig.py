"""The tests' rig: the real lease Server that allocator/lease's
TestPythonClient starts (RONDO_TEST_API) and its control endpoint
(RONDO_TEST_CONTROL): tokens signed by the key its JWKS serves, grants per
job, the reports it received. Run them with
    go test -count=1 -run TestPythonClient -v ./allocator/lease/
"""

import json
import os
import tempfile
import unittest
import urllib.request

CONTROL = os.environ.get("RONDO_TEST_CONTROL", "")
API = os.environ.get("RONDO_TEST_API", "")
PYTHON = os.environ.get("RONDO_TEST_PYTHON", "/usr/bin/python3")
HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # jobs/python


def require():
    if not CONTROL or not API:
        raise unittest.SkipTest("no lease server: these tests run against the real one, started by "
                                "`go test -run TestPythonClient ./allocator/lease/`")


def _call(method, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(CONTROL + path, data=data, method=method, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read())


def token(job, alloc="alloc-1", aud="rondo-lease", namespace="default", expired_s=0):
    return _call("POST", "/token", {"job": job, "alloc": alloc, "aud": aud, "namespace": namespace,
                                    "expired_s": expired_s})["token"]


def grant(job, cont=True, **kw):
    body = {"job": job, "continue": cont}
    body.update(kw)
    _call("POST", "/grant", body)


def reports(job):
    return _call("GET", "/reports?job=" + job)


def leases(job):
    return _call("GET", "/leases?job=" + job)["count"]


def task_env(job, alloc="alloc-1", **extra):
    """A task's environment as Nomad and Rondo give it: the identity in
    $NOMAD_SECRETS_DIR/nomad_rondo.jwt, the lease address without a
    scheme (as jobs write it), a checkpoint dir."""
    secrets = tempfile.mkdtemp(prefix="rondo-py-secrets-")
    with open(os.path.join(secrets, "nomad_rondo.jwt"), "w") as f:
        f.write(token(job, alloc) + "\n")
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": HERE, "PYTHONDONTWRITEBYTECODE": "1",
           "RONDO_LEASE_ADDR": API.replace("http://", ""), "NOMAD_JOB_ID": job, "NOMAD_ALLOC_ID": alloc,
           "NOMAD_NAMESPACE": "default", "NOMAD_SECRETS_DIR": secrets, "NOMAD_ALLOC_INDEX": "0",
           "RONDO_GPU_TYPE": "v100", "RONDO_CHECKPOINT_DIR": tempfile.mkdtemp(prefix="rondo-py-ck-")}
    env.update(extra)
    return env
