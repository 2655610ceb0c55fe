#include "apps/nvme_bench.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <vector>

#include "absl/strings/str_format.h"
#include "strata/options.h"
#include "strata/status.h"
#include "tiers/host/host_arena.h"
#include "tiers/nvme/nvme_tier.h"

namespace strata {
namespace {

template <typename Fn>
absl::StatusOr<double> MedianGbps(int samples, uint64_t bytes, Fn pass) {
  STRATA_RETURN_IF_ERROR(pass());  // warm-up
  std::vector<double> seconds;
  for (int i = 0; i < samples; ++i) {
    const auto start = std::chrono::steady_clock::now();
    STRATA_RETURN_IF_ERROR(pass());
    seconds.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count());
  }
  std::sort(seconds.begin(), seconds.end());
  return bytes / seconds[seconds.size() / 2] / 1e9;
}

// Runs fio once and returns its bandwidth in GB/s, or a reason it could not.
absl::StatusOr<double> RunFio(const NvmeBenchConfig& c, const char* rw) {
  const std::string file = c.directory + "/strata-bench-fio.tmp";
  const std::string cmd = absl::StrFormat(
      "fio --name=strata --filename=%s --size=%d --bs=%d --iodepth=%d "
      "--ioengine=io_uring --fixedbufs=1 --registerfiles=1 --direct=1 --rw=%s "
      "--loops=%d --output-format=json "
      "2>/dev/null",
      file, c.size_bytes, c.block_bytes, c.queue_depth, rw, c.samples + 1);
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return absl::UnavailableError("cannot start fio");
  std::string out;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, pipe)) > 0;) out.append(buf, n);
  const int rc = pclose(pipe);
  unlink(file.c_str());
  if (rc != 0) return absl::UnavailableError("fio failed (is it installed?)");
  nlohmann::json j = nlohmann::json::parse(out, nullptr, false);
  if (j.is_discarded() || !j.contains("jobs") || j["jobs"].empty()) {
    return absl::UnavailableError("fio printed no JSON report");
  }
  const char* side = std::strcmp(rw, "read") == 0 ? "read" : "write";
  return j["jobs"][0][side]["bw_bytes"].get<double>() / 1e9;
}

}  // namespace

absl::StatusOr<NvmeBenchResult> RunNvmeBench(const NvmeBenchConfig& c) {
  NvmeOptions o;
  o.directories = {c.directory};
  o.budget_bytes = c.size_bytes;
  o.block_size_bytes = c.block_bytes;
  o.queue_depth = c.queue_depth;
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<HostArena> buffer,
                          HostArena::Create(c.size_bytes, false, nullptr));
  const std::vector<iovec> buffers = {{buffer->base(), buffer->size_bytes()}};
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<NvmeTier> tier,
                          NvmeTier::Open(o, buffers));
  std::byte* data = buffer->base();
  for (uint64_t i = 0; i < c.size_bytes; ++i) data[i] = std::byte(i * 7 % 251);
  NvmeBenchResult r;
  r.engine = std::string(tier->engine_name());
  STRATA_ASSIGN_OR_RETURN(r.write_gbps,
                          MedianGbps(c.samples, c.size_bytes, [&] {
                            return tier->Write(0, data, c.size_bytes);
                          }));
  std::memset(data, 0, c.size_bytes);
  STRATA_ASSIGN_OR_RETURN(r.read_gbps, MedianGbps(c.samples, c.size_bytes, [&] {
                            return tier->Read(0, data, c.size_bytes);
                          }));
  for (uint64_t i = 0; i < c.size_bytes; i += 4093) {
    if (data[i] != std::byte(i * 7 % 251)) {
      return absl::DataLossError("NVMe bench read back different bytes");
    }
  }
  tier.reset();  // frees the swap file's space before fio needs its own
  absl::StatusOr<double> fio_write = RunFio(c, "write");
  absl::StatusOr<double> fio_read = RunFio(c, "read");
  if (fio_write.ok() && fio_read.ok()) {
    r.fio_write_gbps = *fio_write;
    r.fio_read_gbps = *fio_read;
  } else {
    r.fio_note = std::string(
        (fio_write.ok() ? fio_read.status() : fio_write.status()).message());
  }
  return r;
}

}  // namespace strata
