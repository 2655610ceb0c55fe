// train_checkpoint.cc: the MLP's and the GPT's checkpoint contents and
// resume (see train_checkpoint.h).
#include "train/run/train_checkpoint.h"

#include <cstdlib>
#include <memory>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "strata/status.h"
#include "train/io/checkpoint_reader.h"

namespace strata::train {
namespace {

// Doubles in hex and floats in 9 digits: both survive the manifest bit for
// bit (and a float stays readable in a message).
std::string Hex(double x) { return absl::StrFormat("%a", x); }
std::string Float(float x) { return absl::StrFormat("%.9g", x); }
std::string Dec(int64_t x) { return absl::StrFormat("%d", x); }
std::string Dec(uint64_t x) { return absl::StrFormat("%d", x); }

// The state value `key` of `m`; DataLoss naming the checkpoint if absent or
// not a number.
class StateReader {
 public:
  explicit StateReader(const CheckpointReader& r) : r_(r) {}
  absl::StatusOr<double> Double(const std::string& key) const {
    STRATA_ASSIGN_OR_RETURN(const std::string* v, Find(key));
    char* end = nullptr;
    const double x = std::strtod(v->c_str(), &end);
    if (end == v->c_str() || *end != '\0') return Bad(key);
    return x;
  }
  // A comma-separated list of Double()s ("" is none).
  absl::StatusOr<std::vector<double>> Doubles(const std::string& key) const {
    STRATA_ASSIGN_OR_RETURN(const std::string* v, Find(key));
    std::vector<double> out;
    if (v->empty()) return out;
    for (absl::string_view part : absl::StrSplit(*v, ',')) {
      const std::string text(part);
      char* end = nullptr;
      out.push_back(std::strtod(text.c_str(), &end));
      if (end == text.c_str() || *end != '\0') return Bad(key);
    }
    return out;
  }
  absl::StatusOr<int64_t> Int(const std::string& key) const {
    STRATA_ASSIGN_OR_RETURN(const std::string* v, Find(key));
    char* end = nullptr;
    const long long x = std::strtoll(v->c_str(), &end, 10);
    if (end == v->c_str() || *end != '\0') return Bad(key);
    return static_cast<int64_t>(x);
  }
  absl::StatusOr<uint64_t> Uint(const std::string& key) const {
    STRATA_ASSIGN_OR_RETURN(const std::string* v, Find(key));
    char* end = nullptr;
    const unsigned long long x = std::strtoull(v->c_str(), &end, 10);
    if (end == v->c_str() || *end != '\0') return Bad(key);
    return static_cast<uint64_t>(x);
  }

 private:
  absl::StatusOr<const std::string*> Find(const std::string& key) const {
    auto it = r_.manifest().state.find(key);
    if (it == r_.manifest().state.end()) return Bad(key);
    return &it->second;
  }
  absl::Status Bad(const std::string& key) const {
    return absl::DataLossError(absl::StrFormat(
        "checkpoint %s: state '%s' is missing or not a number (a damaged "
        "manifest)",
        r_.path(), key));
  }
  const CheckpointReader& r_;
};

// Opens the checkpoint at `path`, checks its configuration against `config`
// and restores `tensors`.
absl::StatusOr<std::unique_ptr<CheckpointReader>> OpenAndRestore(
    const std::string& path, const std::map<std::string, std::string>& config,
    const std::vector<std::string>& must_match, Store& store,
    const std::vector<TensorId>& tensors, Resumed* resumed,
    const std::map<std::string, std::string>& absent = {}) {
  STRATA_ASSIGN_OR_RETURN(std::string checkpoint, ResolveCheckpoint(path));
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<CheckpointReader> reader,
                          CheckpointReader::Open(checkpoint));
  STRATA_ASSIGN_OR_RETURN(resumed->warnings,
                          CompareConfig(*reader, config, must_match, absent));
  STRATA_RETURN_IF_ERROR(RestoreTensors(*reader, store, tensors));
  resumed->path = checkpoint;
  resumed->step = reader->manifest().step;
  return reader;
}

// batch x accumulate of a saved MLP run (accumulate 1 when the checkpoint
// predates it); 0 when unreadable (the caller keeps the sum as it is).
double SavedSamplesPerStep(const std::map<std::string, std::string>& config) {
  auto number = [&](const char* key, double fallback) {
    auto it = config.find(key);
    if (it == config.end()) return fallback;
    char* end = nullptr;
    const double v = std::strtod(it->second.c_str(), &end);
    return end != it->second.c_str() && *end == '\0' ? v : 0.0;
  };
  return number("batch", 0) * number("accumulate", 1);
}

}  // namespace

std::map<std::string, std::string> MlpCheckpointConfig(const TrainOptions& o) {
  const ModelConfig& m = o.model;
  // Not --loss-scale: it is the scale of step 0 only; a resumed run goes on
  // with the scale the checkpoint saved (ResumeMlp).
  return {{"model", "mlp"},
          {"inputs", Dec(m.inputs)},
          {"width", Dec(m.width)},
          {"depth", Dec(int64_t{m.depth})},
          {"classes", Dec(m.classes)},
          {"activation", m.activation == Activation::kRelu ? "relu" : "gelu"},
          {"batch", Dec(m.batch)},
          {"accumulate", Dec(int64_t{m.accumulate})},
          {"seed", Dec(m.seed)},
          {"shuffle_seed", Dec(o.shuffle_seed)},
          {"lr", Float(m.adam.lr)},
          {"lr_schedule", o.cosine_schedule ? "cosine" : "constant"},
          {"epochs", Dec(int64_t{o.epochs})},
          {"max_steps", Dec(o.max_steps)},
          {"precision", PrecisionName(m.precision)},
          {"rounding", RoundingName(m.rounding)}};
}

namespace {

// fp16's loss-scale state under "loss_scale*" keys (ReadLossScale reads it).
void AddLossScaleState(const DynamicLossScale::State& ls,
                       std::map<std::string, std::string>& state) {
  std::vector<std::string> history;  // step:scale, oldest first
  for (const LossScaleChange& h : ls.history) {
    history.push_back(absl::StrCat(h.step, ":", Float(h.scale)));
  }
  state["loss_scale"] = Float(ls.scale);
  state["loss_scale.clean_steps"] = Dec(ls.clean_steps);
  state["loss_scale.history"] = absl::StrJoin(history, ",");
}

}  // namespace

namespace {

// The configuration of `model`'s checkpoints: a sharded rank's also names
// its shard ("rank", "ranks"), which a resume must match — its tensors are
// that rank's slices.
std::map<std::string, std::string> MlpConfigOf(const Mlp& model,
                                               const TrainOptions& options) {
  std::map<std::string, std::string> config = MlpCheckpointConfig(options);
  if (model.sharded()) {
    config["rank"] = Dec(int64_t{model.rank()});
    config["ranks"] = Dec(int64_t{model.ranks()});
  }
  return config;
}

}  // namespace

CheckpointContent MlpCheckpoint(const Mlp& model, const TrainOptions& options,
                                const StepDone& done) {
  const Mlp::Snapshot snap = model.snapshot();
  CheckpointContent c = {
      .model = "mlp",
      .step = done.step,
      .config = MlpConfigOf(model, options),
      .state = {{"adam_steps", Dec(snap.steps)},
                {"skipped_steps", Dec(snap.skipped_steps)},
                {"epoch_loss_sum", Hex(done.epoch_loss_sum)}},
      .tensors = model.StateTensors()};
  if (model.loss_scale() != nullptr) {
    AddLossScaleState(snap.loss_scale, c.state);
  }
  return c;
}

namespace {

// The loss-scale state MlpCheckpoint saved.
absl::StatusOr<DynamicLossScale::State> ReadLossScale(
    const StateReader& state, const CheckpointReader& reader) {
  DynamicLossScale::State ls;
  STRATA_ASSIGN_OR_RETURN(const double scale, state.Double("loss_scale"));
  ls.scale = static_cast<float>(scale);
  STRATA_ASSIGN_OR_RETURN(ls.clean_steps, state.Int("loss_scale.clean_steps"));
  auto it = reader.manifest().state.find("loss_scale.history");
  if (it == reader.manifest().state.end()) {
    return absl::DataLossError(absl::StrFormat(
        "checkpoint %s: no loss-scale history (a damaged manifest)",
        reader.path()));
  }
  for (absl::string_view entry : absl::StrSplit(it->second, ',')) {
    std::pair<std::string, std::string> parts = absl::StrSplit(entry, ':');
    LossScaleChange change;
    if (!absl::SimpleAtoi(parts.first, &change.step) ||
        !absl::SimpleAtof(parts.second, &change.scale)) {
      return absl::DataLossError(absl::StrFormat(
          "checkpoint %s: loss-scale history entry '%s' is not step:scale "
          "(a damaged manifest)",
          reader.path(), entry));
    }
    ls.history.push_back(change);
  }
  return ls;
}

}  // namespace

absl::StatusOr<Resumed> ResumeMlp(const std::string& path, Store& store,
                                  Mlp& model, TrainOptions& options) {
  Resumed resumed;
  STRATA_ASSIGN_OR_RETURN(
      std::unique_ptr<CheckpointReader> reader,
      OpenAndRestore(path, MlpConfigOf(model, options),
                     {"model", "inputs", "width", "depth", "classes",
                      "activation", "precision", "rank", "ranks"},
                     store, model.StateTensors(), &resumed,
                     // Checkpoints from before mixed precision were fp32.
                     {{"precision", "fp32"}, {"rounding", "nearest"}}));
  const StateReader state(*reader);
  Mlp::Snapshot snap;
  STRATA_ASSIGN_OR_RETURN(snap.steps, state.Int("adam_steps"));
  // Checkpoints from before mixed precision skipped no step.
  if (reader->manifest().state.contains("skipped_steps")) {
    STRATA_ASSIGN_OR_RETURN(snap.skipped_steps, state.Int("skipped_steps"));
  }
  if (model.loss_scale() != nullptr) {
    STRATA_ASSIGN_OR_RETURN(snap.loss_scale, ReadLossScale(state, *reader));
    // Every fp16 skip is the loss scale's: the model's count is its count.
    snap.loss_scale.skipped_steps = snap.skipped_steps;
  }
  STRATA_ASSIGN_OR_RETURN(options.start_epoch_loss_sum,
                          state.Double("epoch_loss_sum"));
  // The sum is over the saved run's samples; a run with another step size
  // (a warned --batch or --accumulate change) weighs each saved step as one
  // of its own, so the epoch's mean loss stays a mean of step losses.
  const double saved = SavedSamplesPerStep(reader->manifest().config);
  const double now =
      static_cast<double>(options.model.batch) * options.model.accumulate;
  if (saved > 0 && saved != now) options.start_epoch_loss_sum *= now / saved;
  STRATA_RETURN_IF_ERROR(model.Restore(snap));
  options.start_step = resumed.step;
  return resumed;
}

std::map<std::string, std::string> GptCheckpointConfig(
    const GptConfig& m, const LmTrainOptions& o, const std::string& tokenizer) {
  return {{"model", "gpt"},
          {"layers", Dec(int64_t{m.layers})},
          {"heads", Dec(int64_t{m.heads})},
          {"embed", Dec(m.embed)},
          {"context", Dec(m.context)},
          {"vocab", Dec(m.vocab)},
          {"tokenizer", tokenizer},
          {"batch", Dec(m.batch)},
          {"accumulate", Dec(int64_t{m.accumulate})},
          {"seed", Dec(m.seed)},
          {"lr", Float(m.adam.lr)},
          {"weight_decay", Float(m.weight_decay)},
          {"grad_clip", Float(m.grad_clip)},
          {"classifier_rows", Dec(m.classifier_rows)},
          {"max_steps", Dec(o.steps)},
          {"warmup_steps", Dec(o.warmup_steps)},
          {"lr_schedule", o.cosine_schedule ? "cosine" : "constant"},
          {"eval_every", Dec(o.eval_every)},
          {"batch_seed", Dec(o.seed)},
          {"precision", PrecisionName(m.precision)},
          {"rounding", RoundingName(m.rounding)}};
}

namespace {

// As MlpConfigOf: a sharded rank's checkpoint names its shard.
std::map<std::string, std::string> GptConfigOf(const Gpt& model,
                                               const LmTrainOptions& options,
                                               const std::string& tokenizer) {
  std::map<std::string, std::string> config =
      GptCheckpointConfig(model.config(), options, tokenizer);
  if (model.sharded()) {
    config["rank"] = Dec(int64_t{model.rank()});
    config["ranks"] = Dec(int64_t{model.ranks()});
  }
  return config;
}

}  // namespace

std::string ShapeText(const std::vector<int64_t>& shape) {
  return absl::StrJoin(shape, "x");
}

CheckpointContent GptCheckpoint(const Gpt& model, const LmTrainOptions& options,
                                const std::string& tokenizer,
                                const LmBatcher& batches, int64_t step,
                                absl::Span<const double> losses) {
  std::vector<std::string> exact;
  for (double x : losses) exact.push_back(Hex(x));
  const ClippedAdamW::Snapshot opt = model.optimizer_snapshot();
  const ClipStats& c = opt.stats;
  CheckpointContent content = {
      .model = "gpt",
      .step = step,
      .config = GptConfigOf(model, options, tokenizer),
      .state = {{"adam_steps", Dec(model.steps())},
                {"batcher_rng_state", Dec(batches.rng_state())},
                {"steps_since_clip", Dec(opt.steps_since_clip)},
                {"clip.steps", Dec(c.steps)},
                {"clip.clipped", Dec(c.clipped)},
                {"clip.rolled_back", Dec(c.rolled_back)},
                {"clip.deferred", Dec(c.deferred)},
                {"clip.backup_bytes", Dec(c.backup_bytes)},
                {"clip.optimizer_seconds", Hex(c.optimizer_seconds)},
                {"clip.last_norm", Hex(c.last_norm)},
                {"rollback_seconds", Hex(model.rollback_seconds())},
                {"losses", absl::StrJoin(exact, ",")},
                {"skipped_steps", Dec(model.skipped_steps())}},
      .tensors = model.StateTensors()};
  if (const DynamicLossScale* ls = model.loss_scale()) {
    AddLossScaleState(ls->state(), content.state);
  }
  if (model.sharded()) {  // the tensors are flat shards of these
    for (const auto& [name, shape] : model.ParameterShapes()) {
      content.state[kWholeShapePrefix + name] = ShapeText(shape);
    }
  }
  return content;
}

absl::StatusOr<Resumed> ResumeGpt(const std::string& path, Store& store,
                                  Gpt& model, LmBatcher& batches,
                                  LmTrainOptions& options,
                                  const std::string& tokenizer) {
  Resumed resumed;
  STRATA_ASSIGN_OR_RETURN(
      std::unique_ptr<CheckpointReader> reader,
      OpenAndRestore(path, GptConfigOf(model, options, tokenizer),
                     {"model", "layers", "heads", "embed", "context", "vocab",
                      "tokenizer", "precision", "rank", "ranks"},
                     store, model.StateTensors(), &resumed,
                     // Checkpoints from before mixed precision were fp32,
                     // from before accumulation one micro-batch a step.
                     {{"precision", "fp32"},
                      {"rounding", "nearest"},
                      {"accumulate", "1"}}));
  const StateReader s(*reader);
  ClippedAdamW::Snapshot opt;
  ClipStats& c = opt.stats;
  Gpt::Snapshot snap;
  STRATA_ASSIGN_OR_RETURN(snap.steps, s.Int("adam_steps"));
  STRATA_ASSIGN_OR_RETURN(uint64_t rng, s.Uint("batcher_rng_state"));
  STRATA_ASSIGN_OR_RETURN(opt.steps_since_clip, s.Int("steps_since_clip"));
  STRATA_ASSIGN_OR_RETURN(c.steps, s.Int("clip.steps"));
  STRATA_ASSIGN_OR_RETURN(c.clipped, s.Int("clip.clipped"));
  STRATA_ASSIGN_OR_RETURN(c.rolled_back, s.Int("clip.rolled_back"));
  STRATA_ASSIGN_OR_RETURN(c.deferred, s.Int("clip.deferred"));
  STRATA_ASSIGN_OR_RETURN(c.backup_bytes, s.Uint("clip.backup_bytes"));
  STRATA_ASSIGN_OR_RETURN(c.optimizer_seconds,
                          s.Double("clip.optimizer_seconds"));
  STRATA_ASSIGN_OR_RETURN(c.last_norm, s.Double("clip.last_norm"));
  STRATA_ASSIGN_OR_RETURN(snap.rollback_seconds, s.Double("rollback_seconds"));
  // Checkpoints from before mixed precision skipped no step.
  if (reader->manifest().state.contains("skipped_steps")) {
    STRATA_ASSIGN_OR_RETURN(snap.skipped_steps, s.Int("skipped_steps"));
  }
  if (model.loss_scale() != nullptr) {
    STRATA_ASSIGN_OR_RETURN(snap.loss_scale, ReadLossScale(s, *reader));
    snap.loss_scale.skipped_steps = snap.skipped_steps;
  }
  STRATA_ASSIGN_OR_RETURN(options.prior_losses, s.Doubles("losses"));
  if (options.prior_losses.size() != static_cast<size_t>(resumed.step)) {
    return absl::DataLossError(absl::StrFormat(
        "checkpoint %s: %d losses recorded for step %d (a damaged manifest)",
        resumed.path, options.prior_losses.size(), resumed.step));
  }
  STRATA_RETURN_IF_ERROR(model.RestoreState(snap, opt));
  batches.set_rng_state(rng);
  options.start_step = resumed.step;
  return resumed;
}

}  // namespace strata::train
