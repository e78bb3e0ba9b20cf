"""Rondo's job side in Python: the lease API client (rondo.client), the task's
session with the allocator (rondo.session: reports, lease renewal, the
checkpoint handshake, the batch split), a plain-PyTorch training loop
(rondo.torch, imports torch) and duck-typed callbacks for Lightning- and
HuggingFace-style trainers (rondo.callbacks). Stdlib only, except
rondo.torch. See jobs/python/README.md.
"""

from .client import Client, Lease, LeaseAPIError, batch_share, format_time, parse_time, token_from_env
from .session import Session, gpu_type_from_env, process_start_time

__all__ = ["Client", "Lease", "LeaseAPIError", "Session", "batch_share", "format_time", "parse_time",
           "token_from_env", "gpu_type_from_env", "process_start_time"]
