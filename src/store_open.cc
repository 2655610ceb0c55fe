// store_open.cc: Store::Open — validates options, reserves the tiers in order
// (device arena, pinned host arena, bounce chunks, NVMe swap files) and hands
// them to a StoreCore behind a thin Store handle.
#include "src/store_open.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/byte_size.h"
#include "base/system_info.h"
#include "src/store_core.h"
#include "strata/status.h"
#include "tiers/fault/fault_env.h"
#include "tiers/fault/faulty_block_io.h"
#include "tiers/nvme/nvme_tier.h"
#include "tiers/nvme/request_shape.h"

namespace strata {
namespace {

// The Store a user holds: owns the core, which leases reference weakly.
class StoreHandle final : public Store {
 public:
  explicit StoreHandle(std::shared_ptr<StoreCore> core)
      : core_(std::move(core)) {}
  ~StoreHandle() override { core_->Shutdown(); }

  absl::StatusOr<TensorId> Create(const TensorSpec& spec) override {
    return core_->Create(spec);
  }
  absl::Status Destroy(TensorId id) override { return core_->Destroy(id); }
  absl::StatusOr<Lease> Acquire(TensorId id, Tier tier, Access access,
                                void* stream) override {
    return core_->Acquire(id, tier, access, stream);
  }
  absl::Status Prefetch(TensorId id, Tier tier) override {
    return core_->Prefetch(id, tier);
  }
  absl::Status Evict(TensorId id, Tier to_tier) override {
    return core_->Evict(id, to_tier);
  }
  absl::Status Discard(TensorId id) override { return core_->Discard(id); }
  absl::Status Write(TensorId id, const void* src, uint64_t bytes,
                     uint64_t offset) override {
    return core_->Write(id, src, bytes, offset);
  }
  absl::Status Read(TensorId id, void* dst, uint64_t bytes,
                    uint64_t offset) override {
    return core_->Read(id, dst, bytes, offset);
  }
  absl::StatusOr<TensorSpec> GetSpec(TensorId id) const override {
    return core_->GetSpec(id);
  }
  absl::StatusOr<Residency> GetResidency(TensorId id) const override {
    return core_->GetResidency(id);
  }
  void BeginStep() override { core_->BeginStep(); }
  void EndStep() override { core_->EndStep(); }
  void PausePrefetch(bool paused) override { core_->PausePrefetch(paused); }
  Stats GetStats() const override { return core_->GetStats(); }
  absl::Status WriteTimeline(const std::string& path) const override {
    return core_->WriteTimeline(path);
  }
  std::string DescribeTiers() const override { return core_->DescribeTiers(); }

 private:
  std::shared_ptr<StoreCore> core_;
};

// Bounce chunks: at least 4 MiB and a whole number of NVMe blocks, so one
// chunk is several requests in flight together.
uint64_t BounceChunkBytes(uint64_t block) {
  return std::max<uint64_t>(1, (4 * kMiB + block - 1) / block) * block;
}

// The simulated device's memory is host memory: with the host tier it must
// fit in RAM, or the machine would swap or kill the process later.
absl::Status CheckSimulatedFits(const DeviceBackend& device,
                                const StoreOptions& o) {
  const uint64_t ram = PhysicalMemoryBytes();
  // Unified memory has no device arena: the host budget is all there is.
  const bool unified = o.device.memory == DeviceMemory::kUnified;
  const uint64_t total =
      (unified ? 0 : o.device.budget_bytes) + o.host.budget_bytes;
  if (!device.is_simulated() || ram == 0 || total <= ram) {
    return absl::OkStatus();
  }
  if (unified) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "the host budget %s (managed memory, in host RAM on the simulated "
        "device) exceeds this machine's physical memory %s: lower "
        "--host-budget",
        FormatByteSize(o.host.budget_bytes), FormatByteSize(ram)));
  }
  return absl::ResourceExhaustedError(absl::StrFormat(
      "the simulated device lives in host memory: device budget %s + host "
      "budget %s = %s exceeds this machine's physical memory %s: lower "
      "--device-budget or --host-budget",
      FormatByteSize(o.device.budget_bytes),
      FormatByteSize(o.host.budget_bytes), FormatByteSize(total),
      FormatByteSize(ram)));
}

// Unified memory: the host tier is one managed allocation (refused above the
// GPU's free memory less a margin), advised preferred-location host and
// accessed-by device when hints are on.
absl::StatusOr<std::unique_ptr<HostArena>> OpenManagedHost(
    DeviceBackend& device, const StoreOptions& o) {
  const uint64_t bytes = (o.host.budget_bytes + kDirectIoAlignment - 1) /
                         kDirectIoAlignment * kDirectIoAlignment;
  STRATA_ASSIGN_OR_RETURN(std::byte * base, device.ReserveManaged(bytes));
  if (o.device.unified_hints) {
    STRATA_RETURN_IF_ERROR(device.AdviseManaged(
        {base, bytes}, ManagedAdvice::kPreferHostAccessedByDevice));
  }
  return HostArena::Managed(base, bytes);
}

}  // namespace

absl::Status ValidateStoreOptions(const StoreOptions& o) {
  if (o.device.budget_bytes == 0) {
    return absl::InvalidArgumentError(
        "device budget is 0: set --device-budget > 0");
  }
  if (o.host.budget_bytes == 0) {
    return absl::InvalidArgumentError(
        "host budget is 0: set --host-budget > 0");
  }
  if (o.device.copy_chunk_bytes == 0) {
    return absl::InvalidArgumentError(
        "device copy_chunk_bytes is 0: use >= 64 KiB");
  }
  if (!(o.device.sim_link_gbps >= 0)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "simulated link bandwidth %g GB/s is negative: use --sim-link-gbps >= "
        "0 (0 = no link model)",
        o.device.sim_link_gbps));
  }
  if (!(o.device.sim_latency_seconds >= 0)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "simulated link latency %g s is negative: use --sim-latency-us >= 0",
        o.device.sim_latency_seconds));
  }
  if (static_cast<int>(o.device.memory) >
      static_cast<int>(DeviceMemory::kUnified)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "device memory mode %d is not kExplicitCopies or kUnified",
        static_cast<int>(o.device.memory)));
  }
  if (o.device.memory == DeviceMemory::kUnified &&
      o.device.budget_bytes > o.host.budget_bytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "in unified memory the device budget (%s) caps the host tier's pages "
        "resident on the GPU, so it cannot exceed the host budget (%s): lower "
        "--device-budget or raise --host-budget",
        FormatByteSize(o.device.budget_bytes),
        FormatByteSize(o.host.budget_bytes)));
  }
  if (o.scheduler.prefetch_threads < 0 || o.scheduler.prefetch_threads > 64) {
    return absl::InvalidArgumentError(
        "scheduler.prefetch_threads must be in [0, 64] (0: automatic)");
  }
  const NvmeOptions& n = o.nvme;
  if (n.directories.empty() != (n.budget_bytes == 0)) {
    return absl::InvalidArgumentError(
        n.directories.empty()
            ? "an NVMe budget was set but no NVMe directory: pass --nvme-dir"
            : "the NVMe budget is 0 but NVMe directories are set (--nvme-dir, "
              "default /var/tmp): set --nvme-budget, or --nvme-dir= to run "
              "without an NVMe tier");
  }
  STRATA_RETURN_IF_ERROR(CheckNvmeRequestShape(
      n.block_size_bytes, n.queue_depth, "--block-size", "--queue-depth"));
  for (size_t i = 0; i < n.directories.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (n.directories[i] != n.directories[j]) continue;
      return absl::InvalidArgumentError(absl::StrFormat(
          "NVMe directory '%s' is listed twice: striping needs distinct "
          "directories (one per drive)",
          n.directories[i]));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Store>> OpenStore(const StoreOptions& options,
                                                 const StoreSeams& seams) {
  STRATA_RETURN_IF_ERROR(ValidateStoreOptions(options));
  StoreOptions rounded = options;  // whole device allocation granules
  constexpr uint64_t g = kDeviceAllocationGranuleBytes;
  rounded.device.budget_bytes = (options.device.budget_bytes + g - 1) / g * g;
  TierSet tiers;
  STRATA_ASSIGN_OR_RETURN(tiers.device,
                          OpenDeviceBackend(rounded.device, &tiers.device_why));
  if (seams.wrap_device)
    tiers.device = seams.wrap_device(std::move(tiers.device));
  STRATA_RETURN_IF_ERROR(CheckSimulatedFits(*tiers.device, rounded));
  const bool unified = options.device.memory == DeviceMemory::kUnified;
  if (unified) {
    STRATA_ASSIGN_OR_RETURN(tiers.host,
                            OpenManagedHost(*tiers.device, options));
  } else {
    absl::StatusOr<std::byte*> arena =
        tiers.device->ReserveArena(rounded.device.budget_bytes);
    if (!arena.ok()) {
      if (absl::StrContains(arena.status().message(), "--device-budget")) {
        return arena.status();
      }
      return absl::Status(
          arena.status().code(),
          absl::StrCat("device budget: ", arena.status().message(),
                       ": lower --device-budget"));
    }
    tiers.device_base = *arena;
    STRATA_ASSIGN_OR_RETURN(
        tiers.host,
        HostArena::Create(options.host.budget_bytes, options.host.lock_memory,
                          tiers.device.get()));
  }
  if (!options.nvme.directories.empty()) {
    STRATA_ASSIGN_OR_RETURN(
        tiers.bounce,
        BouncePool::Create(BounceChunkBytes(options.nvme.block_size_bytes),
                           /*pairs=*/2, options.host.lock_memory,
                           tiers.device.get()));
    // Managed pages migrate, so they cannot be fixed I/O buffers: unified
    // mode reaches NVMe through the bounce chunks only.
    std::vector<iovec> buffers = {
        {tiers.bounce->base(), tiers.bounce->size_bytes()}};
    if (!unified) {
      buffers.insert(buffers.begin(),
                     {tiers.host->base(), tiers.host->size_bytes()});
    }
    STRATA_ASSIGN_OR_RETURN(
        tiers.nvme, NvmeTier::Open(options.nvme, buffers, seams.wrap_block_io));
  }
  auto core = std::make_shared<StoreCore>(rounded, std::move(tiers));
  return std::unique_ptr<Store>(new StoreHandle(std::move(core)));
}

absl::Status Store::CheckOptions(const StoreOptions& options) {
  STRATA_RETURN_IF_ERROR(ValidateStoreOptions(options));
  for (const std::string& dir : options.nvme.directories) {
    STRATA_RETURN_IF_ERROR(CheckNvmeDirectory(dir));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Store>> Store::Open(
    const StoreOptions& options) {
  StoreSeams seams;
  // The test-only switch (tiers/fault/fault_env.h): a real run, e.g.
  // `strata train`, on a disk that fails as the variable says.
  STRATA_ASSIGN_OR_RETURN(std::optional<FaultSpec> faults,
                          BlockIoFaultsFromEnv());
  if (faults.has_value()) {
    seams.wrap_block_io = [spec = *faults](std::unique_ptr<BlockIo> io) {
      return std::make_unique<FaultyBlockIo>(std::move(io), spec);
    };
  }
  return OpenStore(options, seams);
}

}  // namespace strata
