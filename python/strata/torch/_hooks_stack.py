"""Which saved-tensor hooks are active on this thread.

torch (1.13 at least) cannot say whether saved_tensors_hooks are active,
and the innermost context wins: strata's handles pushed over another
context (non-reentrant activation checkpointing's recomputation,
torch.autograd.graph.save_on_cpu) would hide it, and checkpointing then
fails in backward. So the context class's __enter__ and __exit__ are
wrapped once, here, to count the contexts open on each thread (subclasses
included: checkpoint's hooks and save_on_cpu derive from it). strata
installs its own hooks only where no other context is open.
"""

import threading

import torch

_counts = threading.local()


def _wrap():
    cls = torch.autograd.graph.saved_tensors_hooks
    if getattr(cls, "_strata_counted", False):
        return
    enter, exit_ = cls.__enter__, cls.__exit__

    def counted_enter(self):
        result = enter(self)
        _counts.open = getattr(_counts, "open", 0) + 1
        return result

    def counted_exit(self, *exc):
        _counts.open = getattr(_counts, "open", 1) - 1
        return exit_(self, *exc)

    cls.__enter__, cls.__exit__ = counted_enter, counted_exit
    cls._strata_counted = True


def others_open():
    """True when a saved_tensors_hooks context not strata's is open on this
    thread."""
    return getattr(_counts, "open", 0) > getattr(_counts, "ours", 0)


class ours:
    """strata's own saved_tensors_hooks context, counted as strata's."""

    def __init__(self, pack, unpack):
        self.hooks = torch.autograd.graph.saved_tensors_hooks(pack, unpack)

    def __enter__(self):
        self.hooks.__enter__()
        _counts.ours = getattr(_counts, "ours", 0) + 1

    def __exit__(self, *exc):
        _counts.ours -= 1
        return self.hooks.__exit__(*exc)


_wrap()
