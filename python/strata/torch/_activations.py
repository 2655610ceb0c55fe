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
autograd drops the saved handle; its contents are then discarded, never
written back. Slots no forward used since the one before are destroyed
when the next forward starts, so varying shapes (padding to the batch)
do not pile up homes.

Kept in torch memory instead: tensors under one host allocation granule
(4 KiB: a store tensor would take a whole one), expanded tensors (their
memory is smaller than their size), tensors not on the compute device,
dtypes the store lacks, and any save or unpack the store has no room for
at that moment (the store's error is not the training's).
"""

import weakref

import torch

from strata._core import Access, Kind, StrataError, Tier
from strata.torch._param import DTYPES, _no_torch_function

_MIN_BYTES = 4096  # kHostAllocationGranuleBytes (strata/options.h)

if hasattr(torch.Tensor, "untyped_storage"):
    def _storage_bytes(t):
        return t.untyped_storage().nbytes()
else:  # torch < 2.0
    def _storage_bytes(t):
        return t.storage().nbytes()


class _Slot:
    __slots__ = ("id", "nbytes", "dtype", "busy", "used")

    def __init__(self, tensor_id, nbytes, dtype):
        self.id = tensor_id
        self.nbytes = nbytes
        self.dtype = dtype
        self.busy = False
        self.used = 0  # the forward that last saved into it


class _SavedActivation:
    """The handle autograd keeps: the slot, the tensor's shape, and the
    original (weakly) with its version, for torch's in-place check."""

    __slots__ = ("slots", "slot", "shape", "original", "version",
                 "__weakref__")

    def __init__(self, slots, slot, t):
        self.slots = slots
        self.slot = slot
        self.shape = t.shape
        self.original = weakref.ref(t)
        self.version = t._version

    def __del__(self):
        self.slots.release(self.slot)


class ActivationSlots:
    def __init__(self, state):
        self.state = state
        self.slots = []
        self.retired = []  # slots a live tensor still views: destroyed later
        self.next = 0  # where the next save looks first
        self.forwards = 0
        self.created = 0  # store tensors made, for their names
        self.saved = 0  # activations put in the store (for reports and tests)
        self.kept = 0   # saves left in torch memory
        self.no_room = 0  # of those, for want of room in the store

    def start_forward(self):
        self.forwards += 1
        self.next = 0
        store = self.state.store
        keep = []
        for slot in self.slots:
            if slot.busy or slot.used >= self.forwards - 1:
                keep.append(slot)
            else:
                self.retired.append(slot)  # idle for a whole forward
        self.slots = keep
        still = []
        for slot in self.retired:
            try:
                store.destroy(slot.id)
            except StrataError:
                still.append(slot)  # leased by a tensor still alive
        self.retired = still

    def pack(self, t):
        """A handle for `t` in the store, or None to keep it in torch."""
        with _no_torch_function():
            nbytes = t.numel() * t.element_size()
            if (nbytes < _MIN_BYTES or t.dtype not in DTYPES or
                    t.layout != torch.strided or t.device != self.state.device
                    or _storage_bytes(t) < nbytes):
                self.kept += 1
                return None
            try:
                slot = self._slot(nbytes, t.dtype)
                lease = self.state.store.acquire(
                    slot.id, Tier.DEVICE, Access.OVERWRITE, self.state.stream())
            except StrataError:
                return self._no_room(locals().get("slot"))
            dst = torch.from_dlpack(lease)
            dst.view(t.shape).copy_(t)
            del dst, lease
            self.saved += 1
            return _SavedActivation(self, slot, t)

    def unpack(self, saved):
        original = saved.original()
        if original is not None and original._version != saved.version:
            from strata.torch._offload import raise_modified
            raise_modified(original, saved.version)
        store, slot = self.state.store, saved.slot
        try:
            lease = store.acquire(slot.id, Tier.DEVICE, Access.READ,
                                  self.state.stream())
        except StrataError as e:
            if e.code != "RESOURCE_EXHAUSTED":
                raise
            # No room on the device now: a copy in torch memory.
            values = torch.empty(saved.shape, dtype=slot.dtype)
            store.read(slot.id, values)
            return values.to(self.state.device)
        with _no_torch_function():
            return torch.from_dlpack(lease).view(saved.shape)

    def release(self, slot):
        try:
            self.state.store.discard(slot.id)  # dead: never written back
            slot.busy = False
        except StrataError:
            # A tensor still views it (a gradient that is the unpacked
            # activation itself), or the store is closed: never reused.
            if slot in self.slots:
                self.slots.remove(slot)
                self.retired.append(slot)

    def _no_room(self, slot):
        if slot is not None:
            slot.busy = False
        self.kept += 1
        self.no_room += 1
        return None

    def _slot(self, nbytes, dtype):
        # From this save's position on, then from the start: a slot that
        # is busy or resized does not push every later save to a new one.
        order = list(range(self.next, len(self.slots))) + list(range(self.next))
        for k in order:
            slot = self.slots[k]
            if not slot.busy and slot.nbytes == nbytes and slot.dtype == dtype:
                self.next = k + 1
                return self._take(slot)
        tensor_id = self.state.store.create(
            f"activation.{self.created}", size_bytes=nbytes,
            dtype=DTYPES[dtype], kind=Kind.ACTIVATION, home=self.state.home)
        self.created += 1
        slot = _Slot(tensor_id, nbytes, dtype)
        self.slots.insert(self.next, slot)
        self.next += 1
        return self._take(slot)

    def _take(self, slot):
        slot.busy = True
        slot.used = self.forwards
        return slot
