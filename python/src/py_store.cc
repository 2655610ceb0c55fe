// py_store.cc: PyStore and the Store class of strata._core. Every call that
// can wait (open, create, acquire, transfers, step markers, timeline)
// releases the GIL while the store works.
#include "python/src/py_store.h"

#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "python/src/errors.h"
#include "python/src/py_bindings.h"
#include "python/src/stats_dict.h"

namespace nb = nanobind;

namespace strata::python {
namespace {

// Any C-contiguous CPU array (numpy, torch, a buffer): write's source and
// read's destination. Taken as is (noconvert): a converted copy as read's
// destination would drop what was read.
using HostArray = nb::ndarray<nb::device::cpu, nb::c_contig>;

uint64_t ArrayBytes(const HostArray& a) { return a.nbytes(); }

// Runs `call(store)` (an absl::Status) without the GIL; raises its error.
template <typename Call>
void Unlocked(PyStore& s, Call&& call) {
  std::shared_ptr<Store> store = s.Get();
  nb::gil_scoped_release released;
  ThrowIfError(call(*store));
}

// The lease of an acquire, with what DLPack needs from the spec.
PyLease Acquire(PyStore& s, uint64_t id, Tier tier, Access access,
                uintptr_t stream) {
  std::shared_ptr<Store> store = s.Get();
  auto held = std::make_unique<HeldLease>();
  held->store = store;
  held->stream = reinterpret_cast<void*>(stream);
  held->device = s.device();
  {
    nb::gil_scoped_release released;
    absl::StatusOr<TensorSpec> spec = store->GetSpec(TensorId{id});
    if (!spec.ok()) throw StatusError(spec.status());
    held->lease =
        ValueOrThrow(store->Acquire(TensorId{id}, tier, access, held->stream));
    held->dtype = spec->dtype;
    held->shape = spec->shape;
    if (held->shape.empty()) {
      const uint64_t elem = DTypeSize(spec->dtype);
      if (spec->size_bytes % elem != 0) held->dtype = DType::kUInt8;
      held->shape = {
          static_cast<int64_t>(spec->size_bytes / DTypeSize(held->dtype))};
    }
  }
  return PyLease(std::move(held));
}

uint64_t Create(PyStore& s, const std::string& name,
                std::optional<uint64_t> size_bytes, DType dtype,
                std::optional<std::vector<int64_t>> shape, TensorKind kind,
                Tier home) {
  TensorSpec spec{.name = name, .dtype = dtype, .kind = kind, .home = home};
  if (shape.has_value()) spec.shape = *shape;
  if (size_bytes.has_value()) {
    spec.size_bytes = *size_bytes;
  } else if (!spec.shape.empty()) {
    uint64_t elements = 1;
    for (int64_t e : spec.shape) {
      if (e <= 0) {
        throw StatusError(absl::InvalidArgumentError(
            "create: every extent of shape must be >= 1"));
      }
      if (__builtin_mul_overflow(elements, static_cast<uint64_t>(e),
                                 &elements)) {
        throw StatusError(absl::InvalidArgumentError(
            "create: the shape's size overflows 64 bits"));
      }
    }
    if (__builtin_mul_overflow(elements, DTypeSize(dtype), &spec.size_bytes)) {
      throw StatusError(absl::InvalidArgumentError(
          "create: the shape's size overflows 64 bits"));
    }
  } else {
    throw StatusError(
        absl::InvalidArgumentError("create: give size_bytes or shape"));
  }
  std::shared_ptr<Store> store = s.Get();
  nb::gil_scoped_release released;
  return ValueOrThrow(store->Create(spec)).value;
}

nb::dict SpecDict(const TensorSpec& spec) {
  nb::dict d;
  d["name"] = spec.name;
  d["size_bytes"] = spec.size_bytes;
  d["dtype"] = spec.dtype;
  d["shape"] = spec.shape;
  d["kind"] = spec.kind;
  d["home"] = spec.home;
  return d;
}

nb::dict ResidencyDict(const Residency& r) {
  static constexpr const char* kStates[] = {"absent", "loading", "clean",
                                            "dirty", "evicting"};
  nb::dict d;
  for (int t = 0; t < kNumTiers; ++t) {
    d[std::string(TierName(static_cast<Tier>(t))).c_str()] =
        kStates[static_cast<int>(r.tiers[t])];
  }
  d["has_contents"] = r.has_contents;
  d["leases"] = r.leases;
  return d;
}

}  // namespace

PyStore::PyStore(const StoreOptions& options) {
  {
    nb::gil_scoped_release released;
    store_ = ValueOrThrow(Store::Open(options));
  }
  device_.cuda = store_->GetStats().device_backend.rfind("cuda", 0) == 0;
  device_.ordinal = options.device.cuda_device;
}

const std::shared_ptr<Store>& PyStore::Get() const {
  if (store_ == nullptr) {
    throw StatusError(absl::FailedPreconditionError("the store is closed"));
  }
  return store_;
}

void BindStore(nb::module_& m) {
  nb::class_<PyStore>(
      m, "Store",
      "A tiered tensor store: device, pinned host and NVMe under budgets.\n\n"
      "Store(device_budget=..., host_budget=..., nvme_dirs=[...], ...): the "
      "keywords are `strata train`'s store flags with underscores (sizes as "
      "ints of bytes or strings such as \"4GiB\"): device_budget, "
      "host_budget, nvme_dirs, nvme_budget (1 GiB when nvme_dirs is given), "
      "device (auto|cuda|simulated), cuda_device, memory (copies|unified), "
      "unified_hints, sim_link_gbps, sim_latency_us, sim_memory, "
      "queue_depth, block_size, io_engine (auto|io_uring|threads), "
      "prefetch, scheduler (planned|reactive), eviction (belady|lru), "
      "timeline, machine_profile (a `strata bench --profile` file).")
      .def("__init__",
           [](PyStore* self, nb::kwargs kwargs) {
             new (self) PyStore(OptionsFromKwargs(kwargs));
           })
      .def("create", &Create, nb::arg("name") = "",
           nb::arg("size_bytes").none() = nb::none(),
           nb::arg("dtype") = DType::kUInt8,
           nb::arg("shape").none() = nb::none(),
           nb::arg("kind") = TensorKind::kOther, nb::arg("home") = Tier::kNvme,
           "Registers a tensor and reserves its space on its home tier; "
           "returns its id (an int). Give size_bytes, or a shape (the size "
           "is then its elements times the dtype's size).")
      .def(
          "destroy",
          [](PyStore& s, uint64_t id) {
            Unlocked(s,
                     [&](Store& store) { return store.Destroy(TensorId{id}); });
          },
          "Frees every copy of the tensor (refused while leased).")
      .def("acquire", &Acquire, nb::arg("id"), nb::arg("tier"),
           nb::arg("access"), nb::arg("stream") = 0,
           "Brings the tensor to `tier` and pins it there under the "
           "returned Lease. `stream`: the cudaStream_t (as an int) the "
           "consumer's kernels run on (0: the legacy default stream).")
      .def("prefetch",
           [](PyStore& s, uint64_t id, Tier tier) {
             Unlocked(s, [&](Store& store) {
               return store.Prefetch(TensorId{id}, tier);
             });
           })
      .def(
          "evict",
          [](PyStore& s, uint64_t id, Tier to_tier) {
            Unlocked(s, [&](Store& store) {
              return store.Evict(TensorId{id}, to_tier);
            });
          },
          nb::arg("id"), nb::arg("to_tier"))
      .def(
          "discard",
          [](PyStore& s, uint64_t id) {
            Unlocked(s,
                     [&](Store& store) { return store.Discard(TensorId{id}); });
          },
          "Drops the contents with no write-back.")
      .def(
          "write",
          [](PyStore& s, uint64_t id, HostArray src, uint64_t offset) {
            Unlocked(s, [&](Store& store) {
              return store.Write(TensorId{id}, src.data(), ArrayBytes(src),
                                 offset);
            });
          },
          nb::arg("id"), nb::arg("src").noconvert(), nb::arg("offset") = 0,
          "Copies a C-contiguous CPU array's bytes into the tensor at byte "
          "`offset`.")
      .def(
          "read",
          [](PyStore& s, uint64_t id, HostArray dst, uint64_t offset) {
            Unlocked(s, [&](Store& store) {
              return store.Read(TensorId{id}, dst.data(), ArrayBytes(dst),
                                offset);
            });
          },
          nb::arg("id"), nb::arg("dst").noconvert(), nb::arg("offset") = 0,
          "Fills a C-contiguous CPU array with the tensor's bytes from "
          "byte `offset`.")
      .def("spec",
           [](PyStore& s, uint64_t id) {
             return SpecDict(ValueOrThrow(s.Get()->GetSpec(TensorId{id})));
           })
      .def("residency",
           [](PyStore& s, uint64_t id) {
             return ResidencyDict(
                 ValueOrThrow(s.Get()->GetResidency(TensorId{id})));
           })
      .def(
          "begin_step",
          [](PyStore& s) {
            std::shared_ptr<Store> store = s.Get();
            nb::gil_scoped_release released;
            store->BeginStep();
          },
          "Marks a step's start for the scheduler.")
      .def(
          "end_step",
          [](PyStore& s) {
            std::shared_ptr<Store> store = s.Get();
            nb::gil_scoped_release released;
            store->EndStep();
          },
          "Marks a step's end.")
      .def("pause_prefetch",
           [](PyStore& s, bool paused) {
             std::shared_ptr<Store> store = s.Get();
             nb::gil_scoped_release released;
             store->PausePrefetch(paused);
           })
      .def(
          "stats", [](PyStore& s) { return StatsDict(s.Get()->GetStats()); },
          "The counters as a dict (docs/api.md, Statistics).")
      .def(
          "write_timeline",
          [](PyStore& s, const std::string& path) {
            Unlocked(s,
                     [&](Store& store) { return store.WriteTimeline(path); });
          },
          "Chrome trace-event JSON of every transfer, lease and stall "
          "(needs timeline=True).")
      .def("describe", [](PyStore& s) { return s.Get()->DescribeTiers(); })
      .def("close", &PyStore::Close,
           "Later calls raise; the tiers are freed once no lease is left.")
      .def_prop_ro("closed", &PyStore::closed)
      .def_prop_ro(
          "device",
          [](const PyStore& s) {
            return s.device().cuda
                       ? "cuda:" + std::to_string(s.device().ordinal)
                       : std::string("cpu");
          },
          "Where device-tier leases are, as torch names it: \"cuda:N\", or "
          "\"cpu\" on the simulated device.")
      .def(
          "__enter__", [](PyStore& s) -> PyStore& { return s; },
          nb::rv_policy::reference)
      .def(
          "__exit__",
          [](PyStore& s, nb::object, nb::object, nb::object) { s.Close(); },
          nb::arg().none(), nb::arg().none(), nb::arg().none());
}

}  // namespace strata::python
