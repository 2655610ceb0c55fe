// clipped_adamw.h: ClippedAdamW, AdamW with exact global gradient-norm
// clipping that still updates each group of parameters as soon as its
// gradients are complete.
//
// Clipping needs the norm of every gradient before any update; waiting for it
// would serialise the host optimizer behind the whole backward pass, losing
// the overlap ZeRO-Offload's CPU Adam gets from updating each layer as its
// gradients arrive (Ren et al., 2021). Instead each group is updated
// speculatively (as if the step will not clip) right after its gradients
// complete, once its weights and moments have been copied to the group's
// backup tensor. When the backward pass ends:
//   - the global norm is within the limit (the common case): the backups are
//     discarded, never written back;
//   - it exceeds the limit: every speculatively updated group is restored
//     from its backup and the caller re-runs the step with the clip
//     coefficient known up front, updating each group with clipped
//     gradients and no backups. Gradients are deterministic, so the re-run
//     recomputes the same bits and the result is exactly that of clipping
//     before any update.
// This is the speculate-then-validate scheme of SuperOffload (2025). The
// cost: the backup copies every step (host memcpy, and NVMe traffic when the
// optimizer tier is too small to keep them), and a whole extra forward and
// backward pass on a step that clips. Clipping comes in runs (early training,
// loss spikes, a norm hovering at the limit), so the steps after one that
// clipped are deferred instead: their gradients are kept until the norm is
// known and every group is updated at EndStep, with no backups and no re-run
// (the optimizer then trails the backward pass instead of overlapping it).
// Both paths give the same bits; after kCleanStepsToSpeculate steps in a row
// within the limit, updates speculate again. All of it is reported
// (ClipStats).
//
// Norms are summed on the device tier (Compute::SumOfSquares, in the order
// the groups complete), so a run with the optimizer on the host and one with
// it on the device clip at the same bits.
//
// Mixed precision (ParamSlot::mixed slots): a group's fp32 gradient sums are
// cast to its 16-bit gradients on the device as the group completes (the
// overflow check of fp16's loss scale, counted in the same pass,
// Micikevicius et al. 2018), the sums discarded, and the update is the fused
// pass (AdamMixedUpdateCpu: unscale, clip and decay folded in) that writes
// the fp32 master weight and the 16-bit copy. A gradient that is not finite
// anywhere in the step skips it: later groups are not updated, and EndStep
// restores the speculated ones, so mixed steps always speculate (backups),
// clipping or not. A mixed slot's backup holds its 16-bit copy widened, so
// restoring it is exact.
//
// AdamW (Loshchilov & Hutter, 2019): decay is decoupled from the gradient,
// w *= 1 - lr * weight_decay before the Adam update, on parameters marked
// `decay` (the 2-D weights) only — PyTorch's AdamW, in the same order.
#ifndef STRATA_TRAIN_MODEL_CLIPPED_ADAMW_H_
#define STRATA_TRAIN_MODEL_CLIPPED_ADAMW_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "strata/store.h"
#include "train/compute/compute.h"
#include "train/compute/precision.h"

namespace strata::train {

// One parameter: its weights, gradient and two Adam moments (equal sizes,
// fp32). A mixed slot (type bf16 or fp16) also has 16-bit copies: w16, what
// the passes read (the parameter), and g16, what the optimizer reads; its w
// is then the fp32 master weight and g the fp32 gradient sum, which lives
// on the device only until GroupComplete casts it.
struct ParamSlot {
  TensorId w, g, m, v;
  TensorId w16, g16;                  // mixed slots only
  Precision type = Precision::kFp32;  // of w16 and g16
  bool decay = false;                 // AdamW's weight decay (2-D weights)
  uint64_t bytes = 0;                 // of w
  uint64_t tensor = 0;  // stochastic rounding's stream (StochasticSeed)
  // The whole tensor's index of w's first element: a sharded run's slot
  // holds one shard, and stochastic rounding draws by the whole index.
  int64_t first_index = 0;
  bool mixed() const { return type != Precision::kFp32; }
};

// Parameters whose gradients complete together (a transformer block), and
// the tensor that holds a copy of their weights and moments while a
// speculative update is unconfirmed: for each slot in order, w | m | v
// (| widened w16 for a mixed slot), fp32 (the group passed to EndStep needs
// none).
struct ParamGroup {
  std::vector<ParamSlot> params;
  TensorId backup;
  uint64_t backup_bytes() const;  // 3 (mixed: 4) x the parameters' bytes
};

// A step's mixed-precision settings (ParamSlot::mixed slots).
struct MixedStep {
  // Gradients arrive multiplied by the loss scale: 1 / it. Default: 1.
  float grad_scale = 1.0f;
  // Of the 16-bit weight copies; a stochastic seed is drawn per slot and
  // step, StochasticSeed(seed, slot.tensor, step).
  Rounding rounding = Rounding::kNearestEven;
  uint64_t seed = 0;
  int64_t step = 0;
};

// A sharded run's view of a group's gradients (ZeRO-3): each rank's slots
// hold one shard, and the rank that summed the whole gradients passes what
// the norm needs of them; the others pass zeros.
struct WholeGradient {
  double sum_squares = 0;  // of the whole fp32 gradients, in slot order
  // fp32 slots of a mixed step whose squares are not finite (mixed slots
  // count their own shards' casts).
  int64_t nonfinite = 0;
};

// How a sharded run's ranks agree at EndStep on the step's sum of squares
// and non-finite count (every rank must end with the same values).
using NormAgreement =
    std::function<absl::Status(double& sum_squares, int64_t& nonfinite)>;

struct ClipOptions {
  float max_norm = 1.0f;  // clip when the global L2 norm exceeds it; 0: off
  float weight_decay = 0.1f;
};

struct ClipStats {
  int64_t steps = 0;
  int64_t clipped = 0;           // steps whose norm exceeded max_norm
  int64_t rolled_back = 0;       // of those, steps that restored updated groups
  int64_t deferred = 0;          // steps updated only once the norm was known
  uint64_t backup_bytes = 0;     // copied to backups, in all
  double optimizer_seconds = 0;  // host time in updates, backups, restores
  double last_norm = 0;          // the last step's global gradient norm
};

class ClippedAdamW {
 public:
  // Steps in a row within the limit before updates speculate again.
  static constexpr int64_t kCleanStepsToSpeculate = 8;

  // The optimizer runs on `tier` (kHost: the CPU update on host leases;
  // kDevice: `compute`'s); gradient norms are taken on the device.
  // `retry_evictions` as for LeaseGroup (may be null).
  ClippedAdamW(Store* store, Compute* compute, Tier tier, ClipOptions options,
               const std::vector<TensorId>* retry_evictions);

  // Starts a step with Adam's parameters for it. `known_coefficient` is set
  // for the re-run of a step that clipped: every group is then updated at
  // once with gradients scaled by it, without backups.
  // `mixed` for a model with mixed slots (set: they speculate and may skip).
  void BeginStep(const AdamParams& adam,
                 std::optional<float> known_coefficient = std::nullopt,
                 std::optional<MixedStep> mixed = std::nullopt);

  // `group`'s gradients are complete (on the device tier or below): adds
  // their squares to the step's norm, then updates the group (speculatively,
  // after backing it up), or, once the norm already exceeds the limit, only
  // discards the gradients (the step will re-run). In a deferred step the
  // group and its gradients wait for EndStep instead.
  //
  // Sharded (after SetAgreement): `whole` carries the norm's part of the
  // whole gradients, of which `group`'s slots hold this rank's shards.
  absl::Status GroupComplete(const ParamGroup& group,
                             std::optional<WholeGradient> whole = {});

  // Ends the step with `last`, the group whose gradients complete last (the
  // embeddings): with the norm then known it is updated without a backup.
  // Returns the clip coefficient the caller must re-run the step with (the
  // updated groups were restored), or nullopt when the step is done: updated,
  // or, in a mixed step that saw a non-finite gradient, skipped (every
  // group as it was; step_nonfinite() > 0).
  // Errors: the store's; after one the parameters may be partly updated:
  // stop training.
  // Sharded: `whole` as for GroupComplete; the ranks' agreement decides.
  absl::StatusOr<std::optional<float>> EndStep(
      const ParamGroup& last, std::optional<WholeGradient> whole = {});

  // Makes this one rank of a sharded run: `agree` runs in every EndStep
  // that needs the norm, before anything is decided.
  void SetAgreement(NormAgreement agree) { agree_ = std::move(agree); }

  const ClipStats& stats() const { return stats_; }
  // Non-finite gradient elements the current (or last) mixed step saw (a
  // non-finite fp32 slot's sum counts 1).
  int64_t step_nonfinite() const { return nonfinite_; }

  // What decides the next steps besides the tensors, for a checkpoint: the
  // clean steps since the last clip (deferred or speculative updates) and
  // the counters reported.
  struct Snapshot {
    int64_t steps_since_clip = kCleanStepsToSpeculate;
    ClipStats stats;
  };
  Snapshot snapshot() const { return {steps_since_clip_, stats_}; }
  // Between steps only (after EndStep returned nullopt).
  void Restore(const Snapshot& s) {
    steps_since_clip_ = s.steps_since_clip;
    stats_ = s.stats;
  }

 private:
  // Casts the group's mixed slots' gradient sums to 16 bits (counting the
  // non-finite ones) and discards the sums; with `want_sum`, returns the sum
  // of the squares of every slot's (scaled) fp32 gradient, else 0.
  absl::StatusOr<double> PrepareGroup(const ParamGroup& group, bool want_sum);
  // PrepareGroup's sum, or under sharding the shards cast and `whole`'s.
  absl::StatusOr<double> GroupSum(const ParamGroup& group,
                                  const std::optional<WholeGradient>& whole);
  // The global norm so far, unscaled.
  double Norm() const;
  bool overflow() const { return nonfinite_ > 0; }
  // Backs up (when `backup`) and updates one slot with coefficient `coef`.
  absl::Status UpdateSlot(const ParamSlot& slot, TensorId backup_id,
                          uint64_t backup_offset, bool backup, float coef);
  absl::Status UpdateGroup(const ParamGroup& group, bool backup, float coef);
  absl::Status RestoreGroup(const ParamGroup& group);
  // dst = src on the optimizer tier (n floats).
  absl::Status CopyOnTier(const float* src, float* dst, int64_t n);
  // dst = src widened / rounded to nearest on the optimizer tier.
  absl::Status WidenOnTier(Precision type, const uint16_t* src, float* dst,
                           int64_t n);
  absl::Status NarrowOnTier(Precision type, const float* src, uint16_t* dst,
                            int64_t n);
  absl::Status DiscardGradients(const ParamGroup& group);

  Store* const store_;
  Compute* const compute_;
  const Tier tier_;
  const ClipOptions options_;
  const std::vector<TensorId>* const retry_evictions_;
  NormAgreement agree_;  // sharded runs only
  AdamParams adam_;
  std::optional<float> known_coefficient_;
  std::optional<MixedStep> mixed_;
  double sum_squares_ = 0;
  int64_t nonfinite_ = 0;                      // this step's, mixed steps only
  std::vector<const ParamGroup*> speculated_;  // updated with backups
  std::vector<const ParamGroup*> deferred_;    // waiting for the norm
  bool defer_ = false;                         // this step is deferred
  // Steps within the limit since the last that clipped (the first step
  // speculates).
  int64_t steps_since_clip_ = kCleanStepsToSpeculate;
  ClipStats stats_;
};

}  // namespace strata::train

#endif  // STRATA_TRAIN_MODEL_CLIPPED_ADAMW_H_
