"""The saved-tensor hook contexts open on this thread.

torch (1.13 at least) cannot say which saved_tensors_hooks are active, and
the innermost context wins: strata's hooks pushed over another context
(non-reentrant checkpointing's recomputation, save_on_cpu, a user's own)
would hide it. So the context class's __enter__ and __exit__ are wrapped
once, here, to keep a stack of the open contexts per thread (subclasses
included: checkpoint's hooks and save_on_cpu derive from it), and
strata's hooks pass what they do not handle to the context below them.
"""

import threading

import torch

_local = threading.local()


def _stack():
    stack = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = []
    return stack


def _wrap():
    cls = torch.autograd.graph.saved_tensors_hooks
    if getattr(cls, "_strata_counted", False):
        return
    enter, exit_ = cls.__enter__, cls.__exit__

    def counted_enter(self):
        result = enter(self)
        _stack().append(self)
        return result

    def counted_exit(self, *exc):
        stack = _stack()
        if stack and stack[-1] is self:
            stack.pop()
        elif self in stack:  # closed out of order: drop it all the same
            stack.remove(self)
        return exit_(self, *exc)

    cls.__enter__, cls.__exit__ = counted_enter, counted_exit
    cls._strata_counted = True


def top():
    """The innermost open context (its pack_hook and unpack_hook), or
    None."""
    stack = _stack()
    return stack[-1] if stack else None


def push(pack, unpack):
    """A context manager for strata's own hooks (counted like the rest)."""
    return torch.autograd.graph.saved_tensors_hooks(pack, unpack)


_wrap()
