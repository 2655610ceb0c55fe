// gpt.h: Gpt, a decoder-only transformer in the GPT-2 layout (Radford et al.,
// 2019) whose every tensor lives in a strata Store.
//
// Token and position embeddings; L blocks of LayerNorm -> QKV projection ->
// causal multi-head attention -> output projection -> residual add ->
// LayerNorm -> MLP (4C, GELU tanh) -> projection -> residual add; a final
// LayerNorm; logits through the token embedding (tied); softmax
// cross-entropy. GPT-2 initialisation: weights N(0, 0.02), the two residual
// projections scaled by 1/sqrt(2L), biases 0, LayerNorm weights 1.
//
// Every parameter, gradient, AdamW moment and saved activation is a store
// tensor of its kind, one per block and role ("block3.qkv.weight", ...), so
// the scheduler sees the layer order. A step acquires them block by block
// inside BeginStep/EndStep: forward, the classifier and its gradient in
// slices of token rows (the B T x V logits never exist at once), backward,
// each block updated by ClippedAdamW as soon as its gradients are complete.
// The tied embedding is read at the start of the step (embedding) and near
// its end (classifier), and updated last. Activations are discarded after
// their last use. Attention keeps no T x T matrix (Compute::AttentionForward).
//
// The math never depends on where a tensor was: a run with tiny budgets gives
// the same losses, bit for bit, as one where everything stays resident.
#ifndef STRATA_TRAIN_GPT_H_
#define STRATA_TRAIN_GPT_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "strata/stats.h"
#include "strata/store.h"
#include "train/activation_meter.h"
#include "train/clipped_adamw.h"
#include "train/compute.h"
#include "train/gpt_config.h"
#include "train/lease_group.h"

namespace strata::train {

class Gpt {
 public:
  // Creates the tensors in `store` and initialises the weights from
  // config.seed. `store` and `compute` must outlive the model. Errors: those
  // of ComputeGptFootprint and CheckGptFits; store errors otherwise.
  static absl::StatusOr<std::unique_ptr<Gpt>> Create(Store* store,
                                                     Compute* compute,
                                                     GptConfig config);
  ~Gpt();  // destroys the tensors
  Gpt(const Gpt&) = delete;
  Gpt& operator=(const Gpt&) = delete;

  // One AdamW step on `sequences` (1..batch) rows of `context` tokens:
  // inputs and targets [sequences x context], int32 in [0, vocab), in host
  // memory. Returns the summed loss over the tokens. A step whose gradient
  // norm exceeds config.grad_clip is rolled back and re-run with clipped
  // gradients (ClippedAdamW). InvalidArgument for a token out of range.
  absl::StatusOr<double> TrainStep(const int32_t* inputs,
                                   const int32_t* targets, int64_t sequences);

  // Forward only: the summed loss over the tokens; nothing is updated.
  absl::StatusOr<double> Evaluate(const int32_t* inputs, const int32_t* targets,
                                  int64_t sequences);

  // The logits [V] of the last position of `inputs` [sequences x context]
  // for sequence `row` (generation; nothing is updated).
  absl::StatusOr<std::vector<float>> LastLogits(const int32_t* inputs,
                                                int64_t sequences, int64_t row);

  // Copies a parameter by name ("wte", "block0.qkv.weight", ...), for tests.
  absl::Status ReadParameter(const std::string& name, std::vector<float>* out);

  // The tensors a checkpoint holds, in creation order: each parameter and
  // its two AdamW moments (gradients, rollback backups and activations are
  // dead between steps).
  std::vector<TensorId> StateTensors() const;
  // Sets the step counters when resuming from a checkpoint whose tensors
  // were restored into this model: the steps done (bias corrections), the
  // optimizer's clipping state, and the rollback time so far (reports).
  void RestoreState(int64_t steps, const ClippedAdamW::Snapshot& optimizer,
                    double rollback_seconds);
  ClippedAdamW::Snapshot optimizer_snapshot() const {
    return optimizer_.snapshot();
  }

  void SetLearningRate(float lr) { lr_ = lr; }
  const GptConfig& config() const { return config_; }
  const ModelFootprint& footprint() const { return footprint_; }
  int64_t steps() const { return steps_; }
  const ClipStats& clip_stats() const { return optimizer_.stats(); }
  double rollback_seconds() const { return rollback_seconds_; }
  // Host seconds spent rerunning blocks' forward passes in backward
  // (config checkpoint kBlock or kOffload) since creation.
  double recompute_seconds() const { return recompute_seconds_; }
  // The most bytes of activation tensors (the residual streams, saved and
  // recomputed activations, temporaries, tokens) holding contents at once
  // since creation: what activation checkpointing lowers.
  uint64_t peak_activation_bytes() const { return activations_.peak_bytes(); }
  // Bytes each store link (Link order) moved during TrainStep calls since
  // creation, re-runs of clipped steps included.
  const std::array<uint64_t, kNumLinks>& train_link_bytes() const {
    return train_link_bytes_;
  }

 private:
  struct Param {
    std::string name;
    ParamSlot slot;
  };
  // A block's parameters (indices into its group's params) and activations.
  struct Block {
    ParamGroup group;
    // Parameter indices within group.params.
    enum : int {
      kLn1W,
      kLn1B,
      kQkvW,
      kQkvB,
      kProjW,
      kProjB,
      kLn2W,
      kLn2B,
      kFcW,
      kFcB,
      kFcProjW,
      kFcProjB,
      kCount
    };
    TensorId x;               // the residual stream entering the block [N x C]
    TensorId ln1, ln1_stats;  // [N x C], mean | rstd [2N]
    TensorId qkv;             // [N x 3C]
    TensorId att, lse;        // [N x C], [B x H x T]
    TensorId mid;             // x + attention projection [N x C]
    TensorId ln2, ln2_stats;
    TensorId fc, gelu;  // [N x 4C] each
    const ParamSlot& p(int i) const { return group.params[i]; }
  };
  // The embeddings and the final LayerNorm.
  struct Globals {
    ParamGroup lnf;         // weight, bias
    ParamGroup embeddings;  // wte, wpe
    TensorId out;           // the last block's output [N x C]
    TensorId lnf_out, lnf_stats;
  };
  // Per-step temporaries, reused by every block.
  struct Scratch {
    TensorId tokens, targets;  // [N] int32
    TensorId logits;           // [classifier_rows x V]
    TensorId dres;             // the residual stream's gradient [N x C]
    TensorId dln;              // gradient of a LayerNorm's output [N x C]
    TensorId datt;             // [N x C]
    TensorId dqkv;             // [N x 3C]
    TensorId dfc;              // [N x 4C]
  };

  Gpt(Store* store, Compute* compute, const GptConfig& config,
      const ModelFootprint& footprint);

  // Tensors (gpt_tensors.cc).
  absl::Status CreateTensors();
  absl::StatusOr<TensorId> CreateTensor(const std::string& name,
                                        TensorKind kind, DType dtype,
                                        std::vector<int64_t> shape);
  absl::StatusOr<ParamSlot> CreateParam(const std::string& name,
                                        std::vector<int64_t> shape, bool decay);
  absl::StatusOr<TensorId> CreateBackup(const std::string& prefix,
                                        const ParamGroup& group);
  absl::StatusOr<Block> CreateBlock(int l);
  absl::Status InitWeights();
  absl::Status InitParam(const ParamSlot& slot, double stddev, double fill,
                         uint64_t stream);

  // The passes (gpt_step.cc), over rows_ token rows.
  LeaseGroup DeviceGroup();
  absl::Status Upload(const int32_t* inputs, const int32_t* targets,
                      int64_t sequences);
  absl::Status Embed();
  absl::Status BlockForward(const Block& b, TensorId out);
  // The block's forward up to the MLP's projection: every activation its
  // backward reads, from b.x (what checkpointing recomputes).
  absl::Status BlockForwardSaved(const Block& b);
  // Under checkpointing, after the block's forward: drops what
  // BlockForwardSaved wrote and, for kOffload, sends b.x to the host tier.
  absl::Status CheckpointBlock(const Block& b);
  absl::Status FinalNorm();
  absl::Status Forward();
  // The classifier over rows [first_row, first_row + rows) in slices: the
  // summed loss; with `gradient`, dlnf (into dln) and the classifier's part
  // of wte's gradient.
  absl::StatusOr<double> Classifier(bool gradient, int64_t first_row,
                                    int64_t rows);
  absl::Status FinalNormBackward();
  absl::Status NormBackward(TensorId x, const ParamSlot& w, const ParamSlot& b,
                            TensorId stats);
  absl::Status BlockBackward(const Block& b);
  absl::Status EmbedBackward();
  absl::Status DiscardActivations();
  // Discards `id`, telling the activation meter.
  absl::Status Drop(TensorId id);
  absl::StatusOr<double> ForwardBackward(const int32_t* inputs,
                                         const int32_t* targets,
                                         int64_t sequences);
  AdamParams StepAdamParams() const;

  Store* const store_;
  Compute* const compute_;
  const GptConfig config_;
  const ModelFootprint footprint_;
  std::vector<Block> blocks_;  // reserved once: groups are held by address
  Globals g_;
  Scratch s_;
  std::vector<Param> params_;      // by name, for ReadParameter
  std::vector<TensorId> created_;  // every tensor, for the destructor
  ClippedAdamW optimizer_;
  int64_t rows_ = 0;  // token rows of the current pass
  int64_t steps_ = 0;
  double rollback_seconds_ = 0;
  double recompute_seconds_ = 0;
  ActivationMeter activations_;
  std::array<uint64_t, kNumLinks> train_link_bytes_{};
  float lr_;
};

}  // namespace strata::train

#endif  // STRATA_TRAIN_GPT_H_
