// gpt_step.cc: Gpt's step (see gpt.h): the batch split into micro-batches,
// forward and backward over them (gpt_forward.cc, gpt_backward.cc), the
// optimizer pass with its clipping and loss scale, evaluation and the last
// position's logits.
#include <chrono>
#include <cmath>

#include "absl/strings/str_format.h"
#include "strata/status.h"
#include "train/model/gpt.h"
#include "train/model/lease_group.h"

namespace strata::train {
namespace {

constexpr uint64_t kF = sizeof(float);

double Since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
      .count();
}

}  // namespace

int64_t Gpt::SplitMicroBatches(int64_t sequences, bool split) {
  micro_rows_.clear();
  for (int64_t left = sequences; left > 0; left -= config_.batch) {
    micro_rows_.push_back(std::min(left, config_.batch) * config_.context);
  }
  global_micro_ = static_cast<int>(micro_rows_.size());
  pass_rows_ = sequences * config_.context;  // the loss is the whole step's
  int64_t first = 0;
  if (split) {
    const auto [at, count] = RankMicroBatches(global_micro_);
    micro_rows_ = std::vector<int64_t>(micro_rows_.begin() + at,
                                       micro_rows_.begin() + at + count);
    first = int64_t{at} * config_.batch;
  }
  SetMicro(0);
  return first;
}

absl::Status Gpt::CheckBatch(const int32_t* inputs, const int32_t* targets,
                             int64_t sequences, bool split) const {
  split = split && sharded();
  const int64_t most = config_.step_sequences() * (split ? ranks() : 1);
  if (sequences < 1 || sequences > most) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%d sequences: must be 1..%d (--batch x --accumulate%s)", sequences,
        most, split ? " x ranks" : ""));
  }
  if (split && (sequences + config_.batch - 1) / config_.batch < ranks()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%d sequences make fewer micro-batches of --batch=%d than the %d "
        "ranks: every rank needs one",
        sequences, config_.batch, ranks()));
  }
  const int64_t n = sequences * config_.context;
  for (const int32_t* t : {inputs, targets}) {
    for (int64_t i = 0; i < n; ++i) {
      if (t[i] < 0 || t[i] >= config_.vocab) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "token %d at position %d is outside the vocabulary [0, %d): the "
            "data was tokenized for another --vocab",
            t[i], i, config_.vocab));
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<double> Gpt::ForwardBackward(const int32_t* inputs,
                                            const int32_t* targets,
                                            int64_t sequences) {
  STRATA_RETURN_IF_ERROR(Upload(inputs, targets, sequences, /*split=*/true));
  STRATA_RETURN_IF_ERROR(Forward());
  const int micro = static_cast<int>(micro_rows_.size());
  if (sharded() && rank() > 0) {  // rank r - 1's sums to add to
    STRATA_RETURN_IF_ERROR(ReceivePartialSums(cg_.embeddings, EmbeddingsId(),
                                              {0}, kClassifierSum, rank() - 1));
    STRATA_RETURN_IF_ERROR(
        ReceivePartialSums(cg_.lnf, kLnfId, {0, 1}, kPartialSum, rank() - 1));
  }
  std::vector<double> losses;
  // Each micro-batch's classifier and final norm in turn: dln is shared.
  for (int k = 0; k < micro; ++k) {
    STRATA_ASSIGN_OR_RETURN(losses.emplace_back(),
                            Classifier(true, k, 0, rows_));
    for (TensorId id : {io_[k].lnf_out, io_[k].targets}) {
      STRATA_RETURN_IF_ERROR(Drop(id));
    }
    STRATA_RETURN_IF_ERROR(FinalNormBackward(k));
  }
  STRATA_RETURN_IF_ERROR(Drop(s_.logits));
  double loss = 0;
  for (double part : losses) loss += part;
  if (sharded() && rank() == ranks() - 1) {
    // The final norm's shards first: rank 0 receives them before wte's
    // total (it sends its sums of both first).
    STRATA_RETURN_IF_ERROR(PassGradients(cg_.lnf, g_.lnf, kLnfId));
    STRATA_RETURN_IF_ERROR(PassClassifierSum());
  } else if (sharded()) {
    STRATA_RETURN_IF_ERROR(PassClassifierSum());
    STRATA_RETURN_IF_ERROR(PassGradients(cg_.lnf, g_.lnf, kLnfId));
    STRATA_RETURN_IF_ERROR(StartClassifierTotal());
  } else {
    STRATA_RETURN_IF_ERROR(optimizer_.GroupComplete(g_.lnf));
  }
  STRATA_RETURN_IF_ERROR(BackwardBlocks());
  STRATA_RETURN_IF_ERROR(BackwardEmbeddings());
  STRATA_RETURN_IF_ERROR(compute_->Synchronize());
  // Last: an all-gather earlier would hold rank 0 until the last rank's
  // classifier is done.
  if (sharded()) return SumLosses(losses);
  return loss;
}

absl::StatusOr<std::optional<float>> Gpt::EndOptimizerStep() {
  if (!sharded()) return optimizer_.EndStep(g_.embeddings);
  STRATA_ASSIGN_OR_RETURN(Pending p, AwaitPending());  // the embeddings'
  return optimizer_.EndStep(g_.embeddings, p.whole);
}

AdamParams Gpt::StepAdamParams() const {
  AdamParams p = config_.adam;
  p.lr = lr_;
  const double t = static_cast<double>(steps_ + 1);
  p.correction1 = static_cast<float>(1.0 / (1.0 - std::pow(p.beta1, t)));
  p.correction2 = static_cast<float>(1.0 / (1.0 - std::pow(p.beta2, t)));
  return p;
}

std::optional<MixedStep> Gpt::StepMixed() const {
  if (!mixed()) return std::nullopt;
  return MixedStep{
      .grad_scale = loss_scale_ ? loss_scale_->inverse_scale() : 1.0f,
      .rounding = config_.rounding,
      .seed = config_.seed,
      .step = steps_};
}

bool Gpt::MixedStepApplied() {
  const int64_t nonfinite = optimizer_.step_nonfinite();
  // The optimizer skipped the step exactly when it saw a non-finite value.
  const bool applied =
      loss_scale_ ? loss_scale_->Update(steps_ + skipped_steps_, nonfinite)
                  : nonfinite == 0;
  if (!applied) ++skipped_steps_;
  return applied;
}

absl::StatusOr<std::optional<float>> Gpt::StepPass(
    const int32_t* inputs, const int32_t* targets, int64_t sequences,
    const AdamParams& adam, std::optional<float> coefficient,
    const std::optional<MixedStep>& mixed, double* loss) {
  store_->BeginStep();
  optimizer_.BeginStep(adam, coefficient, mixed);
  absl::StatusOr<double> sum = ForwardBackward(inputs, targets, sequences);
  absl::StatusOr<std::optional<float>> rerun =
      sum.ok() ? EndOptimizerStep() : sum.status();
  absl::Status finished = FinishPass(rerun.status());
  store_->EndStep();
  if (!finished.ok()) {
    DiscardActivations().IgnoreError();
    return finished;
  }
  if (loss != nullptr) *loss = *sum;
  return rerun;
}

absl::Status Gpt::FinishPass(absl::Status status) {
  if (!sharded()) return status;
  if (status.ok()) status = EndPass();
  if (status.ok()) return status;
  AbandonPass();
  if (failed_.ok()) {
    failed_ = absl::FailedPreconditionError(absl::StrFormat(
        "an earlier sharded step failed, leaving the ranks' shards out of "
        "step; end the run (the failure: %s)",
        status.message()));
  }
  return status;
}

absl::StatusOr<double> Gpt::TrainStep(const int32_t* inputs,
                                      const int32_t* targets,
                                      int64_t sequences) {
  STRATA_RETURN_IF_ERROR(failed_);
  // Bad input before anything is exchanged: the run may go on.
  STRATA_RETURN_IF_ERROR(CheckBatch(inputs, targets, sequences, true));
  const AdamParams adam = StepAdamParams();
  const Stats before = store_->GetStats();
  // What the links moved in this step, a re-run included (train_link_bytes).
  const uint64_t sent_before = sharded() ? collectives_->bytes_sent() : 0;
  auto count_links = [&] {
    if (sharded()) {
      train_bytes_sent_ += collectives_->bytes_sent() - sent_before;
    }
    const Stats after = store_->GetStats();
    for (int i = 0; i < kNumLinks; ++i) {
      train_link_bytes_[i] += after.links[i].bytes - before.links[i].bytes;
    }
  };
  const std::optional<MixedStep> mixed = StepMixed();
  double loss = 0;
  absl::StatusOr<std::optional<float>> rerun =
      StepPass(inputs, targets, sequences, adam, std::nullopt, mixed, &loss);
  if (!rerun.ok()) {
    count_links();
    return rerun.status();
  }
  if (rerun->has_value()) {
    // The norm exceeded the limit: the updated groups were restored; the
    // same gradients again, clipped this time.
    const auto start = std::chrono::steady_clock::now();
    absl::Status again =
        StepPass(inputs, targets, sequences, adam, **rerun, mixed, nullptr)
            .status();
    rollback_seconds_ += Since(start);
    if (!again.ok()) {
      count_links();
      return again;
    }
  }
  count_links();
  if (mixed.has_value() && !MixedStepApplied()) return loss;  // skipped
  ++steps_;
  return loss;
}

absl::StatusOr<double> Gpt::Evaluate(const int32_t* inputs,
                                     const int32_t* targets,
                                     int64_t sequences) {
  STRATA_RETURN_IF_ERROR(failed_);
  STRATA_RETURN_IF_ERROR(CheckBatch(inputs, targets, sequences, false));
  store_->BeginStep();
  absl::StatusOr<double> loss = [&]() -> absl::StatusOr<double> {
    STRATA_RETURN_IF_ERROR(Upload(inputs, targets, sequences));
    STRATA_RETURN_IF_ERROR(Forward(/*for_backward=*/false));
    double sum = 0;
    for (int k = 0; k < static_cast<int>(micro_rows_.size()); ++k) {
      STRATA_ASSIGN_OR_RETURN(double part,
                              Classifier(false, k, 0, micro_rows_[k]));
      sum += part;
    }
    return sum;
  }();
  absl::Status finished = FinishPass(loss.status());
  absl::Status discard = DiscardActivations();
  store_->EndStep();
  if (!finished.ok()) return finished;
  if (loss.ok() && !discard.ok()) return discard;
  return loss;
}

absl::StatusOr<std::vector<float>> Gpt::LastLogits(const int32_t* inputs,
                                                   int64_t sequences,
                                                   int64_t row) {
  if (row < 0 || row >= sequences) {
    return absl::InvalidArgumentError(
        absl::StrFormat("row %d of %d sequences", row, sequences));
  }
  STRATA_RETURN_IF_ERROR(failed_);
  // The targets only feed the loss, which is not used: the inputs serve.
  store_->BeginStep();
  std::vector<float> logits(config_.vocab);
  absl::Status status = [&]() -> absl::Status {
    STRATA_RETURN_IF_ERROR(Upload(inputs, inputs, sequences));
    STRATA_RETURN_IF_ERROR(Forward(/*for_backward=*/false));
    // The row's micro-batch, and its last position there.
    const int k = static_cast<int>(row / config_.batch);
    const int64_t last =
        (row % config_.batch) * config_.context + config_.context - 1;
    STRATA_RETURN_IF_ERROR(Classifier(false, k, last, 1).status());
    return store_->Read(s_.logits, logits.data(), logits.size() * kF);
  }();
  status = FinishPass(status);
  status.Update(DiscardActivations());
  store_->EndStep();
  if (!status.ok()) return status;
  return logits;
}

}  // namespace strata::train
