// train_report.h: the store's part of a training report — budgets, peaks,
// bytes moved, prefetch and stalls — shared by the MLP and the GPT, as JSON
// keys and as rows of the printed table.
#ifndef STRATA_APPS_TRAIN_REPORT_H_
#define STRATA_APPS_TRAIN_REPORT_H_

#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "strata/stats.h"
#include "train/compute/precision.h"
#include "train/model/loss_scale.h"

namespace strata {

// device/host/nvme budget and peak bytes, h2d/d2h/nvme read/write bytes,
// prefetch hit rate and counts, acquires, stalls, lease-group retries, the
// NVMe faults survived (io_retries, checksum_rereads, checksum_failures), the
// device, its memory mode, unified-memory counters and the I/O engine.
nlohmann::json StoreReportJson(const Stats& st);

// h2d_bytes_per_param_step, d2h_..., nvme_read_..., nvme_write_...: what
// each link moved during `steps` training steps (Link order), per parameter
// and step; 0 when there were no steps.
nlohmann::json BytesPerParamStepJson(
    const std::array<uint64_t, kNumLinks>& link_bytes, int64_t steps,
    int64_t parameters);

// The report of a run that failed after it began, so that what it did is
// not lost with it: "error" (the status as text), "steps" done and their
// "losses", and the store's keys (StoreReportJson: the counters of a failing
// disk).
nlohmann::json FailedRunJson(const absl::Status& error, const Stats& st,
                             absl::Span<const double> losses);

// Writes `report` to `path` (invalid UTF-8, e.g. in a GPT's sample, is
// replaced). Errno codes naming --json.
absl::Status WriteReportJson(const std::string& path,
                             const nlohmann::json& report);

// "4.3x", or "0.0042x" below 1 (a small model is not "0.0x" its budget).
std::string TimesFormat(double ratio);

// "1 thread", "2 threads".
std::string ThreadsFormat(int threads);

// The table rows for the same: peaks against budgets, bytes moved, prefetch
// hit rate, stall time, unified-memory counters. `state_bytes` is the
// model state, shown against the device budget.
void PrintStoreRows(const Stats& st, uint64_t state_bytes);

// The row that sets the NVMe bytes a training step read (`link_bytes` over
// `steps`: training only) beside the fewest it must read at these budgets
// (SchedulerStats::nvme_read_floor_bytes); nothing when the floor is 0.
void PrintNvmeFloorRow(const Stats& st,
                       const std::array<uint64_t, kNumLinks>& link_bytes,
                       int64_t steps);

// A mixed-precision run's keys: precision, rounding, skipped_steps and, for
// fp16 (`loss_scale` set), loss_scale and loss_scale_history (each change's
// step and scale).
nlohmann::json PrecisionJson(train::Precision precision,
                             train::Rounding rounding, int64_t skipped_steps,
                             const train::DynamicLossScale* loss_scale);
// Its text row; nothing for fp32.
void PrintPrecisionRow(train::Precision precision, train::Rounding rounding,
                       int64_t skipped_steps,
                       const train::DynamicLossScale* loss_scale);

}  // namespace strata

#endif  // STRATA_APPS_TRAIN_REPORT_H_
