"""Callbacks that put a Rondo session into common trainers, by duck typing
only (neither library is imported here).

PyTorch Lightning:

    from rondo.callbacks import LightningCallback, latest_lightning_checkpoint
    cb = LightningCallback(session)               # a Session, started
    trainer = pl.Trainer(callbacks=[cb], ...)     # pass it where Callbacks go
    trainer.fit(model, ckpt_path=latest_lightning_checkpoint(session.checkpoint_dir))

  Lightning calls the hooks by name (on_train_start, on_train_batch_end,
  on_train_end); a strict Lightning that wants a Callback subclass:
  class CB(LightningCallback, pl.Callback): pass.

HuggingFace transformers:

    from rondo.callbacks import HFCallback, latest_hf_checkpoint
    args = TrainingArguments(output_dir=session.checkpoint_dir, ...)
    trainer = Trainer(..., args=args, callbacks=[HFCallback(session)])
    trainer.train(resume_from_checkpoint=latest_hf_checkpoint(session.checkpoint_dir))

  (the same applies: class CB(HFCallback, TrainerCallback): pass.)

Both: progress (the trainer's global step) and steps/s go to the session's
reports; a stop (SIGTERM), a notice (checkpoint_now) or a lease that ends
makes the trainer checkpoint; a stop then ends training so the process
exits 0; the checkpoint's time and cost are reported.
"""

import os
import re
import time

__all__ = ["LightningCallback", "HFCallback", "latest_lightning_checkpoint", "latest_hf_checkpoint"]


def latest_lightning_checkpoint(directory, name="rondo-last.ckpt"):
    """The Lightning checkpoint LightningCallback writes, or None."""
    p = os.path.join(directory, name)
    return p if os.path.exists(p) else None


def latest_hf_checkpoint(directory):
    """The newest checkpoint-N directory a HuggingFace Trainer saved in
    directory (its output_dir), or None."""
    best, path = -1, None
    try:
        names = os.listdir(directory)
    except OSError:
        return None
    for n in names:
        m = re.fullmatch(r"checkpoint-(\d+)", n)
        if m and int(m.group(1)) > best and os.path.isdir(os.path.join(directory, n)):
            best, path = int(m.group(1)), os.path.join(directory, n)
    return path


class LightningCallback:
    """A Lightning-style Callback (module doc). The checkpoint is
    trainer.save_checkpoint(<checkpoint dir>/rondo-last.ckpt), written to a
    temporary name and renamed; on a stop, trainer.should_stop is set."""

    def __init__(self, session, name="rondo-last.ckpt"):
        self.session = session
        self.name = name

    def on_train_start(self, trainer, pl_module):
        step = int(getattr(trainer, "global_step", 0))
        if step > 0:
            self.session.resumed(step)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, *args):
        step = int(trainer.global_step)
        self.session.step(step)
        why = self.session.checkpoint_due()
        if why is None:
            return
        self.save(trainer, why)
        if why == "stop":
            trainer.should_stop = True

    def save(self, trainer, why="periodic"):
        path = os.path.join(self.session.checkpoint_dir, self.name)
        tmp = path + ".tmp"
        began = time.time()
        trainer.save_checkpoint(tmp)
        os.replace(tmp, path)
        self.session.checkpointed(int(trainer.global_step), seconds=time.time() - began)
        return path

    def on_train_end(self, trainer, pl_module):
        self.session.close()


class HFCallback:
    """A HuggingFace TrainerCallback-style callback (module doc): when the
    session says, it sets control.should_save (the Trainer saves a
    checkpoint-N in args.output_dir, which should be the session's
    checkpoint dir) and, on a stop, control.should_training_stop; on_save
    reports the checkpoint and its cost."""

    def __init__(self, session):
        self.session = session
        self._asked = None  # (why, time) of a save asked for

    def on_train_begin(self, args, state, control, **kw):
        step = int(getattr(state, "global_step", 0))
        if step > 0:
            self.session.resumed(step)
        return control

    def on_step_end(self, args, state, control, **kw):
        self.session.step(int(state.global_step))
        why = self.session.checkpoint_due()
        if why is not None and self._asked is None:
            control.should_save = True
            self._asked = (why, time.time())
        if why == "stop":
            control.should_training_stop = True
        return control

    def on_save(self, args, state, control, **kw):
        began = self._asked[1] if self._asked else None
        self.session.checkpointed(int(state.global_step), seconds=(time.time() - began) if began else None)
        self._asked = None
        return control

    def on_train_end(self, args, state, control, **kw):
        self.session.close()
        return control
