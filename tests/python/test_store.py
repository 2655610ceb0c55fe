"""strata._core: the store from Python, leases as torch tensors through
DLPack, errors as exceptions."""

import threading

import numpy as np
import pytest
import torch

import strata
from strata import Access, DType, Kind, Tier
from strata import _core


def host_copy(t):
    return t.detach().cpu().clone()


def test_a_tensor_round_trips_through_nvme_bitwise(make_store):
    # Eight 256 KiB tensors under 1 MiB of device and 1 MiB of host memory:
    # most of them are written back to NVMe and read again.
    store = make_store(device_budget="1MiB", host_budget="1MiB")
    gen = torch.Generator().manual_seed(7)
    values = [torch.randn(256, 256, generator=gen) for _ in range(8)]
    ids = [store.create(f"w{i}", shape=[256, 256], dtype=DType.FLOAT32,
                        kind=Kind.PARAMETER) for i in range(8)]
    for t, v in zip(ids, values):
        x = torch.from_dlpack(store.acquire(t, Tier.DEVICE, Access.OVERWRITE))
        x.copy_(v)
        del x
    for t, v in zip(ids, values):
        x = torch.from_dlpack(store.acquire(t, Tier.DEVICE, Access.READ))
        assert torch.equal(host_copy(x), v)
        del x
    stats = store.stats()
    assert stats["links"]["nvme_write"]["bytes"] > 0
    assert stats["links"]["nvme_read"]["bytes"] > 0
    assert stats["checksum_failures"] == 0


def test_a_tensor_views_the_leased_memory_zero_copy(make_store):
    store = make_store()
    t = store.create("t", shape=[4, 8], dtype=DType.FLOAT32)
    lease = store.acquire(t, Tier.HOST, Access.OVERWRITE)
    assert lease.tier == Tier.HOST and lease.access == Access.OVERWRITE
    assert lease.shape == [4, 8] and lease.size_bytes == 128
    x = torch.from_dlpack(lease)
    x.copy_(torch.arange(32, dtype=torch.float32).reshape(4, 8))
    out = np.zeros((4, 8), np.float32)
    # Read takes a lease of its own: refused while the write lease lives.
    with pytest.raises(strata.StrataError) as error:
        store.read(t, out)
    assert error.value.code == "FAILED_PRECONDITION"
    del x
    store.read(t, out)
    assert np.array_equal(out, np.arange(32, dtype=np.float32).reshape(4, 8))


@pytest.mark.parametrize("dtype,torch_dtype", [
    (DType.FLOAT32, torch.float32), (DType.FLOAT16, torch.float16),
    (DType.BFLOAT16, torch.bfloat16), (DType.INT32, torch.int32),
    (DType.INT64, torch.int64), (DType.UINT8, torch.uint8)])
def test_each_dtype_reaches_torch_as_itself(make_store, dtype, torch_dtype):
    store = make_store()
    t = store.create("t", shape=[3, 5], dtype=dtype)
    x = torch.from_dlpack(store.acquire(t, Tier.DEVICE, Access.OVERWRITE))
    assert x.dtype == torch_dtype and tuple(x.shape) == (3, 5)
    assert x.is_contiguous()


def test_a_tensor_without_a_shape_is_one_dimensional(make_store):
    store = make_store()
    t = store.create("t", size_bytes=24, dtype=DType.FLOAT32)
    odd = store.create("odd", size_bytes=7, dtype=DType.FLOAT32)
    assert torch.from_dlpack(store.acquire(t, Tier.HOST, Access.OVERWRITE)).shape == (6,)
    # 7 bytes are no whole float32s: the bytes, as uint8.
    y = torch.from_dlpack(store.acquire(odd, Tier.HOST, Access.OVERWRITE))
    assert y.dtype == torch.uint8 and y.shape == (7,)


def test_the_lease_ends_when_the_last_view_dies(make_store):
    store = make_store()
    t = store.create("t", shape=[16], dtype=DType.FLOAT32)
    x = torch.from_dlpack(store.acquire(t, Tier.DEVICE, Access.OVERWRITE))
    view = x[4:8]
    assert store.residency(t)["leases"] == 1
    del x
    assert store.residency(t)["leases"] == 1  # the view still holds it
    del view
    assert store.residency(t)["leases"] == 0
    assert _core._deleter_release_failures() == 0


def test_an_unconsumed_capsule_ends_its_lease(make_store):
    store = make_store()
    t = store.create("t", size_bytes=64)
    lease = store.acquire(t, Tier.HOST, Access.OVERWRITE)
    capsule = lease.__dlpack__()
    assert lease.exported and not lease.held
    assert store.residency(t)["leases"] == 1
    del capsule
    assert store.residency(t)["leases"] == 0


def test_the_deleter_runs_on_a_native_thread_without_the_gil(make_store):
    # The seam runs the deleter on a new thread and joins it while this
    # thread keeps the GIL: a deleter that took the GIL would never return.
    store = make_store()
    t = store.create("t", size_bytes=64)
    capsule = store.acquire(t, Tier.DEVICE, Access.OVERWRITE).__dlpack__()
    _core._delete_on_native_thread(capsule)
    assert store.residency(t)["leases"] == 0
    del capsule  # consumed: its destructor does nothing more
    assert store.residency(t)["leases"] == 0


def test_an_exported_or_released_lease_cannot_be_released_again(make_store):
    store = make_store()
    t = store.create("t", size_bytes=64)
    lease = store.acquire(t, Tier.HOST, Access.OVERWRITE)
    x = torch.from_dlpack(lease)
    with pytest.raises(strata.StrataError, match="handed to a tensor") as e:
        lease.release()
    assert e.value.code == "FAILED_PRECONDITION"
    with pytest.raises(strata.StrataError):
        torch.from_dlpack(lease)  # a second export
    del x
    other = store.acquire(t, Tier.HOST, Access.READ)
    other.release()
    with pytest.raises(strata.StrataError, match="released"):
        other.release()
    with pytest.raises(strata.StrataError):
        other.id


def test_dlpack_arguments_follow_the_protocol(make_store):
    store = make_store()
    t = store.create("t", size_bytes=64)
    lease = store.acquire(t, Tier.HOST, Access.OVERWRITE)
    with pytest.raises(ValueError, match="never copied"):
        lease.__dlpack__(copy=True)
    with pytest.raises(ValueError, match="stream"):
        lease.__dlpack__(stream=-2)
    assert lease.held  # a refused export keeps the lease
    x = torch.utils.dlpack.from_dlpack(lease.__dlpack__(stream=-1))
    assert x.shape == (64,)


def test_a_lease_is_a_context_manager(make_store):
    store = make_store()
    t = store.create("t", size_bytes=64)
    with store.acquire(t, Tier.HOST, Access.OVERWRITE) as lease:
        assert lease.held
        assert store.residency(t)["leases"] == 1
    assert not lease.held
    assert store.residency(t)["leases"] == 0


def test_a_closed_store_refuses_calls_but_keeps_leased_memory(make_store):
    store = make_store()
    t = store.create("t", shape=[1024], dtype=DType.FLOAT32)
    x = torch.from_dlpack(store.acquire(t, Tier.HOST, Access.OVERWRITE))
    store.close()
    assert store.closed
    with pytest.raises(strata.StrataError, match="closed") as e:
        store.stats()
    assert e.value.code == "FAILED_PRECONDITION"
    with pytest.raises(strata.StrataError, match="closed"):
        store.acquire(t, Tier.HOST, Access.READ)
    x.fill_(3.0)  # the memory is still mapped: the lease holds the store
    assert float(x.sum()) == 3.0 * 1024
    del x  # the last lease: the tiers are freed now


def test_errors_carry_the_code_and_message(make_store):
    store = make_store()
    with pytest.raises(strata.StrataError) as e:
        store.acquire(12345, Tier.HOST, Access.READ)
    assert e.value.code == "NOT_FOUND"
    assert "12345" in e.value.message
    t = store.create("t", size_bytes=64)
    with pytest.raises(strata.StrataError) as e:
        store.acquire(t, Tier.HOST, Access.READ)  # no contents yet
    assert e.value.code == "FAILED_PRECONDITION"
    with pytest.raises(ValueError) as e:  # InvalidArgument is a ValueError
        store.create("empty", size_bytes=0)
    assert isinstance(e.value, strata.InvalidArgumentError)
    assert e.value.code == "INVALID_ARGUMENT"
    with pytest.raises(ValueError, match="size_bytes or shape"):
        store.create("neither")
    with pytest.raises(ValueError, match="extent"):
        store.create("bad", shape=[4, 0], dtype=DType.FLOAT32)
    with pytest.raises(ValueError, match="overflows"):
        store.create("huge", shape=[2**32, 2**32], dtype=DType.FLOAT32)
    with pytest.raises(strata.StrataError) as e:
        store.create("huge", size_bytes=1 << 40)
    assert e.value.code == "RESOURCE_EXHAUSTED"


@pytest.mark.parametrize("options,match", [
    ({"device_budgett": "1MiB"}, "unknown option"),
    ({"device_budget": "lots"}, "device_budget"),
    ({"device_budget": -1}, "negative"),
    ({"device_budget": 1.5}, "a size is"),
    ({"device": "gpu"}, "device"),
    ({"scheduler": "eager"}, "planned"),
    ({"prefetch": 1}, "True or False"),
    ({"queue_depth": 0}, "queue_depth"),
    ({"nvme_dirs": [3]}, "nvme_dirs"),
    ({"machine_profile": "/nonexistent/profile.json"}, "profile"),
    ({"host_budget": 2**63}, "too large"),
    ({"queue_depth": 10**30}, "queue_depth"),
    ({"sim_latency_us": float("inf")}, "finite"),
])
def test_bad_options_are_refused_with_the_option_named(make_store, options, match):
    with pytest.raises(strata.StrataError, match=match):
        make_store(**options)


def test_a_missing_nvme_directory_is_refused(tmp_path):
    with pytest.raises(strata.StrataError) as e:
        strata.Store(nvme_dirs=[str(tmp_path / "missing")], nvme_budget="1MiB")
    assert e.value.code == "NOT_FOUND"


def test_write_and_read_take_contiguous_arrays(make_store):
    store = make_store()
    t = store.create("t", size_bytes=256)
    src = np.arange(256, dtype=np.uint8)
    store.write(t, src)
    dst = torch.zeros(128, dtype=torch.uint8)
    store.read(t, dst, offset=128)
    assert np.array_equal(dst.numpy(), src[128:])
    with pytest.raises(ValueError):  # past the end
        store.read(t, np.zeros(64, np.uint8), offset=250)
    with pytest.raises(TypeError):  # not contiguous
        store.write(t, np.arange(512, dtype=np.uint8)[::2])
    strided = np.zeros(512, np.uint8)[::2]
    with pytest.raises(TypeError):  # a copy would drop what was read
        store.read(t, strided)
    assert not strided.any()
    frozen = np.zeros(256, np.uint8)
    frozen.flags.writeable = False
    with pytest.raises(TypeError):
        store.read(t, frozen)


def test_evict_discard_and_destroy(make_store):
    store = make_store()
    t = store.create("t", size_bytes=4096, kind=Kind.OPTIMIZER_STATE)
    store.write(t, np.full(4096, 9, np.uint8))
    with store.acquire(t, Tier.DEVICE, Access.READ):
        pass
    assert store.residency(t)["device"] != "absent"
    store.evict(t, Tier.NVME)
    r = store.residency(t)
    assert r["device"] == "absent" and r["host"] == "absent"
    assert r["nvme"] == "clean" and r["has_contents"]
    store.discard(t)
    assert not store.residency(t)["has_contents"]
    store.destroy(t)
    with pytest.raises(strata.StrataError) as e:
        store.spec(t)
    assert e.value.code == "NOT_FOUND"


def test_spec_and_stats(make_store):
    store = make_store(device_budget="1MiB", host_budget="2MiB")
    t = store.create("w", shape=[2, 3], dtype=DType.BFLOAT16,
                     kind=Kind.PARAMETER, home=Tier.HOST)
    spec = store.spec(t)
    assert spec == {"name": "w", "size_bytes": 12, "dtype": DType.BFLOAT16,
                    "shape": [2, 3], "kind": Kind.PARAMETER, "home": Tier.HOST}
    stats = store.stats()
    assert stats["tiers"]["device"]["capacity_bytes"] == 1 << 20
    assert stats["tiers"]["host"]["capacity_bytes"] == 2 << 20
    assert stats["tensors"] == 1
    # Every counter docs/api.md lists (Statistics) is there.
    for key in ("acquires", "stalled_acquires", "stall_seconds",
                "room_seconds", "write_backs", "queued_loads",
                "queued_loads_in_flight", "device_reader_waits",
                "checksum_failures", "checksum_rereads", "io_retries",
                "unified", "device_memory", "io_engine"):
        assert key in stats, key
    assert set(stats["tiers"]["nvme"]) >= {
        "capacity_bytes", "used_bytes", "peak_used_bytes", "leased_bytes",
        "allocations", "frees", "evictions", "compactions", "relocated_bytes"}
    assert set(stats["links"]["h2d"]) >= {
        "bytes", "transfers", "failures", "busy_seconds", "active_seconds", "gbps"}
    assert set(stats["scheduler"]) >= {
        "steps", "accesses", "hits", "resyncs", "misses", "rerecords",
        "nvme_read_floor_bytes", "nvme_write_floor_bytes", "plans",
        "planning_seconds", "planned_link_bytes", "plan_bound_seconds",
        "plan_predicted_seconds"}
    assert set(stats["prefetch"]) == {"issued", "hit", "late", "wasted", "failed"}
    assert set(stats["unified"]) == {"prefetches", "evictions", "discards",
                                     "read_mostly", "faults", "fault_bytes"}
    assert stats["device_backend"] in ("simulated",) or \
        stats["device_backend"].startswith("cuda")
    assert store.device == ("cpu" if stats["device_backend"] == "simulated"
                            else f"cuda:{torch.cuda.current_device()}")


def test_steps_train_the_scheduler(make_store):
    store = make_store(device_budget="256KiB", host_budget="512KiB")
    ids = [store.create(f"l{i}", size_bytes=64 << 10) for i in range(8)]
    for t in ids:
        store.write(t, np.full(64 << 10, t % 251, np.uint8))
    for _ in range(4):
        store.begin_step()
        for t in ids:
            with store.acquire(t, Tier.DEVICE, Access.READ):
                pass
        store.end_step()
    s = store.stats()["scheduler"]
    assert s["steps"] == 4
    assert s["hits"] > 0  # the order was learned


def test_blocking_calls_release_the_gil(make_store):
    # Each copy to the device waits 0.2 s (a simulated latency). While the
    # acquire waits, another Python thread must run: it can only if the
    # call released the GIL.
    store = make_store(sim_latency_us=200000)
    t = store.create("t", size_bytes=4096)
    store.write(t, np.zeros(4096, np.uint8))
    count = [0]
    stop = threading.Event()
    started = threading.Event()

    def spin():
        started.set()
        while not stop.is_set():
            count[0] += 1

    worker = threading.Thread(target=spin)
    worker.start()
    started.wait()
    before = count[0]
    lease = store.acquire(t, Tier.DEVICE, Access.READ)
    during = count[0] - before
    stop.set()
    worker.join()
    lease.release()
    assert during > 1000
