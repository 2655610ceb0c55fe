"""Every entry point of strata._core refuses bad arguments with an
exception (TypeError from the binding's signatures, ValueError /
StrataError from strata), never a crash of the interpreter: wrong types,
out-of-range numbers, destroyed ids, released leases, a closed store."""

import numpy as np
import pytest

import strata
from strata import Access, DType, Tier, _core

BAD_IDS = [-1, 2**64, 10**30, 1.5, "x", None, 987654]
REFUSED = (TypeError, ValueError, OverflowError, strata.StrataError)


class Opened:
    """A store with one 64-byte tensor `t` that has contents."""

    def __init__(self, store):
        self.store = store
        self.t = store.create("t", size_bytes=64)
        store.write(self.t, np.zeros(64, np.uint8))

    def __getattr__(self, name):
        return getattr(self.store, name)


@pytest.fixture
def store(make_store):
    return Opened(make_store())


@pytest.mark.parametrize("bad", BAD_IDS)
@pytest.mark.parametrize("call", [
    lambda s, i: s.acquire(i, Tier.HOST, Access.READ),
    lambda s, i: s.prefetch(i, Tier.DEVICE),
    lambda s, i: s.evict(i, Tier.NVME),
    lambda s, i: s.discard(i),
    lambda s, i: s.destroy(i),
    lambda s, i: s.spec(i),
    lambda s, i: s.residency(i),
    lambda s, i: s.write(i, np.zeros(4, np.uint8)),
    lambda s, i: s.read(i, np.zeros(4, np.uint8)),
])
def test_bad_ids_are_refused(store, call, bad):
    with pytest.raises(REFUSED):
        call(store, bad)


@pytest.mark.parametrize("call", [
    lambda s: s.acquire(s.t, "host", Access.READ),
    lambda s: s.acquire(s.t, Tier.HOST, 7),  # no Access 7 (0-2 convert)
    lambda s: s.acquire(s.t, Tier.HOST, Access.READ, stream=-5),
    lambda s: s.acquire(s.t, Tier.HOST, Access.READ, stream="x"),
    lambda s: s.evict(s.t, 3),  # no Tier 3
    lambda s: s.write(s.t, b"bytes"),
    lambda s: s.write(s.t, np.zeros(65, np.uint8)),
    lambda s: s.write(s.t, np.zeros(4, np.uint8), offset=-1),
    lambda s: s.write(s.t, np.zeros(4, np.uint8), offset=2**64),
    lambda s: s.read(s.t, np.zeros(4, np.uint8), offset=61),
    lambda s: s.read(s.t, [0, 0]),
    lambda s: s.create("x", size_bytes=-1),
    lambda s: s.create("x", size_bytes=2**64),
    lambda s: s.create("x", shape=[-3], dtype=DType.FLOAT32),
    lambda s: s.create("x", shape=[2**62, 4], dtype=DType.INT64),
    lambda s: s.create("x", shape="3"),
    lambda s: s.create("x", size_bytes=8, dtype="float32"),
    lambda s: s.create("x", size_bytes=8, home=7),
    lambda s: s.create(7, size_bytes=8),
    lambda s: s.write_timeline("/nonexistent/dir/trace.json"),
    lambda s: s.pause_prefetch("yes"),
])
def test_bad_arguments_are_refused(store, call):
    with pytest.raises(REFUSED):
        call(store)


def test_a_released_lease_refuses_everything(store):
    lease = store.acquire(store.t, Tier.HOST, Access.READ)
    lease.release()
    for use in (lambda: lease.id, lambda: lease.tier, lambda: lease.shape,
                lambda: lease.release(), lambda: lease.__dlpack__(),
                lambda: lease.__dlpack_device__()):
        with pytest.raises(strata.StrataError):
            use()
    assert "released" in repr(lease)


def test_a_closed_store_refuses_everything(store):
    t = store.t
    store.close()
    calls = [lambda: store.create("x", size_bytes=8),
             lambda: store.acquire(t, Tier.HOST, Access.READ),
             lambda: store.prefetch(t, Tier.HOST), lambda: store.evict(t, Tier.NVME),
             lambda: store.discard(t), lambda: store.destroy(t),
             lambda: store.write(t, np.zeros(4, np.uint8)),
             lambda: store.read(t, np.zeros(4, np.uint8)),
             lambda: store.spec(t), lambda: store.residency(t),
             lambda: store.begin_step(), lambda: store.end_step(),
             lambda: store.pause_prefetch(True), lambda: store.stats(),
             lambda: store.write_timeline("/tmp/x.json"), lambda: store.describe()]
    for call in calls:
        with pytest.raises(strata.StrataError, match="closed"):
            call()
    store.store.close()  # closing twice is harmless


@pytest.mark.parametrize("args", [
    dict(w=np.zeros(4, np.float64)),                     # wrong dtype
    dict(w=np.zeros(8, np.float32)[::2]),                # strided
    dict(g=np.zeros(3, np.float32)),                     # size mismatch
    dict(step=0), dict(step=-1),
    dict(beta1=1.0), dict(beta2=float("nan")), dict(beta2=0.99999999),
    dict(w=[0.0, 0.0, 0.0, 0.0]),
])
def test_adam_update_refuses_bad_arrays_and_numbers(args):
    call = dict(w=np.zeros(4, np.float32), m=np.zeros(4, np.float32),
                v=np.zeros(4, np.float32), g=np.ones(4, np.float32),
                lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, step=1)
    call.update(args)
    with pytest.raises(REFUSED):
        _core.adam_update(**call)
