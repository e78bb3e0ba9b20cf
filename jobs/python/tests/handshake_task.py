"""A minimal task for the SIGTERM handshake test: trains (sleeps) one step
every 10 ms under a Session, checkpoints atomically when told, exits 0
after a stop."""

import json
import os
import sys
import time

from rondo import Session

s = Session.from_env().start()
path = os.path.join(s.checkpoint_dir, "ck.json")
step = 0
if os.path.exists(path):
    with open(path) as f:
        ck = json.load(f)
    step = ck["step"]
    s.resumed(step, checkpoint_at=ck["at"])
print("ready step=%d" % step, flush=True)
while step < 100000:
    time.sleep(0.01)
    step += 1
    s.step(step)
    why = s.checkpoint_due()
    if why:
        began = time.time()
        time.sleep(0.2)  # a checkpoint that takes a while
        tmp = path + ".tmp"
        at = time.time()
        with open(tmp, "w") as f:
            json.dump({"step": step, "at": at}, f)
        os.replace(tmp, path)
        # The checkpoint's own time, as a trainer that knows it reports
        # it (the default, now, is a few ms later on a loaded machine).
        s.checkpointed(step, seconds=time.time() - began, at=at)
        print("checkpoint %s step=%d" % (why, step), flush=True)
        if why == "stop":
            s.close()
            sys.exit(0)
