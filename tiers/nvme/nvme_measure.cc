// nvme_measure.cc: MeasureNvmeTier and MeasureNvme (nvme_measure.h).
#include "tiers/nvme/nvme_measure.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <optional>
#include <vector>

#include "absl/strings/str_format.h"
#include "base/bench_pattern.h"
#include "base/byte_size.h"
#include "strata/status.h"
#include "tiers/host/host_arena.h"

namespace strata {
namespace {

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
      .count();
}

template <typename Fn>
absl::StatusOr<double> MedianGbps(int samples, uint64_t bytes, Fn pass) {
  STRATA_RETURN_IF_ERROR(pass());  // warm-up
  std::vector<double> seconds;
  for (int i = 0; i < samples; ++i) {
    const auto start = std::chrono::steady_clock::now();
    STRATA_RETURN_IF_ERROR(pass());
    seconds.push_back(SecondsSince(start));
  }
  std::sort(seconds.begin(), seconds.end());
  return bytes / seconds[seconds.size() / 2] / 1e9;
}

absl::Status CheckMeasureConfig(const NvmeMeasureConfig& c,
                                uint64_t buffer_bytes) {
  if (c.bytes == 0 || c.bytes % kDirectIoAlignment != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "NVMe bench: %d bytes per pass is not a positive multiple of %d",
        c.bytes, kDirectIoAlignment));
  }
  if (c.bytes > buffer_bytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "NVMe bench: %d bytes per pass exceed the %d-byte buffer", c.bytes,
        buffer_bytes));
  }
  if (c.samples < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("NVMe bench: %d samples; at least 1", c.samples));
  }
  return absl::OkStatus();
}

// The bytes per pass for `c`: `c.bytes`, or what a probe write says moves in
// about c.target_sample_seconds (see NvmeMeasureConfig).
absl::StatusOr<uint64_t> ChooseSampleBytes(const NvmeMeasureConfig& c,
                                           NvmeTier& tier,
                                           const std::byte* data) {
  if (c.target_sample_seconds <= 0) return c.bytes;
  const uint64_t block = c.nvme.block_size_bytes;
  const uint64_t full_queue =
      std::max<uint64_t>(block * c.nvme.queue_depth, 1 * kMiB);
  const uint64_t probe =
      std::min(c.bytes, (full_queue + block - 1) / block * block);
  // The first write of a fresh file also allocates its extents: time the
  // second.
  STRATA_RETURN_IF_ERROR(tier.Write(0, data, probe));
  const auto start = std::chrono::steady_clock::now();
  STRATA_RETURN_IF_ERROR(tier.Write(0, data, probe));
  const double rate = probe / std::max(SecondsSince(start), 1e-9);
  const double want = rate * c.target_sample_seconds;
  if (want >= static_cast<double>(c.bytes)) return c.bytes;
  const uint64_t blocks = static_cast<uint64_t>(want) / block;
  return std::clamp(blocks * block, probe, c.bytes);
}

absl::Status CheckReadBack(const std::byte* data, uint64_t bytes,
                           const NvmeOptions& o) {
  const std::optional<uint64_t> bad = FindPatternMismatch(data, bytes, 0);
  if (!bad) return absl::OkStatus();
  return absl::DataLossError(absl::StrFormat(
      "NVMe bench: byte %d of %d read back (block %s, queue depth %d) "
      "differs from the byte written",
      *bad, bytes, FormatByteSize(o.block_size_bytes), o.queue_depth));
}

}  // namespace

absl::StatusOr<NvmeMeasurement> MeasureNvmeTier(const NvmeMeasureConfig& c,
                                                std::byte* buffer,
                                                uint64_t buffer_bytes) {
  STRATA_RETURN_IF_ERROR(CheckMeasureConfig(c, buffer_bytes));
  NvmeOptions o = c.nvme;
  o.budget_bytes = c.bytes;
  STRATA_ASSIGN_OR_RETURN(
      std::unique_ptr<NvmeTier> tier,
      NvmeTier::Open(o, {{buffer, buffer_bytes}}, c.wrap_io));
  NvmeMeasurement m;
  m.engine = std::string(tier->engine_name());
  STRATA_ASSIGN_OR_RETURN(m.sample_bytes, ChooseSampleBytes(c, *tier, buffer));
  const uint64_t n = m.sample_bytes;
  STRATA_ASSIGN_OR_RETURN(m.write_gbps, MedianGbps(c.samples, n, [&] {
                            return tier->Write(0, buffer, n);
                          }));
  std::memset(buffer, 0, n);  // so the check sees what the reads brought
  STRATA_ASSIGN_OR_RETURN(m.read_gbps, MedianGbps(c.samples, n, [&] {
                            return tier->Read(0, buffer, n);
                          }));
  STRATA_RETURN_IF_ERROR(CheckReadBack(buffer, n, o));
  return m;
}

absl::StatusOr<NvmeMeasurement> MeasureNvme(const NvmeMeasureConfig& config) {
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<HostArena> buffer,
                          HostArena::Create(config.bytes, false, nullptr));
  FillBenchPattern(buffer->base(), config.bytes, 0);
  return MeasureNvmeTier(config, buffer->base(), buffer->size_bytes());
}

}  // namespace strata
