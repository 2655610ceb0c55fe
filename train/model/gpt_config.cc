// gpt_config.cc: a Gpt's parameter count, footprint and budget checks,
// before anything is created (see gpt_config.h).
#include "train/model/gpt_config.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>

#include "absl/strings/str_format.h"
#include "base/byte_size.h"
#include "strata/options.h"
#include "strata/status.h"
#include "train/model/model_sharding.h"

namespace strata::train {
namespace {

constexpr uint64_t kF = sizeof(float);

uint64_t RoundUp(uint64_t bytes, uint64_t granule) {
  return (bytes + granule - 1) / granule * granule;
}

// Bytes of tensors of these element counts (floats or int32), each rounded
// to the tier's allocation granule: what one LeaseGroup holds.
uint64_t Leased(std::initializer_list<uint64_t> elements, uint64_t granule) {
  uint64_t bytes = 0;
  for (uint64_t n : elements) bytes += RoundUp(n * kF, granule);
  return bytes;
}

// One block's parameters: 2 LayerNorms, QKV, projection, MLP.
int64_t BlockParameters(int64_t C) { return 12 * C * C + 13 * C; }

// Floats of one block's rollback backup: w | m | v per parameter, and the
// widened 16-bit copy of each mixed one (all but the LayerNorms' 4C).
uint64_t BlockBackupFloats(const GptConfig& c) {
  const uint64_t P = BlockParameters(c.embed);
  const bool mixed = c.precision != Precision::kFp32;
  return 3 * P + (mixed ? P - 4 * c.embed : 0);
}

absl::Status CheckGptConfig(const GptConfig& c) {
  auto bad = [](const char* flag, int64_t v) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--%s=%d: must be at least 1", flag, v));
  };
  if (c.layers < 1) return bad("layers", c.layers);
  if (c.heads < 1) return bad("heads", c.heads);
  if (c.embed < 1) return bad("embed", c.embed);
  if (c.context < 1) return bad("context", c.context);
  if (c.batch < 1) return bad("batch", c.batch);
  if (c.accumulate < 1 || c.accumulate > 4096) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--accumulate=%d: micro-batches per step must be 1..4096",
        c.accumulate));
  }
  if (c.vocab < 2) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--vocab=%d: need at least 2 tokens", c.vocab));
  }
  if (c.embed % c.heads != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--embed=%d is not a multiple of --heads=%d: each head takes "
        "embed/heads channels",
        c.embed, c.heads));
  }
  constexpr int64_t kMaxElements = 1'000'000'000;  // 4 GB in one tensor
  const int64_t widest = std::max(c.vocab, 4 * c.tokens());
  if (c.layers > 10'000 || c.embed > kMaxElements / widest ||
      c.batch > kMaxElements / c.context) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--embed=%d --vocab=%d --batch=%d --context=%d: a tensor would exceed "
        "%d elements (or more than 10000 layers); choose smaller sizes",
        c.embed, c.vocab, c.batch, c.context, kMaxElements));
  }
  if (!(c.adam.lr > 0) || !std::isfinite(c.adam.lr)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--lr=%g: must be a positive number", c.adam.lr));
  }
  STRATA_RETURN_IF_ERROR(CheckCheckpointingHome(c.checkpoint, c.home));
  STRATA_RETURN_IF_ERROR(CheckRoundingNeedsHalf(c.precision, c.rounding));
  if (!(c.grad_clip >= 0) || !std::isfinite(c.grad_clip)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--grad-clip=%g: must be >= 0 (0 turns clipping off)", c.grad_clip));
  }
  if (!(c.weight_decay >= 0) || !(c.weight_decay < 1)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--weight-decay=%g: must be in [0, 1) (0 turns it off)",
                        c.weight_decay));
  }
  if (c.optimizer_tier == Tier::kNvme || c.optimizer_tier > c.home) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "the optimizer cannot run on the %s tier with every tensor homed on "
        "%s: use --optimizer-tier=host or device, no slower than the home",
        TierName(c.optimizer_tier), TierName(c.home)));
  }
  return absl::OkStatus();
}

// The largest LeaseGroup of a step on the device (the groups of
// gpt_forward.cc and gpt_backward.cc).
uint64_t DeviceWorkingSet(const GptConfig& c) {
  const uint64_t g = kDeviceAllocationGranuleBytes;
  const uint64_t N = c.tokens(), C = c.embed, V = c.vocab, T = c.context;
  const uint64_t S = c.classifier_rows, lse = c.batch * c.heads * c.context;
  const uint64_t NC = N * C, CC = C * C;
  return std::max({
      Leased({N, V * C, T * C, NC}, g),                         // embed
      Leased({NC, C, C, NC, 2 * N, 3 * CC, 3 * C, 3 * NC}, g),  // ln1+qkv
      Leased({3 * NC, NC, lse, CC, C, NC, NC}, g),              // attention
      Leased({NC, C, C, NC, 2 * N, 4 * CC, 4 * C, 4 * NC, 4 * NC}, g),  // fc
      Leased({4 * NC, 4 * CC, C, NC, NC}, g),       // fc_proj
      Leased({NC, V * C, S * V, N, NC, V * C}, g),  // classifier
      Leased({4 * NC, 4 * CC, NC, 4 * CC, C, 4 * NC, 4 * NC, NC, 4 * CC, 4 * CC,
              4 * C, NC},
             g),                                                // MLP bwd
      Leased({NC, C, 2 * N, NC, NC, C, C}, g),                  // norm bwd
      Leased({NC, CC, NC, CC, C, NC, 3 * NC, lse, 3 * NC}, g),  // attn bwd
      Leased({NC, 3 * CC, 3 * NC, 3 * CC, 3 * C, NC}, g),       // qkv bwd
      Leased({N, NC, V * C, T * C}, g),                         // embed bwd
  });
}

// The optimizer's largest group: a slot's weight, gradient and moments,
// plus its block's backup on the speculative path.
uint64_t OptimizerWorkingSet(const GptConfig& c, uint64_t granule) {
  const uint64_t C = c.embed;
  const uint64_t embeddings =
      Leased({c.vocab * C, c.vocab * C, c.vocab * C, c.vocab * C}, granule);
  // Mixed steps always speculate (a non-finite gradient skips them).
  const bool speculates = c.grad_clip > 0 || c.precision != Precision::kFp32;
  const uint64_t backup = speculates ? BlockBackupFloats(c) : 0;
  const uint64_t slot =
      Leased({4 * C * C, 4 * C * C, 4 * C * C, 4 * C * C, backup}, granule);
  return std::max(embeddings, slot);
}

// `shrink`: the flags that lower `need`.
absl::Status CheckTier(const Stats& stats, Tier tier, uint64_t need,
                       const char* what,
                       const char* shrink = "--batch/--context/--embed") {
  const uint64_t capacity = stats.tiers[int(tier)].capacity_bytes;
  if (capacity >= need) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrFormat(
      "%s budget %s is below the %s the GPT needs there (%s with room to "
      "place it beside leased copies); raise --%s-budget to at least %s, or "
      "lower %s",
      TierName(tier), FormatByteSize(capacity), what,
      FormatByteSizeAtLeast(need), TierName(tier), FormatByteSizeAtLeast(need),
      shrink));
}

}  // namespace

int64_t GptParameterCount(const GptConfig& c) {
  return c.vocab * c.embed + c.context * c.embed +
         c.layers * BlockParameters(c.embed) + 2 * c.embed;
}

int64_t ChooseClassifierRows(const GptConfig& c, uint64_t device_capacity) {
  const uint64_t row =
      static_cast<uint64_t>(std::max<int64_t>(c.vocab, 1)) * kF;
  const int64_t fit = static_cast<int64_t>(device_capacity / 8 / row);
  return std::clamp<int64_t>(fit, 1, std::max<int64_t>(c.tokens(), 1));
}

namespace {

// One rank's part of `bytes` of `tensors` tensors sharded over `ranks`: the
// largest shard of each is at most one element (4 bytes) above the mean.
uint64_t ShardBytes(uint64_t bytes, uint64_t tensors, int ranks) {
  return (bytes + ranks - 1) / ranks + tensors * kF;
}

// The gather slots of a sharded rank (gpt_sharding.cc): two blocks' and the
// globals' whole parameters (16-bit but the LayerNorms under mixed
// precision) and fp32 gradients, each leased in granules.
uint64_t GatherSlotBytes(const GptConfig& c) {
  const uint64_t g = kDeviceAllocationGranuleBytes, C = c.embed;
  const uint64_t e = c.precision != Precision::kFp32 ? 2 : kF;
  auto tensor = [&](uint64_t n, bool half) {
    return RoundUp(n * (half ? e : kF), g) + RoundUp(n * kF, g);
  };
  const uint64_t block =
      4 * tensor(C, false) + tensor(3 * C * C, true) + tensor(3 * C, true) +
      tensor(C * C, true) + tensor(C, true) + tensor(4 * C * C, true) +
      tensor(4 * C, true) + tensor(4 * C * C, true) + tensor(C, true);
  const uint64_t globals = tensor(c.vocab * C, true) +
                           tensor(c.context * C, true) + 2 * tensor(C, false);
  return 2 * block + globals;
}

}  // namespace

absl::Status CheckGptShardable(const GptConfig& c, const Compute& compute,
                               const Collectives& collectives,
                               const std::string& device_memory) {
  STRATA_RETURN_IF_ERROR(
      CheckShardedDevice(compute, collectives, device_memory));
  const int ranks = collectives.size();
  if (c.embed < ranks) {  // the smallest tensors have embed elements
    return absl::InvalidArgumentError(absl::StrFormat(
        "%d ranks, but a LayerNorm has only --embed=%d values: every rank "
        "needs a shard of every tensor (use at most %d ranks, or raise "
        "--embed)",
        ranks, c.embed, c.embed));
  }
  return absl::OkStatus();
}

absl::StatusOr<ModelFootprint> ComputeGptFootprint(const GptConfig& c,
                                                   int sharded_ranks) {
  STRATA_RETURN_IF_ERROR(CheckGptConfig(c));
  if (c.classifier_rows < 1) {
    return absl::InvalidArgumentError("classifier_rows must be chosen (>= 1)");
  }
  ModelFootprint f;
  const uint64_t P = GptParameterCount(c);
  const uint64_t N = c.tokens(), C = c.embed;
  const bool mixed = c.precision != Precision::kFp32;
  const bool speculates = c.grad_clip > 0 || mixed;
  // Mixed: all but the LayerNorms are 16-bit (2 B) with an fp32 gradient
  // sum (4 B, device only while backward runs) and master weight (4 B).
  const uint64_t norms = 4 * C * c.layers + 2 * C;
  const uint64_t half = mixed ? P - norms : 0;
  f.parameter_bytes = (P - half) * kF + half * 2;
  f.gradient_bytes = (P - half) * kF + half * (kF + 2);
  f.optimizer_bytes = (2 * P + half) * kF;
  if (speculates) {
    f.backup_bytes = (c.layers * BlockBackupFloats(c) + 3 * 2 * C) * kF;
  }
  const uint64_t per_block = 16 * N * C + 4 * N + c.batch * c.heads * c.context;
  // Per micro-batch: each block's activations, the tokens and targets, the
  // last block's and the final norm's outputs and stats, the gradients of
  // the residual stream, a norm's output and QKV; shared: the logits slice
  // and two gradients within an operation.
  const uint64_t per_micro = c.layers * per_block + 7 * N * C + 4 * N;
  f.activation_bytes =
      (c.accumulate * per_micro + c.classifier_rows * c.vocab + 5 * N * C) * kF;
  f.device_working_set_bytes = DeviceWorkingSet(c);
  const uint64_t granule = c.optimizer_tier == Tier::kDevice
                               ? kDeviceAllocationGranuleBytes
                               : kHostAllocationGranuleBytes;
  f.optimizer_working_set_bytes = OptimizerWorkingSet(c, granule);
  const uint64_t V = c.vocab, S = c.classifier_rows;
  const uint64_t backup = speculates ? BlockBackupFloats(c) : 0;
  f.largest_tensor_bytes = std::max({V * C, 4 * N * C, S * V, backup}) * kF;
  // Backups stay on the optimizer's tier.
  f.largest_device_tensor_bytes =
      c.optimizer_tier == Tier::kDevice
          ? f.largest_tensor_bytes
          : std::max({V * C, 4 * N * C, S * V}) * kF;
  if (sharded_ranks > 0) {
    // Per parameter: its w, g, m, v (and mixed copies) shard alike.
    const uint64_t tensors = 4 * (12 * c.layers + 4);
    f.parameter_bytes = ShardBytes(f.parameter_bytes, tensors, sharded_ranks);
    f.gradient_bytes = ShardBytes(f.gradient_bytes, tensors, sharded_ranks);
    f.optimizer_bytes = ShardBytes(f.optimizer_bytes, tensors, sharded_ranks);
    f.backup_bytes = ShardBytes(f.backup_bytes, tensors, sharded_ranks);
    f.gather_slot_bytes = GatherSlotBytes(c);
    f.device_working_set_bytes += f.gather_slot_bytes;
  }
  return f;
}

namespace {

// What the device tier must hold: the largest operation's working set and,
// unless every tensor is homed there, one largest tensor of free range
// beside it (leased copies cannot move).
uint64_t DeviceNeed(const GptConfig& c, const ModelFootprint& f) {
  const uint64_t slack =
      c.home == Tier::kDevice ? 0 : f.largest_device_tensor_bytes;
  return f.device_working_set_bytes + slack;
}

}  // namespace

absl::StatusOr<uint64_t> DeviceBudgetForOwnSlice(GptConfig c,
                                                 int sharded_ranks) {
  uint64_t budget = 0;
  // Each round's need adds about a quarter of the budget's growth (the
  // logits slice and its slack): a few rounds converge.
  for (int round = 0; round < 64; ++round) {
    c.classifier_rows = ChooseClassifierRows(c, budget);
    STRATA_ASSIGN_OR_RETURN(ModelFootprint f,
                            ComputeGptFootprint(c, sharded_ranks));
    const uint64_t need = DeviceNeed(c, f);
    if (need <= budget) break;
    budget = need;
  }
  return budget;
}

absl::Status CheckGptFits(const Stats& stats, const GptConfig& c,
                          const ModelFootprint& f) {
  // Leased copies cannot move: the next lease needs one largest tensor of
  // free range beside them, unless the tier is every tensor's home.
  auto slack = [&](Tier t) { return c.home == t ? 0 : f.largest_tensor_bytes; };
  STRATA_RETURN_IF_ERROR(CheckTier(stats, Tier::kDevice, DeviceNeed(c, f),
                                   "largest operation's working set"));
  if (c.optimizer_tier == Tier::kHost) {
    STRATA_RETURN_IF_ERROR(CheckTier(
        stats, Tier::kHost, f.optimizer_working_set_bytes + slack(Tier::kHost),
        "optimizer's working set (weights, gradient, moments, "
        "rollback backup)",
        "--embed/--vocab"));
  }
  if (stats.device_memory != "copies") {
    STRATA_RETURN_IF_ERROR(CheckTier(
        stats, Tier::kHost, f.device_working_set_bytes + slack(Tier::kHost),
        "device working set's pages (unified memory)"));
  }
  const uint64_t home = stats.tiers[int(c.home)].capacity_bytes;
  if (home >= f.total_bytes()) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrFormat(
      "the GPT's tensors need %s on their home tier (%s), which has %s; "
      "raise --%s-budget or shrink the model",
      FormatByteSize(f.total_bytes()), TierName(c.home), FormatByteSize(home),
      TierName(c.home)));
}

}  // namespace strata::train
