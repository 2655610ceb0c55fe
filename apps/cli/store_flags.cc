#include "apps/cli/store_flags.h"

#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/byte_size.h"
#include "strata/option_names.h"
#include "strata/profile.h"
#include "strata/status.h"

ABSL_FLAG(strata::ByteSize, device_budget, strata::ByteSize{256 * strata::kMiB},
          "Device tier budget (bytes; units KiB/MiB/GiB accepted), reserved "
          "with one cudaMalloc, or host memory on the simulated device.");
ABSL_FLAG(strata::ByteSize, host_budget, strata::ByteSize{1 * strata::kGiB},
          "Pinned host tier budget, reserved once (mmap + mlock + "
          "cudaHostRegister). Must fit in physical memory.");
ABSL_FLAG(std::vector<std::string>, nvme_dir, {"/var/tmp"},
          "Comma-separated directories for NVMe swap files, one file each "
          "(several stripe across drives). Files are O_DIRECT, mode 0600 and "
          "unlinked: nothing is left behind. Empty: no NVMe tier.");
ABSL_FLAG(strata::ByteSize, nvme_budget, strata::ByteSize{1 * strata::kGiB},
          "NVMe tier budget across all --nvme-dir directories, preallocated "
          "at start.");
ABSL_FLAG(uint32_t, queue_depth, 32, "NVMe I/O requests in flight.");
ABSL_FLAG(strata::ByteSize, block_size, strata::ByteSize{1 * strata::kMiB},
          "NVMe request size and stripe unit; a multiple of 4 KiB.");
ABSL_FLAG(std::string, device, "auto",
          "Device backend: auto (a GPU if one answers, else simulated), cuda, "
          "or simulated. Environment: STRATA_DEVICE.");
ABSL_FLAG(std::string, io_engine, "auto",
          "NVMe I/O engine: auto (io_uring, else a pread/pwrite thread pool), "
          "io_uring, or threads. Environment: STRATA_IO_ENGINE.");
ABSL_FLAG(double, sim_link_gbps, 0,
          "Simulated device only: host<->device link bandwidth in GB/s "
          "(1e9 bytes/s) that copies are held to; 0 = memcpy speed.");
ABSL_FLAG(std::string, machine_profile, "",
          "Take the NVMe block size and queue depth from a machine profile "
          "`strata bench --profile=FILE` wrote (a --block-size or "
          "--queue-depth other than its default still wins).");
ABSL_FLAG(bool, prefetch, true,
          "Prefetch what the learned access trace predicts next (the "
          "scheduler); --noprefetch (or --prefetch=false) loads on demand.");
ABSL_FLAG(std::string, eviction, "belady",
          "Eviction policy: belady (the copy needed furthest ahead in the "
          "learned trace) or lru (least recently used).");
ABSL_FLAG(std::string, scheduler, "planned",
          "With --prefetch: planned (once a step is learned, follow a plan "
          "of the whole step: which tier holds each tensor when, every load "
          "and write-back with its latest start) or reactive (prefetch the "
          "next predicted accesses and evict by Belady, acquire by acquire; "
          "for comparison).");
ABSL_FLAG(std::string, memory, "copies",
          "How tensors reach the device: copies (a device arena filled by "
          "cudaMemcpyAsync) or unified (the host budget is one managed "
          "allocation whose pages prefetch hints move to the device; the "
          "same pointer on both tiers; --host-budget must fit in the GPU's "
          "free memory).");
ABSL_FLAG(bool, unified_hints, true,
          "With --memory=unified: prefetch, evict, discard and advise "
          "(--nounified-hints: pages move by page faults only, the baseline).");
ABSL_FLAG(strata::ByteSize, sim_memory, strata::ByteSize{0},
          "Simulated device only: the GPU memory it reports, which caps "
          "--memory=unified's managed memory (0 = this machine's RAM).");
ABSL_FLAG(double, sim_latency_us, 0,
          "Simulated device only: latency added to every copy, microseconds.");

namespace strata {

namespace {

// True when the flag's value differs from its default (set on the command
// line to something else).
template <typename T>
bool Changed(const absl::Flag<T>& flag) {
  const absl::CommandLineFlag& f = absl::GetFlagReflectionHandle(flag);
  return f.CurrentValue() != f.DefaultValue();
}

}  // namespace

namespace {
// The flags the command line gave, as RecordGivenFlags found them. (This
// Abseil keeps CommandLineFlag::IsSpecifiedOnCommandLine private.)
std::set<std::string>& GivenFlags() {
  static std::set<std::string> given;
  return given;
}
}  // namespace

void RecordGivenFlags(const std::vector<std::string>& args) {
  for (const std::string& arg : args) {
    if (arg.size() < 3 || arg.compare(0, 2, "--") != 0) continue;
    std::string name = arg.substr(2, arg.find('=') - 2);
    GivenFlags().insert(name);
    if (name.rfind("no", 0) == 0) GivenFlags().insert(name.substr(2));
  }
}

bool FlagGiven(const char* name) { return GivenFlags().contains(name); }

void SetBudgetDefaults(uint64_t device_bytes, uint64_t host_bytes,
                       uint64_t nvme_bytes) {
  absl::SetFlag(&FLAGS_device_budget, ByteSize{device_bytes});
  absl::SetFlag(&FLAGS_host_budget, ByteSize{host_bytes});
  absl::SetFlag(&FLAGS_nvme_budget, ByteSize{nvme_bytes});
}

void SetUnsetBudgets(uint64_t device_bytes, uint64_t host_bytes,
                     uint64_t nvme_bytes) {
  if (!FlagGiven("device_budget")) {
    absl::SetFlag(&FLAGS_device_budget, ByteSize{device_bytes});
  }
  if (!FlagGiven("host_budget")) {
    absl::SetFlag(&FLAGS_host_budget, ByteSize{host_bytes});
  }
  if (!FlagGiven("nvme_budget")) {
    absl::SetFlag(&FLAGS_nvme_budget, ByteSize{nvme_bytes});
  }
}

absl::StatusOr<StoreOptions> StoreOptionsFromFlags() {
  StoreOptions o;
  o.device.budget_bytes = absl::GetFlag(FLAGS_device_budget).bytes;
  o.host.budget_bytes = absl::GetFlag(FLAGS_host_budget).bytes;
  for (const std::string& dir : absl::GetFlag(FLAGS_nvme_dir)) {
    if (!dir.empty()) o.nvme.directories.push_back(dir);
  }
  o.nvme.budget_bytes =
      o.nvme.directories.empty() ? 0 : absl::GetFlag(FLAGS_nvme_budget).bytes;
  o.nvme.queue_depth = absl::GetFlag(FLAGS_queue_depth);
  o.nvme.block_size_bytes = absl::GetFlag(FLAGS_block_size).bytes;
  if (const std::string path = absl::GetFlag(FLAGS_machine_profile);
      !path.empty()) {
    absl::StatusOr<MachineProfile> profile = LoadMachineProfile(path);
    if (!profile.ok()) {
      return absl::Status(
          profile.status().code(),
          absl::StrFormat("--machine-profile: %s", profile.status().message()));
    }
    ApplyMachineProfile(*profile, &o);
    if (Changed(FLAGS_queue_depth)) {
      o.nvme.queue_depth = absl::GetFlag(FLAGS_queue_depth);
    }
    if (Changed(FLAGS_block_size)) {
      o.nvme.block_size_bytes = absl::GetFlag(FLAGS_block_size).bytes;
    }
  }
  STRATA_ASSIGN_OR_RETURN(
      o.device.backend,
      ParseDeviceBackend(absl::GetFlag(FLAGS_device), "--device"));
  STRATA_ASSIGN_OR_RETURN(
      o.nvme.engine,
      ParseIoEngine(absl::GetFlag(FLAGS_io_engine), "--io-engine"));
  STRATA_ASSIGN_OR_RETURN(
      o.scheduler.eviction,
      ParseEvictionPolicy(absl::GetFlag(FLAGS_eviction), "--eviction"));
  o.scheduler.prefetch = absl::GetFlag(FLAGS_prefetch);
  const std::string scheduler = absl::GetFlag(FLAGS_scheduler);
  if (scheduler != "planned" && scheduler != "reactive") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--scheduler=", scheduler, ": expected planned or reactive"));
  }
  o.scheduler.planned = scheduler == "planned";
  STRATA_ASSIGN_OR_RETURN(
      o.device.memory,
      ParseDeviceMemory(absl::GetFlag(FLAGS_memory), "--memory"));
  o.device.unified_hints = absl::GetFlag(FLAGS_unified_hints);
  if (!o.device.unified_hints && o.device.memory != DeviceMemory::kUnified) {
    return absl::InvalidArgumentError(
        "--nounified-hints applies to --memory=unified only (explicit copies "
        "use no hints): add --memory=unified, or drop it");
  }
  o.device.sim_memory_bytes = absl::GetFlag(FLAGS_sim_memory).bytes;
  const double gbps = absl::GetFlag(FLAGS_sim_link_gbps);
  const double latency_us = absl::GetFlag(FLAGS_sim_latency_us);
  if (!(gbps >= 0) || !(latency_us >= 0) || !std::isfinite(gbps) ||
      !std::isfinite(latency_us) || (gbps > 0 && gbps < 1e-3) ||
      latency_us > 1e6) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--sim-link-gbps=%g --sim-latency-us=%g: the link must be 0 (no link "
        "model) or at least 0.001 GB/s, the latency 0 to 1e6 us",
        gbps, latency_us));
  }
  o.device.sim_link_gbps = absl::GetFlag(FLAGS_sim_link_gbps);
  o.device.sim_latency_seconds = absl::GetFlag(FLAGS_sim_latency_us) * 1e-6;
  return o;
}

}  // namespace strata
