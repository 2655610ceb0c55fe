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
// The math never depends on where a tensor was: a run with tiny budgets gives
// the same losses, bit for bit, as a run where everything stays resident.
#ifndef STRATA_TRAIN_MODEL_H_
#define STRATA_TRAIN_MODEL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "strata/store.h"
#include "train/compute.h"
#include "train/footprint.h"  // ModelFootprint, ComputeFootprint

namespace strata::train {

struct ModelConfig {
  int64_t inputs = 784;  // features per sample (28 x 28 pixels)
  int64_t width = 1024;  // units per hidden layer
  int depth = 5;         // hidden layers; the model has depth + 1 Linears
  int64_t classes = 10;  // output units
  int64_t batch = 256;   // samples per step (the largest batch accepted)
  Activation activation = Activation::kRelu;
  uint64_t seed = 1;  // weight initialisation
  AdamParams adam;    // lr, betas, eps (corrections are set per step)
  // Where Adam runs: kHost (CPU Adam on host-tier leases) or kDevice (the
  // Compute's Adam on device-tier leases).
  Tier optimizer_tier = Tier::kHost;
  // Home tier of every tensor: kNvme when the store has an NVMe tier, kHost
  // without one, kDevice for a fully resident run.
  Tier home = Tier::kNvme;
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
  static absl::StatusOr<std::unique_ptr<Mlp>> Create(Store* store,
                                                     Compute* compute,
                                                     const ModelConfig& config);
  ~Mlp();  // destroys the tensors
  Mlp(const Mlp&) = delete;
  Mlp& operator=(const Mlp&) = delete;

  // One step of Adam on `rows` samples (1 <= rows <= batch): images
  // [rows x inputs] and labels [rows] in host memory. Returns the batch's
  // summed loss and correct count. On an error some layers may already have
  // been updated (each is updated as soon as its gradients are complete):
  // stop training rather than retry the step.
  absl::StatusOr<LossResult> TrainStep(const float* images,
                                       const int32_t* labels, int64_t rows);

  // Forward only, for evaluation; nothing is updated.
  absl::StatusOr<LossResult> Evaluate(const float* images,
                                      const int32_t* labels, int64_t rows);

  // Copies layer `layer`'s weights (out x in floats) to `out`, for tests.
  absl::Status ReadWeights(int layer, std::vector<float>* out);

  // The learning rate of the following steps (a schedule sets it per step).
  void SetLearningRate(float lr) { lr_ = lr; }

  // The tensors a checkpoint holds, in layer order: each layer's weight,
  // bias and their Adam moments (gradients and activations are dead between
  // steps).
  std::vector<TensorId> StateTensors() const;
  // Sets the steps done (Adam's bias corrections count them) when resuming
  // from a checkpoint whose tensors were restored into this model.
  void RestoreSteps(int64_t steps) { steps_ = steps; }

  const ModelFootprint& footprint() const { return footprint_; }
  int layers() const { return static_cast<int>(layers_.size()); }
  int64_t steps() const { return steps_; }
  // Host seconds spent inside Adam's updates since creation: the CPU update
  // itself with the optimizer on the host tier; with it on the device tier,
  // the host time to issue the updates (the update itself on the simulated
  // device, kernel launches on a GPU). Leases and transfers excluded.
  double optimizer_seconds() const { return optimizer_seconds_; }

 private:
  // One Linear layer's tensors.
  struct Layer {
    int64_t in = 0, out = 0;
    TensorId w, b;            // parameters: [out x in], [out]
    TensorId gw, gb;          // their gradients
    TensorId mw, vw, mb, vb;  // Adam's first and second moments
    TensorId z;  // pre-activation [batch x out] (the logits if last)
    TensorId a;  // activation [batch x out]; hidden layers only
    bool hidden = true;
  };
  Mlp(Store* store, Compute* compute, const ModelConfig& config,
      const ModelFootprint& footprint);
  // Creates every tensor, in the order their ids are handed out.
  absl::Status CreateTensors();
  // One layer's parameters, gradients, moments and activations, named
  // "layer<l>.*".
  absl::StatusOr<Layer> CreateLayer(size_t l, int64_t in, int64_t out,
                                    bool hidden);
  // One store tensor of `config_.home`, remembered in created_.
  absl::StatusOr<TensorId> CreateTensor(std::string name, TensorKind kind,
                                        DType dtype,
                                        std::vector<int64_t> shape);
  absl::Status InitWeights();
  absl::Status UploadBatch(const float* images, const int32_t* labels,
                           int64_t rows);
  absl::Status Forward(int64_t rows);
  absl::StatusOr<LossResult> Loss(int64_t rows, bool with_gradient);
  // Backward pass, each layer updated by Adam as soon as its gradients are
  // complete.
  absl::Status Backward(int64_t rows, const AdamParams& adam);
  // Adam's parameters for this step: the learning rate, bias corrections.
  AdamParams StepAdamParams() const;
  absl::Status AdamOn(const AdamParams& p, TensorId w, TensorId m, TensorId v,
                      TensorId g);
  absl::Status DiscardActivations();

  Store* const store_;
  Compute* const compute_;
  const ModelConfig config_;
  const ModelFootprint footprint_;
  std::vector<Layer> layers_;
  TensorId input_, labels_, dlogits_;
  TensorId dact_[2];  // activation gradients, ping-pong between layers
  std::vector<TensorId> created_;  // every tensor, for the destructor
  int64_t steps_ = 0;
  double optimizer_seconds_ = 0;
  float lr_;
};

}  // namespace strata::train

#endif  // STRATA_TRAIN_MODEL_H_
