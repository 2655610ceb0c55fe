// model.h: Mlp, a deep multi-layer perceptron whose every tensor lives in a
// strata Store.
//
// Layers: `inputs` -> width (x depth hidden layers, each Linear + activation)
// -> `classes` (Linear, softmax cross-entropy). Each layer's weight [out x in],
// bias [out], their gradients, and their two Adam moments are store tensors of
// their kind, as are the saved activations (layer inputs and pre-activations),
// the labels and the activation gradients. A training step acquires them layer
// by layer on the device tier — forward, loss, backward — and runs Adam on each
// layer as soon as its backward is done, where the optimizer lives (host tier
// by default, as ZeRO-Offload's CPU Adam; Ren et al., 2021), with
// BeginStep/EndStep around it so the store's scheduler learns the order and
// prefetches ahead. Activations and gradients are discarded after their last
// use, so dead bytes are never written back.
//
// Gradient accumulation runs the micro-batches of a step layer-major (all of
// them through a layer before the next, in forward and in backward, their
// activations kept in the store), so each weight crosses the device link once
// per step in each direction however many micro-batches there are (GreedySnake,
// 2025, makes this case for SSD offload). Activation checkpointing
// (activation_checkpointing.h) keeps only each layer's input and recomputes
// its pre-activation in backward.
//
// Mixed precision (--precision=bf16|fp16) keeps each layer's weight and
// bias as 16-bit store tensors: the copies the device computes with and the
// bytes that cross the host<->device link. Backward sums the micro-batches'
// gradients in fp32 on the device and casts the sum to 16 bits (counting
// non-finite values in the same pass), and the optimizer keeps fp32 master
// weights beside the moments where it runs, writing the 16-bit copy in its
// fused pass: each parameter crosses the link as 2 bytes up and 2 down per
// step, ZeRO-Offload's minimum (Ren et al., 2021). fp16 scales the loss
// (DynamicLossScale, loss_scale.h). A step whose gradients hold a non-finite
// value is skipped, so 16-bit updates wait until the last layer's gradients
// are cast (the updates then trail backward, as DeepSpeed's fp16 optimizer
// does, instead of overlapping it layer by layer as fp32's do).
//
// The math never depends on where a tensor was: a run with tiny budgets gives
// the same losses, bit for bit, as a run where everything stays resident, and
// a checkpointed run the same as one that keeps every activation.
#ifndef STRATA_TRAIN_MODEL_MODEL_H_
#define STRATA_TRAIN_MODEL_MODEL_H_

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "strata/stats.h"
#include "strata/store.h"
#include "train/comm/collectives.h"
#include "train/compute/compute.h"
#include "train/compute/precision.h"
#include "train/model/activation_checkpointing.h"
#include "train/model/activation_meter.h"
#include "train/model/footprint.h"  // ModelFootprint, ComputeFootprint
#include "train/model/lease_group.h"
#include "train/model/loss_scale.h"
#include "train/model/optimizer_parts.h"

namespace strata::train {

struct ModelConfig {
  int64_t inputs = 784;  // features per sample (28 x 28 pixels)
  int64_t width = 1024;  // units per hidden layer
  int depth = 5;         // hidden layers; the model has depth + 1 Linears
  int64_t classes = 10;  // output units
  int64_t batch = 256;   // samples per micro-batch (the largest accepted)
  // Micro-batches of `batch` samples per optimizer step (>= 1); their
  // gradients sum in fp32 before the update.
  int accumulate = 1;
  ActivationCheckpointing checkpoint = ActivationCheckpointing::kNone;
  Activation activation = Activation::kRelu;
  uint64_t seed = 1;  // weight initialisation
  AdamParams adam;    // lr, betas, eps (corrections are set per step)
  // Where Adam runs: kHost (CPU Adam on host-tier leases) or kDevice (the
  // Compute's Adam on device-tier leases).
  Tier optimizer_tier = Tier::kHost;
  // Home tier of every tensor: kNvme when the store has an NVMe tier, kHost
  // without one, kDevice for a fully resident run.
  Tier home = Tier::kNvme;
  // Parameters and gradients: fp32, or 16-bit (bf16, fp16) with fp32 master
  // weights where the optimizer runs.
  Precision precision = Precision::kFp32;
  // How the optimizer rounds master weights into the 16-bit parameters
  // (stochastic: seeded per tensor and step from `seed`). 16-bit only.
  Rounding rounding = Rounding::kNearestEven;
  // fp16's dynamic loss scale (loss_scale.h); unused otherwise.
  LossScaleOptions loss_scale;
};

// The (in, out) of each Linear layer: inputs -> width x depth -> classes.
std::vector<std::pair<int64_t, int64_t>> LayerShapes(const ModelConfig& config);

class Mlp {
 public:
  // Creates the tensors in `store` and initialises the weights (He-uniform
  // from config.seed, zero biases). Both `store` and `compute` must outlive
  // the model; `compute` runs on the device tier's memory. Errors: those of
  // ComputeFootprint and CheckFootprintFits (footprint.h: ResourceExhausted
  // when a budget is below the working set, the message saying which flag to
  // raise, or the tensors do not fit); store errors otherwise.
  //
  // With `collectives` (not owned; outlives the model) the model is one
  // rank of a sharded data-parallel run (ZeRO-3, Rajbhandari et al., 2020;
  // model_sharding.cc): its store holds only shard rank() of every weight,
  // bias, gradient and Adam moment (ShardOffsets), a layer's parameters
  // are all-gathered into two device-home buffers before it computes (the
  // next layer's gather starting while this one computes), and its
  // gradients are summed along the ranks in rank order and handed out in
  // shards, each rank updating its own. A step takes the global batch
  // (TrainStep) and its losses are bit for bit those of one unsharded rank
  // with size() x accumulate micro-batches. fp32 only, on the simulated
  // device (InvalidArgument / FailedPrecondition otherwise); every rank
  // calls every method in the same order.
  static absl::StatusOr<std::unique_ptr<Mlp>> Create(
      Store* store, Compute* compute, const ModelConfig& config,
      Collectives* collectives = nullptr);
  ~Mlp();  // destroys the tensors
  Mlp(const Mlp&) = delete;
  Mlp& operator=(const Mlp&) = delete;

  // One step of Adam on `rows` samples (1 <= rows <= batch x accumulate),
  // cut into micro-batches of `batch` rows (the last may be shorter): images
  // [rows x inputs] and labels [rows] in host memory. The gradient is that of
  // the mean loss over all rows. Returns the summed loss and correct count.
  // Sharded, the rows are the global batch (every rank passes the same):
  // rows must be ranks() x batch x accumulate, rank r trains on slice r of
  // them, and the loss is the global one.
  // On an error some layers may already have been updated (each is updated
  // as soon as its gradients are complete): stop training rather than retry
  // the step.
  absl::StatusOr<LossResult> TrainStep(const float* images,
                                       const int32_t* labels, int64_t rows);

  // Forward only, for evaluation, on 1 <= rows <= batch; nothing is updated.
  absl::StatusOr<LossResult> Evaluate(const float* images,
                                      const int32_t* labels, int64_t rows);

  // Copies layer `layer`'s weights (out x in floats; the fp32 master
  // weights under mixed precision) to `out`, for tests.
  absl::Status ReadWeights(int layer, std::vector<float>* out);

  // The learning rate of the following steps (a schedule sets it per step).
  void SetLearningRate(float lr) { lr_ = lr; }

  // The tensors a checkpoint holds, in layer order: each layer's weight,
  // bias and their Adam moments, and under mixed precision the fp32 master
  // weights (gradients and activations are dead between steps).
  std::vector<TensorId> StateTensors() const;
  // What decides later steps besides the tensors, for a checkpoint: the
  // updates done (Adam's bias corrections count them), the steps skipped
  // for non-finite gradients, and fp16's loss scale.
  struct Snapshot {
    int64_t steps = 0;
    int64_t skipped_steps = 0;
    DynamicLossScale::State loss_scale;  // fp16 only
  };
  Snapshot snapshot() const;
  // Restores a snapshot when resuming from a checkpoint whose tensors were
  // restored into this model. InvalidArgument for a bad loss-scale state.
  absl::Status Restore(const Snapshot& s);

  const ModelFootprint& footprint() const { return footprint_; }
  int layers() const { return static_cast<int>(layers_.size()); }
  // Optimizer updates applied (steps not skipped).
  int64_t steps() const { return steps_; }
  // Steps whose update was skipped: a gradient held infinity or NaN (fp16's
  // loss-scale overflows; bf16's rare non-finite steps).
  int64_t skipped_steps() const { return skipped_steps_; }
  // fp16's loss scale (null otherwise): its scale and history.
  const DynamicLossScale* loss_scale() const {
    return loss_scale_ ? &*loss_scale_ : nullptr;
  }
  // Host seconds spent inside Adam's updates since creation: the CPU update
  // itself with the optimizer on the host tier; with it on the device tier,
  // the host time to issue the updates (the update itself on the simulated
  // device, kernel launches on a GPU). Leases and transfers excluded.
  double optimizer_seconds() const { return optimizer_seconds_; }
  // Whether the host optimizer streams its updates part by part, the
  // gradient and weight staying leased on the device: chosen at Create when
  // the host budget cannot hold a whole weight, its gradient and moments
  // (footprint.h StreamsOptimizer). The bits are the same either way.
  bool streams_optimizer() const { return stream_optimizer_; }
  // The most bytes of activation tensors (inputs, labels, saved and
  // recomputed activations, their gradients) that held contents at once
  // since creation: what activation checkpointing lowers.
  uint64_t peak_activation_bytes() const { return activations_.peak_bytes(); }
  // Host seconds spent recomputing activations in backward since creation
  // (kBlock, kOffload; the CPU's compute time, a GPU's launch time).
  double recompute_seconds() const { return recompute_seconds_; }
  // Bytes each store link (Link order: h2d, d2h, nvme_read, nvme_write)
  // moved during TrainStep calls since creation: training traffic without
  // evaluation's.
  const std::array<uint64_t, kNumLinks>& train_link_bytes() const {
    return train_link_bytes_;
  }
  // Weights and biases in the model.
  int64_t parameters() const;
  // Ranks of a sharded run (1 when not sharded) and this one's.
  int ranks() const { return collectives_ ? collectives_->size() : 1; }
  int rank() const { return collectives_ ? collectives_->rank() : 0; }
  bool sharded() const { return collectives_ != nullptr; }
  // Bytes this rank sent to the others in its training steps (0
  // unsharded; evaluation's all-gathers are not counted, as
  // train_link_bytes does not count evaluation's copies).
  uint64_t train_bytes_sent() const { return train_bytes_sent_; }

 private:
  // One parameter's optimizer state, in parts (optimizer_parts.h).
  struct OptimizerState {
    std::vector<OptimizerPart> parts;
    std::vector<TensorId> m, v;    // Adam's first and second moments
    std::vector<TensorId> master;  // mixed precision: fp32 master weights
    // The whole tensor's index of the first element (a rank's shard's
    // offset): what stochastic rounding seeds by, so shards round as the
    // whole would.
    int64_t first_index = 0;
  };
  // One Linear layer's tensors.
  struct Layer {
    int64_t in = 0, out = 0;
    TensorId w, b;  // parameters: [out x in], [out]; 16-bit when mixed
    // Their gradients in fp32: what backward sums micro-batches into (when
    // mixed, on the device only, discarded once cast).
    TensorId gw, gb;
    // Mixed precision only: the 16-bit gradients the optimizer reads.
    TensorId gw16, gb16;
    // The weight's and the bias's Adam moments, and under mixed precision
    // their fp32 master weights.
    OptimizerState sw, sb;
    // Pre-activation [batch x out] (the logits if last), one per micro-batch;
    // a hidden layer under checkpointing has one, the recompute buffer.
    std::vector<TensorId> z;
    std::vector<TensorId> a;  // activation [batch x out] per micro-batch
    bool hidden = true;
  };
  // The tensors of one micro-batch that are not a layer's.
  struct MicroBatch {
    TensorId input, labels, dlogits;
    TensorId dact[2];  // activation gradients, ping-pong between layers
    int64_t first = 0, rows = 0;  // its rows of the step's batch
  };
  Mlp(Store* store, Compute* compute, const ModelConfig& config,
      const ModelFootprint& footprint, Collectives* collectives);
  // Creates every tensor, in the order their ids are handed out.
  absl::Status CreateTensors();
  // One layer's parameters, gradients, moments and activations, named
  // "layer<l>.*".
  absl::StatusOr<Layer> CreateLayer(size_t l, int64_t in, int64_t out,
                                    bool hidden);
  absl::StatusOr<MicroBatch> CreateMicroBatch(int k);
  bool mixed() const { return config_.precision != Precision::kFp32; }
  // The Linear of layer L on x and the weights `w`, `b`: fp32, or 16-bit
  // weights with fp32 accumulation when mixed.
  absl::Status LinearForwardOn(const Layer& L, const float* x, const float* w,
                               const float* b, float* y, int64_t rows);
  // Layer l's weight and bias for compute: added to `g` (returning their
  // indices), or, sharded, in a gather slot (-1, -1; see Weight()).
  std::pair<int, int> AddWeights(int l, LeaseGroup& g);
  // The weight (bias) of layer l after g.Acquire(), `index` from
  // AddWeights.
  const float* Weight(int l, const LeaseGroup& g, int index, bool bias) const;
  // Whether hidden layers keep their pre-activation for backward.
  bool KeepsPreActivation() const {
    return config_.checkpoint == ActivationCheckpointing::kNone;
  }
  // The pre-activation tensor of micro-batch k.
  TensorId Z(const Layer& L, int k) const {
    return L.z[L.z.size() == 1 ? 0 : k];
  }
  // Micro-batch k's input to layer l.
  TensorId LayerInput(int l, int k) const {
    return l == 0 ? micro_[k].input : layers_[l - 1].a[k];
  }
  // One store tensor of `home` (default config_.home), remembered in
  // created_.
  absl::StatusOr<TensorId> CreateTensor(
      std::string name, TensorKind kind, DType dtype,
      std::vector<int64_t> shape, std::optional<Tier> home = std::nullopt);
  absl::Status InitWeights();
  // Cuts `rows` into micro_[0..used_) and uploads each one's samples.
  absl::Status UploadBatch(const float* images, const int32_t* labels,
                           int64_t rows, int max_micro_batches);
  // Layer-major: every micro-batch through layer l, then layer l + 1.
  // Without `for_backward` (evaluation) a layer's activations are dropped
  // once nothing reads them (its pre-activation at once, its activation
  // after the next layer): kept, they fill the device and leave it as
  // write-backs that nothing reads.
  absl::Status Forward(bool for_backward = true);
  absl::Status ForwardLayer(int l, int k);
  // Sums the micro-batches' losses; `total_rows` scales their gradients.
  absl::StatusOr<LossResult> Loss(bool with_gradient, int64_t total_rows);
  // Backward pass, each layer updated by Adam as soon as the gradients of
  // every micro-batch are summed.
  absl::Status Backward(const AdamParams& adam);
  // Mixed precision: casts layer l's summed fp32 gradients on the leases of
  // `g` (gw, gb, gw16, gb16 its indices) to 16 bits.
  absl::Status CastGradients(const Layer& L, const LeaseGroup& g, int gw,
                             int gb, int gw16, int gb16);
  // Mixed precision, after backward: the step's non-finite count decides
  // (with fp16's loss scale) whether every layer is updated or the step is
  // skipped, its 16-bit gradients discarded.
  absl::Status FinishMixedStep(const AdamParams& adam);
  // dy = dy * act'(z) for hidden layer l's micro-batch k, recomputing z
  // first under checkpointing.
  absl::Status ActivationBackward(int l, int k, TensorId dy);
  absl::Status LinearBackward(int l, int k, TensorId dy, bool accumulate);
  // Bookkeeping for peak_activation_bytes: `id` now holds contents / not.
  void Produced(TensorId id, uint64_t bytes) {
    activations_.Produced(id, bytes);
  }
  absl::Status Drop(TensorId id);
  // Adam's parameters for this step: the learning rate, bias corrections.
  AdamParams StepAdamParams() const;
  // One parameter's update where the optimizer runs (mlp_optimizer.cc):
  // fp32 Adam of the weight `w` from the gradient `g`, or, mixed, the fused
  // pass (compute.h AdamMixed) of the master weights in `s` from the 16-bit
  // `g`, writing the 16-bit parameter `w` (`tensor` seeds its stochastic
  // rounding). Part by part through `s`; discards the gradient.
  absl::Status AdamOn(const AdamParams& p, const OptimizerState& s, TensorId g,
                      TensorId w, uint64_t tensor);
  // AdamOn with `g` and `w` leased whole on the optimizer's tier.
  absl::Status AdamLeased(const AdamParams& p, const OptimizerState& s,
                          TensorId g, TensorId w, uint64_t tensor);
  // AdamOn on the host with `g` and `w` leased on the device and streamed
  // through the staging tensors one part at a time (streams_optimizer()).
  absl::Status AdamStreamed(const AdamParams& p, const OptimizerState& s,
                            TensorId g, TensorId w, uint64_t tensor);
  // The update of one part: `w` the fp32 weight (fp32) or master weight
  // (mixed), `g` the gradient (fp32, or 16-bit), `w16` the 16-bit
  // parameter written (mixed); `first` its first element in the tensor.
  absl::Status UpdatePart(const AdamParams& p, float* w, float* m, float* v,
                          const void* g, uint16_t* w16, int64_t first,
                          int64_t n, uint64_t tensor, bool on_device);
  // The parts of a parameter of `shape`, created as "<base>.adam_m",
  // ".adam_v" and (mixed) ".master" store tensors (a single part keeps the
  // shape; several are flat).
  absl::StatusOr<OptimizerState> CreateOptimizerState(
      const std::string& base, const std::vector<int64_t>& shape);
  absl::Status DiscardActivations();

  // ---- Sharded data parallelism (model_sharding.cc).
  // The gather slots and the per-layer update records: from CreateTensors.
  absl::Status CreateSlots();
  // Shard rank() of n elements: {first, count}.
  std::pair<int64_t, int64_t> Shard(int64_t n) const;
  // Leases every slot on the device for a pass; EndPass waits for what is
  // in flight and releases them; AbandonPass (after an error) releases
  // without waiting.
  absl::Status BeginPass();
  absl::Status EndPass();
  void AbandonPass();
  // After a sharded pass's error `why`: abandons the pass and refuses every
  // later one (the ranks' shards may be out of step: the run must end).
  void FailPass(const absl::Status& why);
  // Starts the all-gather of layer l's weight and bias into slot l % 2
  // (nothing when it holds them already or is gathering them).
  absl::Status StartGather(int l);
  // Waits until slot l % 2 holds layer l's parameters (gathering if need be).
  absl::Status EnsureGathered(int l);
  // The gradient chain of layer l, before its first LinearBackward: ranks
  // after 0 receive the sum of the ranks before them into the gradient
  // slot, which backward then accumulates into.
  absl::Status ReceivePartialGradients(int l);
  // After layer l's last LinearBackward: pass the sum on to the next rank,
  // or, on the last rank, hand each rank its shard; every rank then
  // awaits its shard of the gradients (UpdateShard).
  absl::Status PassGradients(int l);
  // Waits for layer l's gradient shards and runs Adam on this rank's shard
  // (mixed: only waits; FinishMixedStep updates).
  absl::Status UpdateShard(int l, const AdamParams& adam);
  // Mixed precision, sharded: casts this rank's fp32 gradient shards to 16
  // bits (as the unsharded model casts the whole sums: the same bits) and
  // returns every rank's non-finite results, summed.
  absl::StatusOr<int64_t> CastGradientShards();
  // The step's summed loss over every rank's micro-batches, in global
  // order (rank-major): the one-rank run's sum.
  absl::StatusOr<LossResult> GatherLoss(const std::vector<LossResult>& mine);
  // The fp32 weights (mixed: master weights) of layer `layer`, all-gathered
  // (ReadWeights, sharded).
  absl::Status GatherWeights(int layer, std::vector<float>* out);
  // Whether micro-batch k's LinearBackward adds to the gradients: after
  // the first micro-batch, and on every rank after 0 (onto the chain's sum).
  bool Accumulates(int k) const { return k > 0 || (sharded() && rank() > 0); }

  Collectives* const collectives_ = nullptr;
  // The device-home buffers a layer's gathered parameters and its full
  // gradients live in, two of each (layer l uses slot l % 2), sized for the
  // largest layer: the gathered working set.
  struct Slot {
    TensorId w, b, gw, gb;
    int layer = -1;  // whose parameters w and b hold (-1: none)
    // An all-gather in flight into w and b, and the shard leases it reads.
    std::vector<Collectives::Request> gathering;
    std::unique_ptr<LeaseGroup> gather_sources;
    // Sends from gw and gb in flight: wait before writing them again.
    std::vector<Collectives::Request> sending;
  };
  std::array<Slot, 2> slots_;
  std::unique_ptr<LeaseGroup> slot_leases_;  // every slot, during a pass
  // Slot s's buffer `which` in slot_leases_ (added s-major in this order).
  enum SlotBuffer { kSlotW, kSlotB, kSlotGw, kSlotGb, kSlotBuffers };
  float* SlotData(int s, SlotBuffer which) const {
    return slot_leases_->data(s * kSlotBuffers + which);
  }
  // Per layer: its gradient shards' receives and the host leases they land
  // in.
  struct ShardUpdate {
    std::vector<Collectives::Request> receiving;
    std::unique_ptr<LeaseGroup> targets;
  };
  std::vector<ShardUpdate> updates_;
  absl::Status failed_;  // FailPass's verdict: OK until a sharded pass fails

  Store* const store_;
  Compute* const compute_;
  const ModelConfig config_;
  const ModelFootprint footprint_;
  std::vector<Layer> layers_;
  std::vector<MicroBatch> micro_;  // config_.accumulate of them
  int used_ = 0;                   // micro-batches in the current step
  std::vector<TensorId> created_;  // every tensor, for the destructor
  int64_t steps_ = 0;
  int64_t skipped_steps_ = 0;
  std::optional<DynamicLossScale> loss_scale_;  // fp16 only
  double optimizer_seconds_ = 0;
  // The host optimizer streams (footprint.h StreamsOptimizer): one part of
  // the device gradient and weight at a time crosses to the host through
  // these (one largest part each; created only when streaming).
  bool stream_optimizer_ = false;
  TensorId stage_g_, stage_w_;
  double recompute_seconds_ = 0;
  std::array<uint64_t, kNumLinks> train_link_bytes_{};
  uint64_t train_bytes_sent_ = 0;
  ActivationMeter activations_;
  float lr_;
};

}  // namespace strata::train

#endif  // STRATA_TRAIN_MODEL_MODEL_H_
