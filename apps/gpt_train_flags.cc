// gpt_train_flags.cc: the GPT's own flags of `strata train` and the run they
// describe (see gpt_train_flags.h).
#include "apps/gpt_train_flags.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/flags/flag.h"
#include "absl/strings/str_format.h"
#include "apps/cli/precision_flags.h"
#include "apps/cli/store_flags.h"
#include "apps/cli/train_defaults.h"
#include "apps/train_flags.h"
#include "strata/status.h"
#include "strata/store.h"

ABSL_FLAG(int32_t, layers, 8, "Transformer blocks.");
ABSL_FLAG(int32_t, heads, 4, "Attention heads (must divide --embed).");
ABSL_FLAG(int64_t, embed, 128, "Embedding width C (channels per token).");
ABSL_FLAG(int64_t, context, 128,
          "Tokens per sequence T (the attention "
          "span).");
ABSL_FLAG(std::string, tokenizer, "bpe",
          "byte (256 ids, one per byte) or bpe "
          "(SentencePiece BPE of --vocab ids trained once on the training "
          "split, cached).");
ABSL_FLAG(int64_t, vocab, 0,
          "Vocabulary size; 0 = the tokenizer's "
          "default (bpe: 4096; byte: 256). With byte, a larger value pads "
          "the classifier (--vocab=50304: GPT-2's shape).");
ABSL_FLAG(std::string, corpus, "",
          "A text file to train on, one line per "
          "line, the last ~10% of lines for validation; default: the King "
          "James Bible (Debian package bible-kjv).");
ABSL_FLAG(std::string, cache_dir, "",
          "Where the split, the tokenizer and the "
          "token shards are cached; default $XDG_CACHE_HOME/strata or "
          "~/.cache/strata.");
ABSL_FLAG(int64_t, eval_every, 0,
          "Validation loss every N steps (and at "
          "the end); 0 = at the end only.");
ABSL_FLAG(int64_t, eval_tokens, 65536,
          "Validation tokens scored per evaluation "
          "(from the start of the split, whole windows of --context "
          "tokens: at least --context); 0 = all of it.");
ABSL_FLAG(int64_t, warmup_steps, -1,
          "Linear learning-rate warm-up steps; "
          "-1 = a tenth of the run.");
ABSL_FLAG(double, weight_decay, 0.1,
          "AdamW's decoupled weight decay, on 2-D "
          "weights only.");
ABSL_FLAG(double, grad_clip, 1.0,
          "Clip the global gradient norm to this "
          "(exact: a step beyond it is rolled back and re-run); 0 = off.");
ABSL_FLAG(int64_t, sample, 0,
          "Print this many generated tokens after "
          "training, continuing the start of the validation split.");

namespace strata {
namespace {

constexpr int64_t kGptBpeVocab = 4096;

// The model's flags: its shape, its optimizer and where that runs.
absl::Status ModelFromFlags(train::GptConfig& m) {
  m.layers = absl::GetFlag(FLAGS_layers);
  m.heads = absl::GetFlag(FLAGS_heads);
  m.embed = absl::GetFlag(FLAGS_embed);
  m.context = absl::GetFlag(FLAGS_context);
  m.batch = absl::GetFlag(FLAGS_batch);
  m.accumulate = absl::GetFlag(FLAGS_accumulate);
  m.seed = absl::GetFlag(FLAGS_seed);
  m.weight_decay = static_cast<float>(absl::GetFlag(FLAGS_weight_decay));
  m.grad_clip = static_cast<float>(absl::GetFlag(FLAGS_grad_clip));
  STRATA_ASSIGN_OR_RETURN(m.checkpoint, train::ParseActivationCheckpointing(
                                            absl::GetFlag(FLAGS_checkpoint)));
  STRATA_RETURN_IF_ERROR(PrecisionFromFlags(m));
  const double lr = absl::GetFlag(FLAGS_lr);
  if (!(lr >= 1e-30 && lr < 1)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--lr=%g: must be in [1e-30, 1)", lr));
  }
  m.adam.lr = static_cast<float>(lr);
  const std::string opt = absl::GetFlag(FLAGS_optimizer_tier);
  if (opt != "host" && opt != "device") {
    return absl::InvalidArgumentError(
        absl::StrFormat("--optimizer-tier=%s: use host or device", opt));
  }
  m.optimizer_tier = opt == "host" ? Tier::kHost : Tier::kDevice;
  return absl::OkStatus();
}

// The schedule's flags: steps, warm-up, learning-rate schedule, evaluation
// and sample counts (`r.model` read already).
absl::Status ScheduleFromFlags(GptRun& r) {
  const train::GptConfig& m = r.model;
  train::LmTrainOptions& t = r.train;
  t.steps = absl::GetFlag(FLAGS_max_steps);
  if (t.steps < 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--max-steps=%d: the GPT trains for a number of steps (>= 1)",
        t.steps));
  }
  const int64_t warmup = absl::GetFlag(FLAGS_warmup_steps);
  if (warmup < -1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--warmup-steps=%d: use -1 (a tenth of the run) or a count >= 0",
        warmup));
  }
  t.warmup_steps = warmup < 0 ? t.steps / 10 : warmup;
  const std::string schedule = absl::GetFlag(FLAGS_lr_schedule);
  if (schedule != "cosine" && schedule != "constant") {
    return absl::InvalidArgumentError(
        absl::StrFormat("--lr-schedule=%s: use cosine or constant", schedule));
  }
  t.cosine_schedule = schedule == "cosine";
  t.eval_every = absl::GetFlag(FLAGS_eval_every);
  t.seed = m.seed;
  r.eval_tokens = absl::GetFlag(FLAGS_eval_tokens);
  r.sample = absl::GetFlag(FLAGS_sample);
  for (const auto& [flag, value] : {std::pair{"--eval-every", t.eval_every},
                                    std::pair{"--eval-tokens", r.eval_tokens},
                                    std::pair{"--sample", r.sample}}) {
    if (value < 0) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s=%d: give a count >= 0", flag, value));
    }
  }
  // Validation scores whole windows of --context tokens (ValidationWindows):
  // refused here, before the corpus is prepared, rather than after.
  if (r.eval_tokens > 0 && r.eval_tokens < m.context) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--eval-tokens=%d scores less than one validation window of "
        "--context=%d tokens: give at least %d, or 0 for the whole split",
        r.eval_tokens, m.context, m.context));
  }
  return absl::OkStatus();
}

// The tokenizer, the vocabulary and the corpus (`r.model` read already).
absl::Status CorpusFromFlags(GptRun& r) {
  const train::GptConfig& m = r.model;
  const std::string tok = absl::GetFlag(FLAGS_tokenizer);
  int64_t vocab = absl::GetFlag(FLAGS_vocab);
  if (tok == "byte") {
    if (vocab != 0 && vocab < 256) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "--vocab=%d with --tokenizer=byte: bytes need 256 ids (drop "
          "--vocab, or give at least 256 to pad the classifier, as GPT-2 "
          "pads 50257 to 50304)",
          vocab));
    }
    r.corpus.tokenizer = "byte";
    r.model.vocab = std::max<int64_t>(256, vocab);
  } else if (tok == "bpe") {
    if (vocab == 0) vocab = kGptBpeVocab;
    if (vocab <= 256) {
      return absl::InvalidArgumentError(
          "--tokenizer=bpe needs --vocab above 256, e.g. --vocab=4096");
    }
    r.corpus.tokenizer = absl::StrFormat("bpe:%d", vocab);
    r.model.vocab = vocab;
  } else {
    return absl::InvalidArgumentError(
        absl::StrFormat("--tokenizer=%s: use byte or bpe", tok));
  }
  r.corpus.tokenizer_seed = m.seed;
  r.corpus.corpus_path = absl::GetFlag(FLAGS_corpus);
  r.corpus.cache_dir = absl::GetFlag(FLAGS_cache_dir);
  return absl::OkStatus();
}

}  // namespace

void ApplyGptDefaults() {
  if (!FlagGiven("batch")) absl::SetFlag(&FLAGS_batch, kGptBatch);
  if (!FlagGiven("max_steps")) absl::SetFlag(&FLAGS_max_steps, kGptSteps);
  if (!FlagGiven("lr")) absl::SetFlag(&FLAGS_lr, kGptLr);
  SetUnsetBudgets(kGptDeviceBudget, kGptHostBudget, kGptNvmeBudget);
}

absl::StatusOr<GptRun> GptRunFromFlags() {
  GptRun r;
  STRATA_RETURN_IF_ERROR(ModelFromFlags(r.model));
  STRATA_RETURN_IF_ERROR(ScheduleFromFlags(r));
  STRATA_RETURN_IF_ERROR(CorpusFromFlags(r));
  return r;
}

}  // namespace strata
