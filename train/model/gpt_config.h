// gpt_config.h: the shape and training settings of a Gpt (gpt.h), and the
// bytes it needs, computed before anything is created.
#ifndef STRATA_TRAIN_MODEL_GPT_CONFIG_H_
#define STRATA_TRAIN_MODEL_GPT_CONFIG_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "strata/stats.h"
#include "strata/tensor.h"
#include "train/comm/collectives.h"
#include "train/compute/compute.h"
#include "train/compute/precision.h"
#include "train/model/activation_checkpointing.h"
#include "train/model/footprint.h"  // ModelFootprint
#include "train/model/loss_scale.h"

namespace strata::train {

struct GptConfig {
  int layers = 4;         // transformer blocks (L)
  int heads = 4;          // attention heads (H); must divide embed
  int64_t embed = 128;    // embedding width (C)
  int64_t context = 128;  // tokens per sequence (T)
  int64_t vocab = 256;    // token ids [0, vocab) (V)
  int64_t batch = 8;      // sequences per micro-batch (B)
  // Micro-batches of `batch` sequences per optimizer step, run layer-major
  // (every micro-batch through a block before the next), so each weight
  // crosses to the device once per pass and direction, not once per
  // micro-batch; gradients sum in fp32 on the device.
  int accumulate = 1;
  uint64_t seed = 1;          // weight initialisation
  AdamParams adam;            // lr, betas, eps (corrections set per step)
  float weight_decay = 0.1f;  // AdamW, on 2-D weights only
  float grad_clip = 1.0f;     // global gradient-norm limit; 0: no clipping
  // Rows (tokens) of the classifier's logits per slice; 0 chooses the most
  // whose logits fit in an eighth of the device budget (set by Gpt::Create).
  int64_t classifier_rows = 0;
  Tier optimizer_tier = Tier::kHost;
  Tier home = Tier::kNvme;
  // kBlock: each block keeps only its input (the residual stream) and
  // backward reruns the block's forward up to its last projection first.
  ActivationCheckpointing checkpoint = ActivationCheckpointing::kNone;
  // bf16/fp16: every linear layer's weight and bias and both embeddings are
  // 16-bit store tensors (their gradients too), with fp32 master weights
  // beside the moments; the LayerNorms stay fp32 (2C values each, and
  // normalisation wants the range, as in every mixed-precision recipe).
  Precision precision = Precision::kFp32;
  // How the optimizer rounds master weights into the 16-bit copies.
  Rounding rounding = Rounding::kNearestEven;
  LossScaleOptions loss_scale;  // fp16's (loss_scale.h); unused otherwise
  int64_t tokens() const { return batch * context; }  // N = B x T
  int64_t step_sequences() const { return batch * accumulate; }
};

// Parameters of a GPT-2 layout of `c`'s shape (the tied embedding counted
// once).
int64_t GptParameterCount(const GptConfig& c);

// The classifier slice Create would choose for a device budget of
// `device_capacity` bytes: the most rows (up to B x T) whose logits take at
// most an eighth of it, at least 1.
int64_t ChooseClassifierRows(const GptConfig& c, uint64_t device_capacity);

// The least device budget that holds the GPT's device working set when its
// classifier slice is the one ChooseClassifierRows picks for that budget
// (the slice grows with the budget, so the need does too). Errors: those of
// ComputeGptFootprint (with `sharded_ranks`).
absl::StatusOr<uint64_t> DeviceBudgetForOwnSlice(GptConfig c,
                                                 int sharded_ranks = 0);

// The footprint of `c` (with c.classifier_rows already chosen, >= 1).
// InvalidArgument for sizes that make no sense (a dimension below 1, heads
// not dividing embed, > 1e9 elements in a tensor). `sharded_ranks` > 0: one
// rank of a run sharded over that many (gpt.h): the largest shard of every
// parameter, gradient, moment and backup, and a device working set that
// adds the gather slots (two blocks' and the embeddings' and final norm's
// whole parameters and fp32 gradients, gather_slot_bytes) to the unsharded
// one (an upper bound: the slots are what the passes lease).
absl::StatusOr<ModelFootprint> ComputeGptFootprint(const GptConfig& c,
                                                   int sharded_ranks = 0);

// OK when `c` can be sharded over `collectives`' ranks on `compute` in
// `device_memory` (Stats'): FailedPrecondition for a transport that does
// not fit the compute (a CUDA GPU takes NCCL, the CPU MPI or threads) or in
// unified memory (the gather slots are device-home tensors);
// InvalidArgument when a tensor has fewer elements than ranks (--embed
// below the ranks).
absl::Status CheckGptShardable(const GptConfig& c, const Compute& compute,
                               const Collectives& collectives,
                               const std::string& device_memory);

// As CheckFootprintFits (footprint.h): ResourceExhausted naming the budget
// flag to raise when a tier cannot hold what the GPT needs there.
absl::Status CheckGptFits(const Stats& stats, const GptConfig& c,
                          const ModelFootprint& f);

}  // namespace strata::train

#endif  // STRATA_TRAIN_MODEL_GPT_CONFIG_H_
