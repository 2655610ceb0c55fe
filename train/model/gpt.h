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
// Mixed precision (config.precision bf16/fp16): the linear layers' weights
// and biases and both embeddings are 16-bit store tensors and so are their
// gradients; matmuls take 16-bit operands and sum in fp32
// (Compute::LinearForward16), the classifier too (through the 16-bit wte);
// LayerNorm, attention, softmax and the losses stay fp32. Backward sums each
// gradient in fp32 on the device and ClippedAdamW casts it to 16 bits as its
// group completes (clipped_adamw.h); the host keeps fp32 master weights and
// moments and writes the 16-bit copies. fp16 multiplies the loss gradient by
// a DynamicLossScale; a step with a non-finite gradient is skipped (the
// scale halved for fp16) and Adam's t does not advance.
//
// The math never depends on where a tensor was: a run with tiny budgets gives
// the same losses, bit for bit, as one where everything stays resident.
//
// Sharded (Create with Collectives; gpt_sharding.cc, ZeRO-3): the store holds
// rank r's shard of every parameter, gradient, moment and backup; a block's
// whole parameters exist only in one of two device gather slots, the
// embeddings and final norm in slots of their own, all-gathered before use.
// Gradients are summed along a chain in rank order, so an N-rank run's
// losses and weights are bit for bit one rank's with N x accumulate
// micro-batches.
#ifndef STRATA_TRAIN_MODEL_GPT_H_
#define STRATA_TRAIN_MODEL_GPT_H_

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "strata/stats.h"
#include "strata/store.h"
#include "train/comm/collectives.h"
#include "train/compute/compute.h"
#include "train/model/activation_meter.h"
#include "train/model/clipped_adamw.h"
#include "train/model/gpt_config.h"
#include "train/model/lease_group.h"
#include "train/model/loss_scale.h"

namespace strata::train {

class Gpt {
 public:
  // Creates the tensors in `store` and initialises the weights from
  // config.seed. `store` and `compute` must outlive the model. Errors: those
  // of ComputeGptFootprint and CheckGptFits; store errors otherwise.
  // With `collectives` (not owned; outlives the model) the model is one rank
  // of a sharded run (see above): config.accumulate is this rank's
  // micro-batches, TrainStep takes the global batch. Also
  // FailedPrecondition on a CUDA compute or in unified memory, and
  // InvalidArgument for a tensor with fewer elements than ranks.
  static absl::StatusOr<std::unique_ptr<Gpt>> Create(
      Store* store, Compute* compute, GptConfig config,
      Collectives* collectives = nullptr);
  ~Gpt();  // destroys the tensors
  Gpt(const Gpt&) = delete;
  Gpt& operator=(const Gpt&) = delete;

  // One AdamW step on `sequences` (1..batch x accumulate) rows of `context`
  // tokens: inputs and targets [sequences x context], int32 in [0, vocab),
  // in host memory, split into micro-batches of up to `batch` sequences.
  // Sharded: the global batch, the same on every rank (at least one
  // micro-batch per rank, at most ranks x batch x accumulate sequences),
  // whose micro-batches the ranks split in order, rank 0 first.
  // Returns the summed loss over the tokens. A step whose gradient
  // norm exceeds config.grad_clip is rolled back and re-run with clipped
  // gradients (ClippedAdamW). InvalidArgument for a token out of range.
  absl::StatusOr<double> TrainStep(const int32_t* inputs,
                                   const int32_t* targets, int64_t sequences);

  // Forward only, on 1..batch sequences: the summed loss over the tokens;
  // nothing is updated. Sharded, every rank evaluates the same sequences.
  absl::StatusOr<double> Evaluate(const int32_t* inputs, const int32_t* targets,
                                  int64_t sequences);

  // The logits [V] of the last position of `inputs` [sequences x context]
  // for sequence `row` (generation; nothing is updated).
  absl::StatusOr<std::vector<float>> LastLogits(const int32_t* inputs,
                                                int64_t sequences, int64_t row);

  // Copies a parameter by name ("wte", "block0.qkv.weight", ...), for tests
  // (sharded: the whole tensor, gathered; every rank must call).
  absl::Status ReadParameter(const std::string& name, std::vector<float>* out);

  // The tensors a checkpoint holds, in creation order: each parameter and
  // its two AdamW moments (gradients, rollback backups and activations are
  // dead between steps).
  std::vector<TensorId> StateTensors() const;
  // What decides the next steps besides the tensors and the optimizer's
  // snapshot, for a checkpoint.
  struct Snapshot {
    int64_t steps = 0;          // Adam steps done (bias corrections)
    int64_t skipped_steps = 0;  // mixed precision's, non-finite gradients
    double rollback_seconds = 0;
    DynamicLossScale::State loss_scale;  // fp16 only
  };
  // Sets the step counters when resuming from a checkpoint whose tensors
  // were restored into this model. InvalidArgument (nothing changed) for a
  // loss-scale state DynamicLossScale::Restore refuses.
  absl::Status RestoreState(const Snapshot& snapshot,
                            const ClippedAdamW::Snapshot& optimizer);
  ClippedAdamW::Snapshot optimizer_snapshot() const {
    return optimizer_.snapshot();
  }

  // Each parameter's name and whole shape, in creation order (a sharded
  // rank's tensors are flat shards of them: a checkpoint records these so
  // that an export can put the shards back together).
  std::vector<std::pair<std::string, std::vector<int64_t>>> ParameterShapes()
      const;

  void SetLearningRate(float lr) { lr_ = lr; }
  const GptConfig& config() const { return config_; }
  const ModelFootprint& footprint() const { return footprint_; }
  // Sequences of one TrainStep: batch x accumulate, times the ranks of a
  // sharded run (the global batch).
  int64_t step_sequences() const { return config_.step_sequences() * ranks(); }
  // Bytes this rank's collectives sent during TrainStep calls (sharded).
  uint64_t train_bytes_sent() const { return train_bytes_sent_; }
  // Ranks of a sharded run (1 when not sharded) and this one's.
  int ranks() const { return collectives_ ? collectives_->size() : 1; }
  int rank() const { return collectives_ ? collectives_->rank() : 0; }
  bool sharded() const { return collectives_ != nullptr; }
  int64_t steps() const { return steps_; }
  // Mixed precision: steps skipped for a non-finite gradient, and fp16's
  // loss scale (null otherwise).
  int64_t skipped_steps() const { return skipped_steps_; }
  const DynamicLossScale* loss_scale() const {
    return loss_scale_ ? &*loss_scale_ : nullptr;
  }
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
    int64_t elements = 0;  // of the whole tensor (the slot may hold a shard)
    std::vector<int64_t> shape;  // of the whole tensor
  };
  // One micro-batch's activations of a block.
  struct Acts {
    TensorId x;               // the residual stream entering the block [N x C]
    TensorId ln1, ln1_stats;  // [N x C], mean | rstd [2N]
    TensorId qkv;             // [N x 3C]
    TensorId att, lse;        // [N x C], [B x H x T]
    TensorId mid;             // x + attention projection [N x C]
    TensorId ln2, ln2_stats;
    TensorId fc, gelu;  // [N x 4C] each
    // What forward operations 0-2 write (all but x): what checkpointing
    // drops and recomputes.
    std::array<TensorId, 10> saved() const {
      return {ln1, ln1_stats, qkv, att, lse, mid, ln2, ln2_stats, fc, gelu};
    }
  };
  // A block's parameters (indices into its group's params) and, per
  // micro-batch, activations.
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
    std::vector<Acts> micro;  // [accumulate]
    // What the passes read and sum into: `group` itself, or under sharding
    // the gather slot the block computes in.
    const ParamGroup* compute = nullptr;
    const ParamSlot& p(int i) const { return compute->params[i]; }
  };
  // One micro-batch's tensors outside the blocks: its tokens, the last
  // block's output and the final norm's, and the residual stream's gradient
  // (which lives through the layer-major backward).
  struct MicroIo {
    TensorId tokens, targets;  // [N] int32
    TensorId out;              // the last block's output [N x C]
    TensorId lnf_out, lnf_stats;
    TensorId dres;  // [N x C]
    // Gradients passed between backward's operations: of a LayerNorm's
    // output [N x C], of the QKV projection's [N x 3C].
    TensorId dln, dqkv;
  };
  // The embeddings and the final LayerNorm.
  struct Globals {
    ParamGroup lnf;         // weight, bias
    ParamGroup embeddings;  // wte, wpe
  };
  // Temporaries, reused by every block and micro-batch.
  struct Scratch {
    TensorId logits;  // [classifier_rows x V]
    TensorId datt;    // [N x C], within one operation
    TensorId dfc;     // [N x 4C], likewise
  };

  Gpt(Store* store, Compute* compute, const GptConfig& config,
      const ModelFootprint& footprint, Collectives* collectives);

  // Tensors (gpt_tensors.cc).
  absl::Status CreateTensors();
  // Homed on config.home unless `home` is given.
  absl::StatusOr<TensorId> CreateTensor(const std::string& name,
                                        TensorKind kind, DType dtype,
                                        std::vector<int64_t> shape,
                                        std::optional<Tier> home = {});
  // `half`: 16-bit under mixed precision (all but the LayerNorms).
  // Sharded, the slot holds shard rank() (a 1-D tensor; first_index set).
  absl::StatusOr<ParamSlot> CreateParam(const std::string& name,
                                        std::vector<int64_t> shape, bool decay,
                                        bool half = true);
  absl::StatusOr<TensorId> CreateBackup(const std::string& prefix,
                                        const ParamGroup& group);
  absl::StatusOr<Block> CreateBlock(int l);
  absl::StatusOr<Acts> CreateActs(const std::string& prefix,
                                  const std::string& suffix);
  absl::StatusOr<MicroIo> CreateMicroIo(const std::string& suffix);
  // ".mb<k>" for micro-batch k when a step has several, else "".
  std::string MicroSuffix(int k) const;
  absl::Status InitWeights();
  absl::Status InitParam(const Param& p, double stddev, double fill,
                         uint64_t stream);

  // The passes (gpt_forward.cc, gpt_backward.cc), each over one
  // micro-batch's rows_ token rows.
  bool mixed() const { return config_.precision != Precision::kFp32; }
  LeaseGroup DeviceGroup();
  // Adds what the passes read of `s` to `g`: its 16-bit copy when mixed.
  static int AddWeight(LeaseGroup& g, const ParamSlot& s);
  // LinearForward or LinearForward16 on g's members (w, b from AddWeight).
  absl::Status Linear(const LeaseGroup& g, int x, int w, int b, int y,
                      int64_t in, int64_t out);
  // LinearBackward(16): dw, db overwritten, or with `accumulate` added to.
  absl::Status LinearGrad(const LeaseGroup& g, int x, int w, int dy, int dw,
                          int db, int dx, int64_t in, int64_t out,
                          bool accumulate);
  // Sets the micro-batches of a pass over `sequences` sequences (`split`:
  // this rank's of them). Returns the first sequence of this rank's.
  int64_t SplitMicroBatches(int64_t sequences, bool split);
  // rows_ = micro-batch k's token rows: the operations below act on it.
  void SetMicro(int k) { rows_ = micro_rows_[k]; }
  // InvalidArgument for a batch a pass cannot take: a size out of range
  // (`split`: a sharded step's global batch, at least a micro-batch per
  // rank), a token outside the vocabulary.
  absl::Status CheckBatch(const int32_t* inputs, const int32_t* targets,
                          int64_t sequences, bool split) const;
  // `split`: a sharded training step's global batch, of which this rank
  // takes its micro-batches (RankMicroBatches).
  absl::Status Upload(const int32_t* inputs, const int32_t* targets,
                      int64_t sequences, bool split = false);
  absl::Status Embed(int k);
  // A block's forward in operations (each one LeaseGroup): 0 LayerNorm 1 and
  // the QKV projection, 1 attention, its projection and the residual add,
  // 2 LayerNorm 2 and the MLP's first layer — every activation backward
  // reads (what checkpointing recomputes) — then ProjectMlp, the MLP's
  // projection and second residual add into `out`.
  static constexpr int kSavedOps = 3;
  absl::Status ForwardOp(const Block& b, int op, int k);
  absl::Status ProjectMlp(const Block& b, int k, TensorId out);
  // Under checkpointing, after the block's forward: drops what
  // forward operations 0-2 wrote and, for kOffload, sends the input to the host
  // tier.
  absl::Status CheckpointBlock(const Acts& a);
  absl::Status FinalNorm(int k);
  // Layer-major over the micro-batches. Without `for_backward` (evaluation,
  // generation) each block's activations are dropped once the next block's
  // input is made: nothing reads them again, and kept they fill the device
  // and go to NVMe as write-backs.
  absl::Status Forward(bool for_backward = true);
  // Drops block `b`'s activations of micro-batch k: its input and what its
  // forward operations wrote.
  absl::Status DropBlock(const Acts& a);
  // The classifier over micro-batch k's rows [first_row, first_row + rows)
  // in slices: the summed loss; with `gradient`, dlnf (into dln) and the
  // classifier's part of wte's gradient (added to the earlier micro-batches'
  // for k > 0).
  absl::StatusOr<double> Classifier(bool gradient, int k, int64_t first_row,
                                    int64_t rows);
  absl::Status FinalNormBackward(int k);
  // Micro-batch k's LayerNorm backward (its dln into its dres): the first
  // micro-batch overwrites the norm's gradients, the others add to them.
  absl::Status NormBackward(TensorId x, const ParamSlot& w, const ParamSlot& b,
                            TensorId stats, int k);
  // Every micro-batch through the block's backward, then its parameters to
  // the optimizer.
  absl::Status BlockBackward(const Block& b);
  // Whether micro-batch k's gradients add to what the buffers hold: every
  // micro-batch but the first, and under sharding rank r > 0's first too
  // (rank r - 1's sums are there).
  bool Adds(int k) const { return k > 0 || (sharded() && rank() > 0); }
  // A block's backward in operations: 0 the MLP, 1 LayerNorm 2, 2 the
  // attention and its projection, 3 the QKV projection, 4 LayerNorm 1.
  static constexpr int kBackwardOps = 5;
  absl::Status BackwardOp(const Block& b, int op, int k);
  absl::Status EmbedBackward(int k);
  absl::Status DiscardActivations();
  // Discards `id`, telling the activation meter.
  absl::Status Drop(TensorId id);
  absl::StatusOr<double> ForwardBackward(const int32_t* inputs,
                                         const int32_t* targets,
                                         int64_t sequences);
  // The backward pass after the loss: the blocks, then the embeddings.
  absl::Status BackwardBlocks();
  absl::Status BackwardEmbeddings();
  // The optimizer's EndStep with the embeddings (sharded: their shards).
  absl::StatusOr<std::optional<float>> EndOptimizerStep();
  // One forward and backward pass and the optimizer's end of the step (its
  // re-run coefficient, as EndStep), the store's step around them; the loss
  // into `loss` (may be null).
  absl::StatusOr<std::optional<float>> StepPass(
      const int32_t* inputs, const int32_t* targets, int64_t sequences,
      const AdamParams& adam, std::optional<float> coefficient,
      const std::optional<MixedStep>& mixed, double* loss);
  // After a pass, sharded: waits for what is in flight, or after an error
  // (`status`, returned) drops it and refuses every later pass (the ranks'
  // shards may be out of step: the run must end). Unsharded: `status`.
  absl::Status FinishPass(absl::Status status);
  AdamParams StepAdamParams() const;
  std::optional<MixedStep> StepMixed() const;
  // After a mixed step's EndStep: whether its update stood (the loss scale
  // updated, a skip counted).
  bool MixedStepApplied();

  // ---- Sharded data parallelism (gpt_sharding.cc).
  // Tags: a group's id (lnf 0, block l 1 + l, embeddings layers + 1), a
  // parameter of it and what the message carries.
  enum MessageKind { kPartialSum, kShard, kClassifierSum, kClassifierTotal };
  int GroupId(int l) const { return 1 + l; }
  int EmbeddingsId() const { return config_.layers + 1; }
  static constexpr int kLnfId = 0;
  // Shard rank() of n elements: {first, count}.
  std::pair<int64_t, int64_t> Shard(int64_t n) const;
  // The gather slots: two of a block's shape, and the embeddings' and final
  // norm's (cg_); points each block at its slot.
  absl::Status CreateSlots();
  // A group for leases on the shards the collectives read and write.
  std::unique_ptr<LeaseGroup> ShardLeases();
  // Starts the all-gather of block l's parameters into slot l % 2 (l = -1:
  // the embeddings and final norm); no-op when the slot holds them.
  absl::Status StartGather(int l);
  // Waits until block l's (or -1's) parameters are gathered.
  absl::Status EnsureGathered(int l);
  // Rank r > 0: receives rank r - 1's sums of `params` of `compute` into
  // its gradients (a no-op on rank 0).
  absl::Status ReceivePartialSums(const ParamGroup& compute, int id,
                                  std::vector<int> params, MessageKind kind,
                                  int from);
  // Waits for the sends out of `compute`'s gradients; they may be written.
  absl::Status WaitSends(const ParamGroup& compute);
  // `compute`'s gradients hold this rank's sums: passes them to the next
  // rank, or on the last rank (which holds the totals) sums their squares
  // and sends each rank its shard; `state` receives this rank's shard
  // (pending_ until CompletePending).
  absl::Status PassGradients(const ParamGroup& compute, const ParamGroup& state,
                             int id);
  // The classifier's part of wte's gradient, passed on (the last rank's
  // total goes to rank 0, whose embedding backward adds to it).
  absl::Status PassClassifierSum();
  // Rank 0 of several: once the classifier's sum has left, starts
  // receiving the last rank's total of it into wte's gradient, where the
  // embedding backward adds (AwaitClassifierTotal waits).
  absl::Status StartClassifierTotal();
  absl::Status AwaitClassifierTotal();
  // Waits for the oldest pending group's shard and hands it to the
  // optimizer (its GroupComplete; AwaitPending only waits).
  absl::Status CompletePending();
  struct Pending;
  absl::StatusOr<Pending> AwaitPending();
  // Sharded: the step's summed loss from every rank's micro-batch parts, in
  // the global micro-batch order (one rank's sum).
  absl::StatusOr<double> SumLosses(const std::vector<double>& mine);
  // The norm's agreement (ClippedAdamW::SetAgreement): the last rank's sum
  // of squares, every rank's non-finite counts summed.
  absl::Status AgreeOnNorm(double& sum_squares, int64_t& nonfinite);
  // Waits for everything in flight and releases it; AbandonPass drops it.
  absl::Status EndPass();
  void AbandonPass();
  // ReadParameter's all-gather of p's fp32 shards.
  absl::Status GatherParameter(const Param& p, std::vector<float>* out);
  // Rank r's micro-batches [first, first + count) of `micro` in all.
  std::pair<int, int> RankMicroBatches(int micro) const;

  Store* const store_;
  Compute* const compute_;
  const GptConfig config_;
  const ModelFootprint footprint_;
  Collectives* const collectives_;  // sharded runs only
  std::vector<Block> blocks_;       // reserved once: groups are held by address
  Globals g_;
  // What the passes use of the globals: g_, or under sharding their gather
  // slots.
  Globals cg_;
  std::vector<MicroIo> io_;  // [accumulate]
  Scratch s_;
  std::vector<Param> params_;      // by name, for ReadParameter
  std::vector<TensorId> created_;  // every tensor, for the destructor
  ClippedAdamW optimizer_;
  std::vector<int64_t> micro_rows_;  // token rows of each micro-batch
  int64_t rows_ = 0;                 // of the current micro-batch
  int64_t pass_rows_ = 0;            // of all of them
  int64_t steps_ = 0;
  int64_t skipped_steps_ = 0;
  std::optional<DynamicLossScale> loss_scale_;  // fp16 only
  double rollback_seconds_ = 0;
  double recompute_seconds_ = 0;
  ActivationMeter activations_;
  std::array<uint64_t, kNumLinks> train_link_bytes_{};
  float lr_;

  // Sharded state (gpt_sharding.cc).
  std::array<ParamGroup, 2> slots_;  // block l computes in slots_[l % 2]
  // Operations in flight and the leases their buffers are under.
  struct InFlight {
    std::vector<Collectives::Request> requests;
    std::unique_ptr<LeaseGroup> lease, source;
  };
  static constexpr int kNoLayer = -100;  // a slot holding nothing
  // What each slot holds: slots 0 and 1 a block, slot 2 the globals (-1).
  std::array<int, 3> slot_layer_{kNoLayer, kNoLayer, kNoLayer};
  std::array<InFlight, 3> gathers_;
  std::vector<std::pair<const ParamGroup*, InFlight>> sends_;
  struct Pending {
    const ParamGroup* state;
    InFlight receive;
    WholeGradient whole;
  };
  std::vector<Pending> pending_;  // oldest first
  InFlight classifier_total_;     // rank 0's receive of wte's total
  int global_micro_ = 0;
  uint64_t train_bytes_sent_ = 0;  // micro-batches of the step, every rank's
  absl::Status failed_;  // after a sharded step failed: every later one
};

}  // namespace strata::train

#endif  // STRATA_TRAIN_MODEL_GPT_H_
