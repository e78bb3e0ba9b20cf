#!/usr/bin/env python3
"""The CUDA program of the GPU proof (scripts/gpu-proof.py): run as a Nomad
task, it reports what the GPU Nomad gave it looks like from inside, as one
JSON line on stdout.

  gpu_probe.py [SECONDS] [--mem-test]

It prints the device env the plugin set, the device torch sees (name, uuid,
SM count, memory), the TFLOPS of fp16 8192x8192 matmuls sustained for
SECONDS (default 10), and with --mem-test whether allocations just under and
just over the MPS pinned-memory limit succeed.
"""
import json
import os
import sys
import time

import torch

ENV = ["CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "CUDA_MPS_PIPE_DIRECTORY",
       "CUDA_MPS_LOG_DIRECTORY", "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE",
       "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "NOMAD_ALLOC_ID"]


def mib(n):
    return n // (1 << 20)


def main():
    secs = float(sys.argv[1]) if len(sys.argv) > 1 and not sys.argv[1].startswith("-") else 10.0
    out = {"env": {k: os.environ.get(k) for k in ENV if k in os.environ}}
    out["cuda_available"] = torch.cuda.is_available()
    if not out["cuda_available"]:
        print(json.dumps(out), flush=True)
        return 1
    p = torch.cuda.get_device_properties(0)
    out["device"] = {"count": torch.cuda.device_count(), "name": p.name,
                     "uuid": "GPU-" + str(p.uuid) if hasattr(p, "uuid") else None,
                     "sm_count": p.multi_processor_count, "total_memory_mib": mib(p.total_memory)}
    free, total = torch.cuda.mem_get_info(0)
    out["mem_get_info_mib"] = {"free": mib(free), "total": mib(total)}
    if "--mem-test" in sys.argv:
        # The limit the plugin set: CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=<MiB>M.
        lim = os.environ.get("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "")
        limit_mib = int(lim.split("=")[-1].rstrip("M")) if lim else mib(total)
        res = {"limit_mib": limit_mib}
        for label, size in (("under", limit_mib - 4096), ("over", limit_mib + 4096)):
            try:
                x = torch.empty(size << 20, dtype=torch.uint8, device="cuda")
                x.fill_(1)
                torch.cuda.synchronize()
                res[label] = {"mib": size, "ok": True}
                del x
            except RuntimeError as e:  # torch.OutOfMemoryError is a RuntimeError
                res[label] = {"mib": size, "ok": False, "error": str(e).splitlines()[0][:160]}
            torch.cuda.empty_cache()
        out["mem_test"] = res
    n = 8192
    a = torch.randn(n, n, device="cuda", dtype=torch.float16)
    b = torch.randn(n, n, device="cuda", dtype=torch.float16)
    for _ in range(5):
        a @ b
    torch.cuda.synchronize()
    t0, iters = time.time(), 0
    out["start"] = t0
    while time.time() - t0 < secs:
        for _ in range(20):
            a @ b
        torch.cuda.synchronize()
        iters += 20
    dt = time.time() - t0
    out["matmul"] = {"seconds": round(dt, 2), "iters": iters,
                     "tflops": round(2 * n ** 3 * iters / dt / 1e12, 1)}
    out["end"] = time.time()
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
