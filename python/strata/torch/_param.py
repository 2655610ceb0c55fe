"""Offloaded parameters: the same Parameter objects, their values in the store.

An offloaded parameter keeps its identity (the optimizer, tied weights and
state_dict keys see the same object) but its class becomes
OffloadedParameter and its .data a placeholder of the right shape (one
element, expanded), so metadata (shape, dtype, numel, requires_grad) reads
true. Its values live in a store tensor; .data views a device-tier lease
only while it is materialized (its module's forward, a saved tensor's
unpack in backward, st.materialized). Any computation on it outside those
raises a clear error, never a silently wrong or empty result.

Its gradient lives in the store too: .grad reads as a view of the store's
gradient (a host-tier lease, written through), and `.grad = None` discards
it, so torch code that reads or clears gradients (clip_grad_norm_,
zero_grad) acts on the real ones.
"""

import math
import weakref

import torch

from strata._core import Access, DType, Kind, Tier

_no_torch_function = torch._C.DisableTorchFunction

DTYPES = {
    torch.float32: DType.FLOAT32,
    torch.float16: DType.FLOAT16,
    torch.bfloat16: DType.BFLOAT16,
    torch.int32: DType.INT32,
    torch.int64: DType.INT64,
    torch.uint8: DType.UINT8,
}

if hasattr(torch.Tensor, "untyped_storage"):
    def storage_ptr(t):
        return t.untyped_storage().data_ptr()
else:  # torch < 2.0
    def storage_ptr(t):
        return t.storage().data_ptr()

# What may be read or set on an offloaded parameter that is not
# materialized: metadata, which the placeholder answers truly.
_METADATA_GETTERS = frozenset({
    "shape", "dtype", "device", "requires_grad", "is_leaf", "ndim",
    "grad_fn", "layout", "names", "is_cuda", "is_sparse", "is_quantized",
    "is_meta", "_backward_hooks", "_base", "_version", "output_nr",
    "is_mkldnn", "is_nested", "itemsize", "nbytes", "_post_accumulate_grad_hooks",
})
_METADATA_SETTERS = frozenset({"requires_grad", "_backward_hooks",
                               "_post_accumulate_grad_hooks"})
# Autograd entry points that take parameters as inputs: backward
# re-acquires what it needs through the saved-tensor handles.
_AUTOGRAD_CALLS = (torch.autograd.grad, torch.autograd.backward)
_METADATA_METHODS = frozenset({
    "size", "dim", "numel", "nelement", "element_size", "is_floating_point",
    "is_complex", "__len__", "__hash__", "requires_grad_", "register_hook",
    "retain_grad", "_is_view", "get_device", "ndimension", "__format__",
    "is_signed",
})


def _compute_device(store):
    return torch.device(store.device)


class ParamRecord:
    """One offloaded parameter: its store tensors and its materializations.

    count: how many holders (modules in forward, st.materialized) have it
    materialized now; .data views the lease while count > 0.
    grad_pending: the store's gradient holds this step's sum so far.
    """

    __slots__ = ("state", "name", "param", "id", "grad_id", "shape", "dtype",
                 "count", "grad_pending", "placeholder", "backward_base",
                 "grad_base", "grad_node", "version", "updates",
                 "__weakref__")

    def __init__(self, state, name, param):
        self.state = state
        self.name = name
        self.param = param
        self.shape = tuple(param.shape)
        self.dtype = param.dtype
        self.count = 0
        self.grad_pending = False
        self.backward_base = None
        self.grad_base = None
        self.grad_node = None
        self.version = 0   # param._version when last materialized
        self.updates = 0   # optimizer steps that changed the values
        fill = math.nan if param.dtype.is_floating_point else 0
        self.placeholder = torch.full((), fill, dtype=param.dtype,
                                      device=state.device).expand(self.shape)
        self.id = self._create(name, Kind.PARAMETER)
        self.grad_id = None  # created with the first need (ensure_grad)

    def _create(self, name, kind):
        # A 0-d parameter (a scale) is one element of its dtype.
        dtype = DTYPES[self.dtype]
        if self.shape:
            return self.state.store.create(name, shape=list(self.shape),
                                           dtype=dtype, kind=kind,
                                           home=self.state.home)
        return self.state.store.create(
            name, size_bytes=self.param.element_size(), dtype=dtype,
            kind=kind, home=self.state.home)

    def ensure_grad(self):
        """The gradient's store tensor and the hook that fills it, made
        when the parameter first needs them (at offload when it requires
        grad, or later when it is unfrozen)."""
        if self.grad_id is None:
            self.grad_id = self._create(self.name + ".grad", Kind.GRADIENT)
        if self.grad_node is not None or not self.param.requires_grad:
            return
        p = self.param
        with _no_torch_function():
            if hasattr(p, "register_post_accumulate_grad_hook"):  # torch >= 2.1
                p.register_post_accumulate_grad_hook(lambda _: self.take_grad())
                self.grad_node = True
                return
            # Older torch: a hook on the AccumulateGrad node, kept alive
            # here (autograd holds it weakly), as DeepSpeed's
            # register_grad_hook does.
            node = p.expand_as(p).grad_fn.next_functions[0][0]
        node.register_hook(lambda grad_inputs, grad_outputs: self.take_grad())
        self.grad_node = node

    def lease_tensor(self, tier, access):
        """A torch tensor viewing a lease of the parameter's values; the
        lease ends when the tensor's last reference dies."""
        state = self.state
        lease = state.store.acquire(self.id, tier, access, state.stream())
        t = torch.from_dlpack(lease)
        return t if self.shape else t.view(())

    def materialize(self):
        """.data views a device-tier lease (read) until dematerialize."""
        if self.count == 0:
            if self.param.requires_grad and self.grad_node is None:
                self.ensure_grad()
            t = self.lease_tensor(Tier.DEVICE, Access.READ)
            with _no_torch_function():
                self.param.data = t
                self.state.by_storage[storage_ptr(t)] = self
                self.version = self.param._version
        self.count += 1

    def dematerialize(self):
        self.count -= 1
        if self.count > 0:
            return
        with _no_torch_function():
            data = self.param.data
            changed = self.param._version != self.version
            self.state.by_storage.pop(storage_ptr(data), None)
            self.param.data = self.placeholder
            # Written in place during forward (Embedding's max_norm, a
            # clamp_ under no_grad): through a read lease, so written back
            # here, as plain torch would keep the change.
            values = data.detach().to("cpu", copy=True) if changed else None
        del data  # the read lease ends here
        if values is not None:
            self.state.store.write(self.id, values.contiguous())
            self.updates += 1  # what an earlier forward saved is stale

    def backward_view(self):
        """The full values for a saved tensor's unpack: the materialized
        .data, or a device lease shared by the unpacks alive at once."""
        if self.count > 0:
            with _no_torch_function():
                return self.param.data
        base = self.backward_base() if self.backward_base is not None else None
        if base is None:
            base = self.lease_tensor(Tier.DEVICE, Access.READ)
            self.backward_base = weakref.ref(base)
        return base

    # Gradients.

    def live_grad(self):
        """The gradient view a caller still holds (p.grad kept in a
        variable), or None. While it lives it is the gradient: every use
        goes through it, since its write lease excludes a second one."""
        return self.grad_base() if self.grad_base is not None else None

    def grad_tensor(self, access):
        """The store's gradient on the host for `access`: the live view, or
        a new lease's tensor (ending with it)."""
        view = self.live_grad()
        if view is not None:
            return view
        lease = self.state.store.acquire(self.grad_id, Tier.HOST, access)
        return torch.from_dlpack(lease)

    def take_grad(self):
        """After autograd accumulated into .grad: add it to the store's
        gradient (a copy on the first of a step, as torch's first
        accumulation is) and free torch's."""
        with _no_torch_function():
            g = self.param.grad
            if g is None:
                return
            if self.grad_pending:
                self.grad_tensor(Access.WRITE).add_(g.to("cpu"))
            else:
                self.grad_tensor(Access.OVERWRITE).copy_(g)
            self.grad_pending = True
            self.param.grad = None

    def grad_view(self):
        """The store's gradient as a host tensor (a write lease), or None:
        the same tensor while one is alive, as torch's .grad is."""
        if not self.grad_pending:
            return None
        view = self.live_grad()
        if view is None:
            view = self.grad_tensor(Access.WRITE)
            self.grad_base = weakref.ref(view)
        return view

    def set_grad(self, value):
        """p.grad = value: None discards the store's gradient (no
        write-back; kept while a view of it lives, then overwritten by the
        next step's first gradient); a tensor is copied in."""
        if value is not None:
            self.ensure_grad()
        if value is None:
            if self.grad_pending and self.live_grad() is None:
                self.state.store.discard(self.grad_id)
            self.grad_pending = False
            with _no_torch_function():
                self.param.grad = None  # and torch's, if one is there
            return
        if tuple(value.shape) != self.shape or value.dtype != self.dtype:
            raise RuntimeError(
                f"strata: the gradient assigned to {self.name} is "
                f"{tuple(value.shape)} {value.dtype}; the parameter is "
                f"{self.shape} {self.dtype}")
        with _no_torch_function():
            self.grad_tensor(Access.OVERWRITE).copy_(value.detach())
        self.grad_pending = True

    def zero_grad(self):
        """p.grad.zero_() on the store's gradient (zero_grad with
        set_to_none=False): it stays, as zeros."""
        if self.grad_pending:
            self.grad_tensor(Access.WRITE).zero_()


def _record_of(args, kwargs):
    """The records of the offloaded parameters among a call's arguments
    (one level into lists and tuples)."""
    found = []
    for a in list(args) + list(kwargs.values()):
        if isinstance(a, OffloadedParameter):
            found.append(a._strata)
        elif isinstance(a, (list, tuple)):
            found.extend(x._strata for x in a
                         if isinstance(x, OffloadedParameter))
    return found


def _kind(func):
    """("get"|"set"|"call", name) of what __torch_function__ was asked."""
    name = getattr(func, "__name__", "")
    if name in ("__get__", "__set__", "__delete__"):
        owner = getattr(func, "__self__", None)
        return name[2:5], getattr(owner, "__name__", "")
    return "call", name


class OffloadedParameter(torch.nn.Parameter):
    """A Parameter whose values live in a strata store (see the module
    docstring). Created only by st.offload, which swaps the class of the
    user's own Parameter objects."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if kwargs is None:
            kwargs = {}
        if func in _AUTOGRAD_CALLS:  # gradients w.r.t. the parameters
            with _no_torch_function():
                return func(*args, **kwargs)
        kind, name = _kind(func)
        records = _record_of(args, kwargs)
        if kind == "get" and name == "grad":
            return _get_grad(records[0])
        if kind == "set" and name == "grad":
            records[0].set_grad(args[1])
            return None
        if kind == "del" and name == "grad":  # del p.grad
            records[0].set_grad(None)
            return None
        if kind == "get" and name == "data":
            rec = records[0]
            if rec.count == 0 and not rec.state.all_materialized:
                raise _outside_error(rec, ".data")
        elif not ((kind == "get" and name in _METADATA_GETTERS) or
                  (kind == "set" and name in _METADATA_SETTERS) or
                  (kind == "call" and name in _METADATA_METHODS)):
            for rec in records:
                if rec.count == 0 and not rec.state.all_materialized:
                    if rec.state.depth == 0:
                        raise _outside_error(rec, name or str(func))
                    rec.state.materialize_late(rec)
        with _no_torch_function():
            return func(*args, **kwargs)

    def __repr__(self):
        rec = self.__dict__.get("_strata")
        if rec is None or rec.count > 0 or rec.state.all_materialized:
            with _no_torch_function():
                return torch.Tensor.__repr__(self)
        return (f"OffloadedParameter({rec.name}: {list(rec.shape)} "
                f"{rec.dtype}, in the store; read it inside "
                f"st.materialized(model))")

    def _plain_copy(self, what):
        rec = self.__dict__["_strata"]
        if rec.count == 0 and not rec.state.all_materialized:
            raise _outside_error(rec, what)
        with _no_torch_function():
            return torch.nn.Parameter(self.data.clone(), self.requires_grad)

    def __deepcopy__(self, memo):
        # A plain Parameter with the values: a copy is not in the store.
        copy = self._plain_copy("copy.deepcopy")
        memo[id(self)] = copy
        return copy

    def __reduce_ex__(self, protocol):
        return self._plain_copy("pickling").__reduce_ex__(protocol)


def _get_grad(rec):
    with _no_torch_function():
        g = rec.param.grad
    if g is not None:
        return g
    return rec.grad_view()


_MOVES = frozenset({"to", "cuda", "cpu", "float", "half", "double",
                    "bfloat16", "type", "_apply"})


def _outside_error(rec, what):
    if what in _MOVES:
        return RuntimeError(
            f"strata: {rec.name} is offloaded ({what}): its values live in "
            f"the store, whose tiers decide where it is. Move or cast the "
            f"model before strata.torch.offload.")
    return RuntimeError(
        f"strata: {rec.name} is offloaded: its values are in the store and "
        f"were touched ({what}) outside the model's forward and backward. "
        f"Read or change them inside `with strata.torch.materialized(model):` "
        f"(writable=True to keep changes); step it with strata.torch.Adam or "
        f"AdamW.")
