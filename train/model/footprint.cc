// footprint.cc: ModelFootprint from a ModelConfig, and the budget checks
// Mlp::Create runs before it creates a tensor (see footprint.h).
#include "train/model/footprint.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "absl/strings/str_format.h"
#include "base/byte_size.h"
#include "strata/options.h"
#include "strata/status.h"
#include "strata/tensor.h"
#include "train/model/model.h"
#include "train/model/optimizer_parts.h"

namespace strata::train {
namespace {

constexpr uint64_t kF = sizeof(float);
constexpr uint64_t kDeviceGranule = kDeviceAllocationGranuleBytes;
constexpr uint64_t kHostGranule = kHostAllocationGranuleBytes;

uint64_t RoundUp(uint64_t bytes, uint64_t granule) {
  return (bytes + granule - 1) / granule * granule;
}

absl::Status CheckConfig(const ModelConfig& c) {
  auto bad = [](const char* what, int64_t v) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s=%d: must be at least 1", what, v));
  };
  if (c.inputs < 1) return bad("inputs", c.inputs);
  if (c.width < 1) return bad("--width", c.width);
  if (c.depth < 1) return bad("--depth", c.depth);
  if (c.classes < 2) {
    return absl::InvalidArgumentError(
        absl::StrFormat("classes=%d: need at least 2", c.classes));
  }
  if (c.batch < 1) return bad("--batch", c.batch);
  if (c.accumulate < 1 || c.accumulate > 4096) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--accumulate=%d: micro-batches per step must be 1..4096",
        c.accumulate));
  }
  STRATA_RETURN_IF_ERROR(CheckCheckpointingHome(c.checkpoint, c.home));
  constexpr int64_t kMaxElements = 1'000'000'000;  // 4 GB in one tensor
  // A width x width weight only between two hidden layers.
  if (c.depth > 10'000 || (c.depth > 1 && c.width > kMaxElements / c.width) ||
      c.batch > kMaxElements / std::max(c.width, c.inputs) ||
      c.inputs > kMaxElements / c.width) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--width=%d --depth=%d --batch=%d: a tensor would exceed %d elements "
        "(or more than 10000 layers); choose smaller sizes",
        c.width, c.depth, c.batch, kMaxElements));
  }
  if (!(c.adam.lr > 0) || !std::isfinite(c.adam.lr)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--lr=%g: must be a positive number", c.adam.lr));
  }
  STRATA_RETURN_IF_ERROR(CheckRoundingNeedsHalf(c.precision, c.rounding));
  if (c.optimizer_tier == Tier::kNvme) {
    return absl::InvalidArgumentError(
        "the optimizer runs on the host or the device tier, not on NVMe");
  }
  if (c.optimizer_tier > c.home) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "the optimizer cannot run on the %s tier when every tensor lives on "
        "the faster %s tier: use --optimizer-tier=%s",
        TierName(c.optimizer_tier), TierName(c.home), TierName(c.home)));
  }
  return absl::OkStatus();
}

// One rank of a sharded run (model_sharding.cc) also holds two device-home
// gather slots, each the largest layer's full weight and bias and their
// gradients, leased for the whole pass: beside every operation's leases,
// the optimizer's too (it updates a shard as soon as its gradient arrives).
// Nothing else of a layer's is leased on the device, so the slack beside
// leases is one activation (or, with the optimizer there, one shard).
void AddGatherSlots(const ModelConfig& c, uint64_t slots_bytes,
                    uint64_t largest_activation, ModelFootprint* f) {
  f->gather_slot_bytes = slots_bytes;
  f->device_working_set_bytes += slots_bytes;
  f->largest_device_tensor_bytes = largest_activation;
  f->streamed_optimizer_bytes = 0;  // a sharded rank never streams
  if (c.optimizer_tier == Tier::kDevice) {
    f->optimizer_working_set_bytes += slots_bytes;
    f->largest_device_tensor_bytes = f->largest_tensor_bytes;
  }
}

}  // namespace

absl::StatusOr<ModelFootprint> ComputeFootprint(const ModelConfig& c,
                                                int sharded_ranks) {
  STRATA_RETURN_IF_ERROR(CheckConfig(c));
  if (sharded_ranks < 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%d ranks: must be 0 (unsharded) or more", sharded_ranks));
  }
  ModelFootprint f;
  const bool sharded = sharded_ranks > 0;
  // A rank's largest shard of e elements (ShardOffsets: 1/N rounded up).
  auto shard = [n = uint64_t(std::max(sharded_ranks, 1))](uint64_t e) {
    return (e + n - 1) / n;
  };
  uint64_t slot = 0;  // sharded: one gather slot's weight and bias
  const uint64_t batch = c.batch;
  const uint64_t micro = c.accumulate;
  const bool keep_z = c.checkpoint == ActivationCheckpointing::kNone;
  const uint64_t g = kDeviceGranule;
  // The two activation-gradient tensors hold batch x max(width, classes).
  const uint64_t dact = RoundUp(batch * std::max(c.width, c.classes) * kF, g);
  // Mixed precision: 16-bit parameters and gradients beside the fp32
  // gradient sums and master weights (model.h).
  const bool mixed = c.precision != Precision::kFp32;
  const uint64_t pb = PrecisionBytes(c.precision);
  const auto shapes = LayerShapes(c);
  for (size_t l = 0; l < shapes.size(); ++l) {
    const auto [in, out] = shapes[l];
    const bool hidden = l + 1 < shapes.size();
    // This rank's shard when sharded (the whole tensor otherwise).
    const uint64_t we = shard(in * out), be = shard(out);
    const uint64_t w = we * kF, b = be * kF;
    const uint64_t w16 = we * pb, b16 = be * pb;  // w, b when fp32
    // Parameters in their precision, gradient sums in fp32 (the same size
    // when fp32): a slot's pair of parameters and its pair of gradients.
    slot = std::max(slot, RoundUp(in * out * pb, g) + RoundUp(out * pb, g) +
                              RoundUp(in * out * kF, g) + RoundUp(out * kF, g));
    f.parameter_bytes += w16 + b16;
    f.gradient_bytes += w + b + (mixed ? w16 + b16 : 0);
    f.optimizer_bytes += (mixed ? 3 : 2) * (w + b);
    // Per micro-batch: the activation, and the pre-activation unless it is
    // recomputed (then one buffer for all); the logits of the last layer.
    const uint64_t y = batch * out * kF;
    f.activation_bytes +=
        hidden ? micro * y + (keep_z ? micro : 1) * y : micro * y;
    f.largest_tensor_bytes = std::max(f.largest_tensor_bytes, w);
    // The leases of ForwardLayer, ActivationBackward and LinearBackward
    // (model.cc, mlp_backward.cc) for this layer.
    const uint64_t x_b = RoundUp(batch * in * kF, g);
    const uint64_t y_b = RoundUp(y, g);
    // Sharded, a layer computes on the gather slots, leased for the whole
    // pass (added below), not on leases of its own parameters.
    const uint64_t params = sharded ? 0 : RoundUp(w16, g) + RoundUp(b16, g);
    const uint64_t grads =
        sharded ? 0 : RoundUp(w, g) + RoundUp(b, g) + (mixed ? params : 0);
    const uint64_t dy = hidden ? dact : RoundUp(batch * c.classes * kF, g);
    const uint64_t dx = l > 0 ? dact : 0;
    const uint64_t forward = x_b + params + (hidden && keep_z ? 2 : 1) * y_b;
    const uint64_t backward = x_b + params + grads + dy + dx;
    const uint64_t activation_backward =
        hidden ? (keep_z ? 0 : x_b + params) + y_b + dact : 0;
    f.device_working_set_bytes = std::max(
        {f.device_working_set_bytes, forward, backward, activation_backward});
    const uint64_t granule =
        c.optimizer_tier == Tier::kDevice ? kDeviceGranule : kHostGranule;
    // Weight, gradient and one part of each moment; mixed: the 16-bit
    // gradient and the 16-bit weight it writes, and a part of the moments
    // and master weights. Streamed (host only): a part of everything.
    const uint64_t part = std::min<uint64_t>(we, kOptimizerPartElements);
    const uint64_t p32 = RoundUp(part * kF, kHostGranule);
    const uint64_t p16 = RoundUp(part * pb, kHostGranule);
    const uint64_t update =
        mixed ? 3 * RoundUp(part * kF, granule) + 2 * RoundUp(w16, granule)
              : 2 * RoundUp(w, granule) + 2 * RoundUp(part * kF, granule);
    f.optimizer_working_set_bytes =
        std::max(f.optimizer_working_set_bytes, update);
    f.streamed_optimizer_bytes = std::max(f.streamed_optimizer_bytes,
                                          mixed ? 3 * p32 + 2 * p16 : 4 * p32);
    f.largest_part_bytes = std::max(f.largest_part_bytes, part * kF);
  }
  // The input batch, labels, logits' gradient and two activation gradients.
  const uint64_t widest = std::max(c.width, c.classes);
  f.activation_bytes +=
      micro * (batch * c.inputs * kF + batch * sizeof(int32_t) +
               batch * c.classes * kF + 2 * batch * widest * kF);
  const uint64_t loss = 2 * RoundUp(batch * c.classes * kF, g) +
                        RoundUp(batch * sizeof(int32_t), g);
  f.device_working_set_bytes = std::max(f.device_working_set_bytes, loss);
  const uint64_t largest_activation =
      std::max(batch * widest, batch * c.inputs) * kF;
  f.largest_tensor_bytes = std::max(f.largest_tensor_bytes, largest_activation);
  if (sharded) AddGatherSlots(c, 2 * slot, largest_activation, &f);
  return f;
}

namespace {

// The working set of the tier an operation runs on must fit with room to
// spare: leased copies cannot move, so the next lease needs a free range
// beside them (one largest tensor of slack), unless the tier is the home of
// every tensor and the leased copies are the reserved ones.
// The free range a tier needs beside its leased copies: one largest
// tensor, unless the tier homes every tensor (reserved copies).
uint64_t Slack(const ModelConfig& config, Tier tier, uint64_t largest) {
  return config.home == tier ? 0 : largest;
}

absl::Status CheckTier(const Stats& stats, Tier tier, uint64_t working_set,
                       const ModelConfig& config, const ModelFootprint& f,
                       const char* what, uint64_t largest = 0,
                       bool batch_matters = true) {
  const uint64_t capacity = stats.tiers[int(tier)].capacity_bytes;
  if (largest == 0) largest = f.largest_tensor_bytes;
  const uint64_t slack = Slack(config, tier, largest);
  const uint64_t need = working_set + slack;
  if (capacity >= need) return absl::OkStatus();
  const ByteShortfall shown = FormatByteShortfall(capacity, need);
  return absl::ResourceExhaustedError(absl::StrFormat(
      "%s budget %s is below the %s this model needs there (%s %s%s, plus "
      "%s to place them beside leased copies); raise --%s-budget to at "
      "least %s, or lower %s",
      TierName(tier), shown.have, shown.need, what, FormatByteSize(working_set),
      batch_matters ? absl::StrFormat(" at --batch=%d", config.batch) : "",
      FormatByteSize(slack), TierName(tier), FormatByteSizeAtLeast(need),
      batch_matters ? "--width/--batch" : "--width"));
}

// The host optimizer can stream: it runs on the host while the device
// keeps real copies (in unified memory a device lease is host pages too).
bool CanStream(const Stats& stats, const ModelConfig& config,
               const ModelFootprint& f) {
  // Only when parts need less than the whole (weights beyond one part).
  return config.optimizer_tier == Tier::kHost && config.home != Tier::kHost &&
         stats.device_memory == "copies" && f.streamed_optimizer_bytes > 0 &&
         f.streamed_optimizer_bytes + f.largest_part_bytes <
             f.optimizer_working_set_bytes + f.largest_tensor_bytes;
}

bool Fits(const Stats& stats, Tier tier, uint64_t working_set,
          const ModelConfig& config, uint64_t largest) {
  return stats.tiers[int(tier)].capacity_bytes >=
         working_set + Slack(config, tier, largest);
}

}  // namespace

bool StreamsOptimizer(const Stats& stats, const ModelConfig& config,
                      const ModelFootprint& f) {
  return CanStream(stats, config, f) &&
         !Fits(stats, Tier::kHost, f.optimizer_working_set_bytes, config,
               f.largest_tensor_bytes);
}

namespace {

absl::Status CheckBudgets(const Stats& stats, const ModelConfig& config,
                          const ModelFootprint& f) {
  uint64_t device = f.device_working_set_bytes;
  const char* what =
      f.gather_slot_bytes > 0
          ? "the gather slots (the largest layer's full weights and "
            "gradients, twice) and one layer's inputs and outputs"
          : "one layer's working set (input, weights, gradients, outputs)";
  if (config.optimizer_tier == Tier::kDevice &&
      f.optimizer_working_set_bytes > device) {
    device = f.optimizer_working_set_bytes;
    what = f.gather_slot_bytes > 0
               ? "the gather slots (the largest layer's full weights and "
                 "gradients, twice) beside the optimizer's working set (a "
                 "shard, its gradient, two Adam moments)"
               : "the optimizer's working set (a weight, its gradient, two "
                 "Adam moments)";
  }
  STRATA_RETURN_IF_ERROR(CheckTier(stats, Tier::kDevice, device, config, f,
                                   what, f.largest_device_tensor_bytes));
  if (config.optimizer_tier == Tier::kHost) {
    // The smaller need names what to raise: the streamed one where parts
    // help.
    STRATA_RETURN_IF_ERROR(
        !CanStream(stats, config, f)
            ? CheckTier(stats, Tier::kHost, f.optimizer_working_set_bytes,
                        config, f,
                        "the optimizer's working set (a weight, its "
                        "gradient, a part of its Adam moments)",
                        0, /*batch_matters=*/false)
            : CheckTier(stats, Tier::kHost, f.streamed_optimizer_bytes, config,
                        f,
                        "the streamed optimizer's working set (a 4 MiB part "
                        "of a weight, its gradient and Adam moments)",
                        f.largest_part_bytes, /*batch_matters=*/false));
  }
  if (stats.device_memory != "copies") {
    // Unified memory: a device copy is its host copy's pages.
    STRATA_RETURN_IF_ERROR(CheckTier(
        stats, Tier::kHost, device, config, f,
        "in unified memory, the device working set's pages (one layer's "
        "input, weights, gradients, outputs)"));
  }
  return absl::OkStatus();
}

// The home tier holds every tensor the model creates.
absl::Status CheckHome(const Stats& stats, const ModelConfig& config,
                       const ModelFootprint& f) {
  const uint64_t home = stats.tiers[int(config.home)].capacity_bytes;
  if (home >= f.total_bytes()) return absl::OkStatus();
  const ByteShortfall shown = FormatByteShortfall(home, f.total_bytes());
  return absl::ResourceExhaustedError(absl::StrFormat(
      "the model's tensors need %s on their home tier (%s), which has %s "
      "(weights, gradients and Adam moments %s, activations %s); raise "
      "--%s-budget to at least %s or shrink the model",
      shown.need, TierName(config.home), shown.have,
      FormatByteSize(f.state_bytes()), FormatByteSize(f.activation_bytes),
      TierName(config.home), FormatByteSizeAtLeast(f.total_bytes())));
}

}  // namespace

absl::Status CheckFootprintFits(const Stats& stats, const ModelConfig& config,
                                const ModelFootprint& f) {
  STRATA_RETURN_IF_ERROR(CheckBudgets(stats, config, f));
  return CheckHome(stats, config, f);
}

}  // namespace strata::train
