"""st.offload and st.materialized: a module's parameters in the store.

Borrowed ideas: ZeRO-Infinity's per-module fetch and release in forward
hooks (Rajbhandari et al., 2021; DeepSpeed's partitioned parameters), with
its two known gaps closed: autograd keeps no parameter storage (saved
tensors that are a parameter or a view of one become handles that
re-acquire in backward, through saved_tensors_hooks), and a parameter
touched outside forward raises instead of reading as an empty tensor.
"""

import contextlib
import functools

import torch

from strata._core import Kind, Tier
from strata.torch import _hooks_stack
from strata.torch._activations import ActivationSlots, _SavedActivation
from strata.torch._param import (DTYPES, OffloadedParameter, ParamRecord,
                                 _compute_device, _no_torch_function,
                                 storage_ptr)

_ATTR = "_strata_offload"


class _SavedParam:
    """A saved tensor that is (a view of) an offloaded parameter, and how
    many optimizer updates its values had when saved."""

    __slots__ = ("rec", "size", "stride", "offset", "updates")

    def __init__(self, rec, t):
        self.rec = rec
        self.size = t.size()
        self.stride = t.stride()
        self.offset = t.storage_offset()
        self.updates = rec.updates


class OffloadState:
    """What st.offload attaches to the model (model._strata_offload)."""

    def __init__(self, store, model):
        self.store = store
        self.model = model
        self.device = _compute_device(store)
        has_nvme = store.stats()["tiers"]["nvme"]["capacity_bytes"] > 0
        self.home = Tier.NVME if has_nvme else Tier.HOST
        self.records = []        # in model.parameters() order, unique
        self.by_storage = {}     # lease storage pointer -> record, while materialized
        self.depth = 0           # root forwards running
        self.late = []           # records materialized on use during forward
        self.all_materialized = False
        self.wrapped = []        # modules whose forward is wrapped
        self.activations = None  # ActivationSlots with activations=True

    def stream(self):
        if self.device.type == "cuda":
            return torch.cuda.current_stream(self.device).cuda_stream
        return 0

    def materialize_late(self, rec):
        # A parameter used outside its module's hooks (a tied head applied
        # by hand): held until the root forward ends.
        rec.materialize()
        self.late.append(rec)

    # saved_tensors_hooks. `below` is the context that was innermost when
    # strata's opened (None: none): what strata does not keep itself goes
    # to it, so that checkpointing's recomputation, save_on_cpu or a
    # user's hooks still see every save.

    def pack(self, t, below):
        rec = getattr(t, "_strata", None)
        if rec is None and self.by_storage:
            try:
                with _no_torch_function():
                    rec = self.by_storage.get(storage_ptr(t))
            except RuntimeError:  # no storage (sparse and the like)
                rec = None
        if rec is not None:
            if below is None and not self.all_materialized:
                with _no_torch_function():
                    return _SavedParam(rec, t)
            # The values as a plain tensor on the same memory (the lease,
            # or st.materialized's copy), never the Parameter, whose .data
            # becomes the placeholder again.
            with _no_torch_function():
                t = t.detach()
        if below is not None:
            return _Below(below.pack_hook(t))
        if rec is None and self.activations is not None:
            saved = self.activations.pack(t)
            if saved is not None:
                return saved
        return _Kept(t)

    def unpack(self, saved, below):
        kind = type(saved)
        if kind is _Kept:
            return saved.unpack()
        if kind is _Below:
            return below.unpack_hook(saved.packed)
        if kind is _SavedActivation:
            return self.activations.unpack(saved)
        if saved.rec.updates != saved.updates:
            # torch's own check, for values that live in the store.
            raise RuntimeError(
                f"one of the variables needed for gradient computation has "
                f"been modified: strata: {saved.rec.name} was changed (by "
                f"the optimizer, or written back) after the forward that "
                f"saved it")
        base = saved.rec.backward_view()
        with _no_torch_function():
            return base.as_strided(saved.size, saved.stride, saved.offset)

    def hooks(self):
        """strata's saved-tensor context for an outermost forward."""
        below = _hooks_stack.top()
        return _hooks_stack.push(lambda t: self.pack(t, below),
                                 lambda saved: self.unpack(saved, below))


class _Below:
    """What the context below strata's packed."""

    __slots__ = ("packed",)

    def __init__(self, packed):
        self.packed = packed


class _Kept:
    """A saved tensor torch keeps, with its version when saved: saved-tensor
    hooks turn off torch's check that it was not changed in place before
    backward, so it is made here."""

    __slots__ = ("tensor", "version")

    def __init__(self, t):
        self.tensor = t
        self.version = t._version

    def unpack(self):
        if self.tensor._version != self.version:
            raise_modified(self.tensor, self.version)
        return self.tensor


def raise_modified(t, version):
    raise RuntimeError(
        f"one of the variables needed for gradient computation has been "
        f"modified by an inplace operation: a saved {t.dtype} tensor of "
        f"shape {list(t.shape)} is at version {t._version}; expected version "
        f"{version} instead (checked by strata.torch, whose saved-tensor "
        f"hooks replace torch's check)")


def offload(model, store, activations=False):
    """Moves every parameter of `model` into `store`, in place.

    The same Parameter objects stay in the module (optimizer, tied weights
    and state_dict keys intact); their values move to store tensors homed
    on NVMe (on the host without an NVMe tier), and each module's
    parameters are acquired on the device tier around its forward (its
    forward is wrapped) and released after it, also when it raises.
    Gradients go to the store as each one accumulates. With
    activations=True, what autograd saves for backward goes to the store
    too (strata/torch/_activations.py), and the device budget then holds
    the activations the store keeps on the device. Returns the model.

    Raises ValueError for a module already offloaded, a parameter shared
    with another offloaded module, an empty parameter or a dtype the store
    lacks; a store error (a full tier) raises with the model left as it
    was: nothing is half offloaded.
    """
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"offload takes a torch.nn.Module, not {type(model).__name__}")
    if getattr(model, _ATTR, None) is not None:
        raise ValueError("strata: this module is already offloaded")
    named = _unique_parameters(model)
    for name, p in named:
        if isinstance(p, OffloadedParameter):
            raise ValueError(f"strata: parameter {name} is already offloaded "
                             f"(shared with another offloaded module)")
        if p.dtype not in DTYPES:
            raise ValueError(f"strata: parameter {name} is {p.dtype}; the store "
                             f"holds {', '.join(str(d) for d in DTYPES)}")
        if p.numel() == 0:
            raise ValueError(f"strata: parameter {name} has no elements "
                             f"{tuple(p.shape)}")
    state = OffloadState(store, model)
    if activations:
        state.activations = ActivationSlots(state)
    try:
        for name, p in named:
            rec = ParamRecord(state, name, p)
            state.records.append(rec)
            with _no_torch_function():
                store.write(rec.id, p.detach().to("cpu").contiguous())
            if p.requires_grad:
                rec.grad_id = rec._create(name + ".grad", Kind.GRADIENT)
    except BaseException:
        for rec in state.records:  # the model is untouched: drop the copies
            for tensor_id in (rec.id, rec.grad_id):
                if tensor_id is not None:
                    store.destroy(tensor_id)
        raise
    # Every value is in the store: only now do the parameters change.
    for rec in state.records:
        rec.param._strata = rec
        rec.param.__class__ = OffloadedParameter
        with _no_torch_function():
            rec.param.data = rec.placeholder
        if rec.param.requires_grad:
            rec.ensure_grad()  # the hook that moves its gradient
        with _no_torch_function():
            had_grad = rec.param.grad is not None
        if had_grad:  # a gradient it already had moves to the store
            rec.ensure_grad()
            rec.take_grad()
    _wrap_modules(model, state)
    setattr(model, _ATTR, state)
    store.begin_step()
    return model


def is_offloaded(model):
    return getattr(model, _ATTR, None) is not None


def state_of(model):
    state = getattr(model, _ATTR, None)
    if state is None:
        raise ValueError("strata: this module is not offloaded (st.offload)")
    return state


@contextlib.contextmanager
def materialized(model, writable=False):
    """Every parameter of an offloaded `model` as a full CPU tensor inside
    the block (to save, inspect or load weights); with writable=True the
    values are written back to the store on exit. Copies, not leases: the
    store's budgets do not bound them."""
    state = state_of(model)
    if state.depth or any(r.count for r in state.records):
        raise RuntimeError("strata: materialized() inside the model's forward")
    if state.all_materialized:
        raise RuntimeError("strata: materialized() is already open")
    for rec in state.records:
        t = torch.empty(rec.shape, dtype=rec.dtype)
        state.store.read(rec.id, t)
        with _no_torch_function():
            rec.param.data = t
    state.all_materialized = True
    try:
        yield model
    finally:
        state.all_materialized = False
        values = []
        for rec in state.records:
            with _no_torch_function():
                values.append(rec.param.data)
                rec.param.data = rec.placeholder
        if writable:
            _write_back(state, values)


def _write_back(state, values):
    # Checked whole before any byte is written: a cast or a resized
    # parameter inside the block would otherwise be stored as raw bytes.
    wrong = [f"{rec.name}: {tuple(v.shape)} {v.dtype}, expected "
             f"{rec.shape} {rec.dtype}"
             for rec, v in zip(state.records, values)
             if tuple(v.shape) != rec.shape or v.dtype != rec.dtype]
    if wrong:
        raise ValueError("strata: materialized(writable=True) wrote nothing "
                         "back; parameters changed shape or dtype inside the "
                         "block: " + "; ".join(wrong[:5]))
    for rec, v in zip(state.records, values):
        with _no_torch_function():
            v = v.detach().to("cpu").contiguous()
        state.store.write(rec.id, v)
        rec.updates += 1  # what an earlier forward saved is stale


def _unique_parameters(model):
    seen = set()
    out = []
    for name, p in model.named_parameters():
        if id(p) not in seen:  # tied weights: the first name
            seen.add(id(p))
            out.append((name, p))
    return out


def _wrap_modules(model, state):
    """Wraps the forward of the model and of every module that owns
    parameters: the module's own parameters are acquired around its
    forward, and the outermost offloaded forward (the model's, or a
    submodule called by itself) replaces saved parameters by handles."""
    by_id = {id(r.param): r for r in state.records}
    for module in model.modules():
        records = [by_id[id(p)] for p in module.parameters(recurse=False)]
        if records or module is model:
            _wrap_forward(module, state, records)


def _wrap_forward(module, state, records):
    forward = module.forward

    @functools.wraps(forward)
    def offloaded_forward(*args, **kwargs):
        outer = state.depth == 0
        if state.all_materialized:  # inside st.materialized: the copies
            if not outer:
                return forward(*args, **kwargs)
            state.depth += 1
            try:
                with state.hooks():  # saved parameters: the copies, detached
                    return forward(*args, **kwargs)
            finally:
                state.depth -= 1
        state.depth += 1
        held = 0
        try:
            for rec in records:
                rec.materialize()
                held += 1
            if not outer:
                return forward(*args, **kwargs)
            if state.activations is not None:
                state.activations.start_forward()
            with state.hooks():
                return forward(*args, **kwargs)
        finally:
            # Also when the forward raised: no lease outlives it.
            for rec in records[:held]:
                rec.dematerialize()
            state.depth -= 1
            if outer:
                late, state.late = state.late, []
                for rec in late:
                    rec.dematerialize()

    module.forward = offloaded_forward
    state.wrapped.append(module)
