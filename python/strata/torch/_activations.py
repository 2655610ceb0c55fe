"""Saved activations in the store (st.offload(..., activations=True)).

What autograd saves for backward that is not a parameter becomes a store
tensor: copied into a device-tier lease when saved (overwrite: nothing is
loaded), read back through a device lease when backward unpacks it. The
store's residency policy then decides, as for the engine's own models,
which activations stay on the device and which are written back to the
host or NVMe until backward: the learned step trace prefetches them in
backward's order.

Slots: the k-th activation saved in a forward reuses the store tensor of
the k-th save of the forward before (when it is free and the same size
and dtype), so each step acquires the same ids in the same order and the
scheduler learns one cyclic trace. A slot is busy from its save until
autograd drops the saved handle (backward consumed it, or the graph was
freed); its contents are then discarded, never written back.

Kept in torch memory instead: tensors under one host allocation granule
(4 KiB: a store tensor would take a whole one), tensors not on the compute
device, dtypes the store lacks, and anything the device tier has no room
for at that moment (a full tier of leases).
"""

import torch

from strata._core import Access, Kind, StrataError, Tier
from strata.torch._param import DTYPES, _no_torch_function

_MIN_BYTES = 4096  # kHostAllocationGranuleBytes (strata/options.h)


class _Slot:
    __slots__ = ("id", "nbytes", "dtype", "busy")

    def __init__(self, tensor_id, nbytes, dtype):
        self.id = tensor_id
        self.nbytes = nbytes
        self.dtype = dtype
        self.busy = False


class _SavedActivation:
    """The handle autograd keeps: the slot, and the tensor's shape."""

    __slots__ = ("slots", "slot", "shape", "__weakref__")

    def __init__(self, slots, slot, shape):
        self.slots = slots
        self.slot = slot
        self.shape = shape

    def __del__(self):
        self.slots.release(self.slot)


class ActivationSlots:
    def __init__(self, state):
        self.state = state
        self.slots = []
        self.next = 0  # where the next save looks first
        self.saved = 0  # activations in the store (for reports and tests)
        self.kept = 0   # saves left in torch memory
        self.no_room = 0  # of those, for want of room on the device

    def start_forward(self):
        self.next = 0

    def pack(self, t):
        """A handle for `t` in the store, or None to keep it in torch."""
        with _no_torch_function():
            nbytes = t.numel() * t.element_size()
            if (nbytes < _MIN_BYTES or t.dtype not in DTYPES or
                    t.layout != torch.strided or t.device != self.state.device):
                self.kept += 1
                return None
            slot = self._slot(nbytes, t.dtype)
            try:
                lease = self.state.store.acquire(
                    slot.id, Tier.DEVICE, Access.OVERWRITE, self.state.stream())
            except StrataError as e:
                if e.code != "RESOURCE_EXHAUSTED":
                    raise
                slot.busy = False
                self.kept += 1
                self.no_room += 1
                return None  # no room on the device now: torch keeps it
            dst = torch.from_dlpack(lease)
            dst.view(t.shape).copy_(t)
            del dst, lease
            self.saved += 1
            return _SavedActivation(self, slot, t.shape)

    def unpack(self, saved):
        lease = self.state.store.acquire(saved.slot.id, Tier.DEVICE, Access.READ,
                                         self.state.stream())
        with _no_torch_function():
            return torch.from_dlpack(lease).view(saved.shape)

    def release(self, slot):
        slot.busy = False
        try:
            self.state.store.discard(slot.id)  # dead: never written back
        except StrataError:
            pass  # a store already closed, or a lease still viewing it

    def _slot(self, nbytes, dtype):
        for k in range(self.next, len(self.slots)):
            slot = self.slots[k]
            if not slot.busy and slot.nbytes == nbytes and slot.dtype == dtype:
                self.next = k + 1
                slot.busy = True
                return slot
        name = f"activation.{len(self.slots)}"
        tensor_id = self.state.store.create(
            name, size_bytes=nbytes, dtype=DTYPES[dtype], kind=Kind.ACTIVATION,
            home=self.state.home)
        slot = _Slot(tensor_id, nbytes, dtype)
        slot.busy = True
        self.slots.append(slot)
        self.next = len(self.slots)
        return slot
