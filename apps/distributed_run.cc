// distributed_run.cc: see distributed_run.h.
#include "apps/distributed_run.h"

#include <sched.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "apps/cli/command_table.h"
#include "apps/cli/store_flags.h"
#include "apps/train_flags.h"
#include "base/byte_size.h"
#include "strata/status.h"
#include "train/compute/cpu/host_pool.h"
#include "train/io/checkpoint_reader.h"

ABSL_FLAG(bool, distributed, false,
          "Run as one rank of a sharded data-parallel job launched by "
          "mpirun (ZeRO-3 style: each rank holds 1/N of the parameters, "
          "gradients and Adam states; the MLP or the GPT in fp32, bf16 or "
          "fp16; on the simulated device over MPI, on GPUs over NCCL, one "
          "GPU a rank, bootstrapped by MPI — the NCCL path has not run on "
          "more than one GPU yet). "
          "Each rank trains --batch x --accumulate of every step's samples; "
          "the losses equal one rank's with --accumulate x N (and the same "
          "OPENBLAS_NUM_THREADS), bit for bit. "
          "--save-dir puts each rank's checkpoints (its shards) in "
          "rank-R-of-N there; --resume takes that --save-dir and resumes "
          "from the newest step every rank saved; `strata export` of it "
          "gathers the shards. --resident and --memory=unified are "
          "refused. "
          "Examples: mpirun -np 2 strata train --distributed (the GPT); "
          "mpirun -np 2 strata train --model=mlp --distributed "
          "--device-budget=24MiB");
ABSL_FLAG(double, collective_timeout, 300,
          "--distributed: seconds a rank waits for another (an all-gather, "
          "a gradient) before the run ends with an error naming the rank "
          "and the tensor.");

namespace strata {
namespace {

// The launcher's environment variable `name` as a number, or `otherwise`.
int LaunchVariable(const char* name, int otherwise) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::atoi(v) : otherwise;
}

int CoresAllowed() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0) {
    return CPU_COUNT(&set);
  }
  return static_cast<int>(std::thread::hardware_concurrency());
}

// What one rank reports to the others (all-gathered as bytes).
struct RankNumbers {
  uint64_t peak_bytes[3];  // device, host, NVMe
  uint64_t bytes_sent;
};

// The byte offsets of `ranks` contributions of `bytes` each.
std::vector<uint64_t> EqualOffsets(int ranks, uint64_t bytes) {
  std::vector<uint64_t> offsets;
  for (int r = 0; r <= ranks; ++r) offsets.push_back(r * bytes);
  return offsets;
}

}  // namespace

int DistributedRun::LaunchRank() {
  return LaunchVariable("OMPI_COMM_WORLD_RANK", LaunchVariable("PMI_RANK", 0));
}

bool DistributedRun::EchoesRankZero() { return EchoesRankZero(Requested()); }

bool DistributedRun::EchoesRankZero(bool given) {
  const char* contexts = std::getenv("OMPI_NUM_APP_CTX");
  return given && LaunchRank() > 0 && contexts != nullptr &&
         std::string_view(contexts) == "1";
}

void DistributedRun::AwaitRankZeroRefusal(const absl::Status& refusal) {
  AwaitRankZeroRefusal(refusal, Requested());
}

void DistributedRun::AwaitRankZeroRefusal(const absl::Status& refusal,
                                          bool given) {
  // Every caller refuses before training begins, also after Start (a
  // missing --nvme-dir or --data-dir, budgets the model does not fit).
  const absl::StatusCode code = refusal.code();
  if (!EchoesRankZero(given) ||
      (code != absl::StatusCode::kInvalidArgument &&
       code != absl::StatusCode::kNotFound &&
       code != absl::StatusCode::kResourceExhausted)) {
    return;
  }
  // mpirun ends this process about a second after rank 0 exits (at once
  // once MPI started: rank 0 aborts the job). Should rank 0 not refuse after
  // all (a file this rank reads differs on its node), rank 0 waits in
  // MPI_Init or its first collective for at most --collective-timeout: say
  // it before then, so the refusal is seen and the exit code is 2.
  const double timeout = absl::GetFlag(FLAGS_collective_timeout);
  // A bad --collective-timeout is itself the refusal, rank 0's too.
  absl::SleepFor(
      absl::Seconds(timeout > 0 ? std::min(10.0, timeout / 2) : 10.0));
}

int DistributedRun::CudaDevice() {
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  if (visible != nullptr && *visible != '\0' &&
      std::string(visible).find(',') == std::string::npos) {
    return 0;  // the launcher gave this rank one device
  }
  return LaunchVariable("OMPI_COMM_WORLD_LOCAL_RANK",
                        LaunchVariable("MPI_LOCALRANKID", 0));
}

int DistributedRun::LaunchSize() {
  return LaunchVariable("OMPI_COMM_WORLD_SIZE", LaunchVariable("PMI_SIZE", 1));
}

std::string DistributedRun::RankDirName() {
  return train::RankDirName(LaunchRank(), LaunchSize());
}

// Collective: the ranks' checkpoints at `path` (each its own) are of one
// run — the same configuration but the rank — not directories of two runs
// put side by side, whose slices would train a model no run had.
absl::Status DistributedRun::CheckOneRun(const std::string& path) const {
  absl::StatusOr<std::unique_ptr<train::CheckpointReader>> reader =
      train::CheckpointReader::Open(path);
  std::map<std::string, std::string> config;
  if (reader.ok()) config = (*reader)->manifest().config;
  config.erase("rank");
  // An unreadable manifest gathers as "": Resume names its damage after.
  const std::string mine =
      reader.ok() ? nlohmann::json(config).dump() : std::string();
  STRATA_ASSIGN_OR_RETURN(const std::vector<std::string> all,
                          GatherStrings(mine, "the ranks' checkpoints"));
  for (int r = 1; r < ranks(); ++r) {
    if (all[r].empty() || all[0].empty() || all[r] == all[0]) continue;
    const nlohmann::json first = nlohmann::json::parse(all[0]);
    const nlohmann::json theirs = nlohmann::json::parse(all[r]);
    for (const auto& item : first.items()) {
      if (theirs.value(item.key(), nlohmann::json()) == item.value()) continue;
      return absl::FailedPreconditionError(absl::StrFormat(
          "--resume: rank %d's checkpoint was saved with %s=%s, rank 0's with "
          "%s: the rank directories are of different runs; resume one run's "
          "--save-dir",
          r, item.key(), theirs.value(item.key(), nlohmann::json()).dump(),
          item.value().dump()));
    }
    return absl::FailedPreconditionError(
        "--resume: the ranks' checkpoints are of different runs; resume one "
        "run's --save-dir");
  }
  return absl::OkStatus();
}

absl::Status DistributedRun::AgreeOnResume(RunCheckpoints& checkpoints) const {
  if (RankDirName() != train::RankDirName(rank(), ranks())) {
    return absl::InternalError(absl::StrFormat(
        "the launcher's rank variables (%s) disagree with MPI's rank %d of "
        "%d; launch with Open MPI's mpirun",
        RankDirName(), rank(), ranks()));
  }
  if (checkpoints.resume_path().empty()) return absl::OkStatus();
  const std::vector<train::CheckpointRef> mine = checkpoints.ResumeCandidates();
  std::vector<std::string> steps;
  for (const train::CheckpointRef& c : mine) {
    steps.push_back(absl::StrCat(c.step));
  }
  STRATA_ASSIGN_OR_RETURN(
      const std::vector<std::string> all,
      GatherStrings(absl::StrJoin(steps, ","), "the ranks' checkpoints"));
  // The newest step of this rank's that every rank has (all ranks compute
  // the same one: each one's list is a part of `all`).
  for (const train::CheckpointRef& c : mine) {
    const std::string step = absl::StrCat(c.step);
    const bool everywhere = std::all_of(all.begin(), all.end(), [&](auto& s) {
      const std::vector<std::string> theirs = absl::StrSplit(s, ',');
      return std::find(theirs.begin(), theirs.end(), step) != theirs.end();
    });
    if (everywhere) {
      // Checked first: nothing is renamed for a resume that is refused.
      STRATA_RETURN_IF_ERROR(CheckOneRun(c.path));
      return checkpoints.ResumeFrom(c);
    }
  }
  std::vector<std::string> listed;
  for (int r = 0; r < ranks(); ++r) {
    listed.push_back(
        absl::StrFormat("rank %d: %s", r, all[r].empty() ? "none" : all[r]));
  }
  return absl::FailedPreconditionError(absl::StrFormat(
      "--resume: no step was saved by every rank (%s), so no state of the "
      "whole model is there; start again without --resume",
      absl::StrJoin(listed, "; ")));
}

bool DistributedRun::Requested() { return absl::GetFlag(FLAGS_distributed); }

absl::Status DistributedRun::CheckFlags() {
  if (!Requested()) {
    // Set to other than its default (a report's --config repeats it).
    const absl::CommandLineFlag* timeout =
        absl::FindCommandLineFlag("collective_timeout");
    if (timeout->CurrentValue() != timeout->DefaultValue()) {
      return absl::InvalidArgumentError(
          "--collective-timeout is for a --distributed run: add "
          "--distributed or drop it");
    }
    if (const int n = LaunchVariable("OMPI_COMM_WORLD_SIZE", 1); n > 1) {
      std::fprintf(stderr,
                   "strata train: one of %d processes mpirun started, "
                   "without --distributed: each trains the whole model "
                   "alone; add --distributed to shard one run over them\n",
                   n);
    }
    return absl::OkStatus();
  }
  if (LaunchVariable("OMPI_COMM_WORLD_SIZE", 1) == 1) {
    std::fprintf(stderr,
                 "strata train: --distributed with one rank (mpirun -np N "
                 "starts N): the model is sharded over 1\n");
  }
  // Rank 0 alone prints; every rank still reports its errors on stderr.
  if (LaunchRank() > 0) {
    if (std::freopen("/dev/null", "w", stdout) == nullptr) {
      return absl::InternalError("--distributed: cannot mute stdout");
    }
  }
  auto refuse = [](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--distributed does not take %s yet; drop it or run without "
        "--distributed",
        what));
  };
  if (absl::GetFlag(FLAGS_resident)) return refuse("--resident");
  if (!(absl::GetFlag(FLAGS_collective_timeout) > 0)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--collective-timeout=%g: give the seconds a rank may wait, > 0",
        absl::GetFlag(FLAGS_collective_timeout)));
  }
  return absl::OkStatus();
}

void DistributedRun::PrintRanks(const nlohmann::json& ranks) {
  for (const nlohmann::json& r : ranks["per_rank"]) {
    absl::PrintF("%-22s peak device %s, host %s, NVMe %s; sent %s per step\n",
                 absl::StrFormat("rank %d of %d", r["rank"].get<int>(),
                                 ranks["ranks"].get<int>()),
                 FormatByteSize(r["peak_device_bytes"].get<uint64_t>()),
                 FormatByteSize(r["peak_host_bytes"].get<uint64_t>()),
                 FormatByteSize(r["peak_nvme_bytes"].get<uint64_t>()),
                 FormatByteSize(r["bytes_sent_per_step"].get<uint64_t>()));
  }
}

absl::Status DistributedRun::Barrier(const std::string& what) const {
  const char mine = 0;
  std::vector<char> all(ranks());
  std::vector<uint64_t> offsets;
  for (int r = 0; r <= ranks(); ++r) offsets.push_back(r);
  return AllGather(&mine, all.data(), offsets, what);
}

absl::StatusOr<DistributedRun> DistributedRun::Start() {
  STRATA_ASSIGN_OR_RETURN(
      std::unique_ptr<train::Collectives> c,
      train::MakeMpiCollectives(absl::GetFlag(FLAGS_collective_timeout)));
  return DistributedRun(std::move(c));
}

namespace {

// CheckSameRun's key for the outputs asked (--json, --timeline, --plot).
constexpr char kOutputsKey[] = " outputs";

// The output flags given to this rank: {"json": "a.json", ...}, the ones
// given only.
nlohmann::json AskedOutputs() {
  nlohmann::json asked = nlohmann::json::object();
  for (const char* name : {"json", "timeline", "plot"}) {
    const absl::CommandLineFlag* f = absl::FindCommandLineFlag(name);
    if (f != nullptr && !f->CurrentValue().empty()) {
      asked[name] = f->CurrentValue();
    }
  }
  return asked;
}

// InvalidArgument when rank `rank` was given an output flag that rank 0 was
// not given with the same value: it would never be written. Rank 0's own
// outputs need nothing of the others.
absl::Status CheckOutputs(int rank, const nlohmann::json& theirs,
                          const nlohmann::json& rank0) {
  for (const auto& item : theirs.items()) {
    const std::string name = item.key();
    const std::string value = item.value().get<std::string>();
    const std::string zero = rank0.value(name, std::string());
    if (value == zero) continue;
    return absl::InvalidArgumentError(absl::StrFormat(
        "rank %d was given --%s=%s, rank 0 %s: rank 0 alone writes --json, "
        "--timeline and --plot (with every rank's figures inside), so give "
        "them to rank 0 only (mpirun's ranks all get the same flags unless "
        "you launch them apart with ':')",
        rank, name, value,
        zero.empty() ? absl::StrCat("no --", name)
                     : absl::StrCat("--", name, "=", zero)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status DistributedRun::CheckSameRun(nlohmann::json config,
                                          int blas_threads) const {
  // What may differ from rank to rank: where its tiers are and how big, the
  // data's path, how long it waits. Nothing of these changes a number.
  for (const char* own :
       {"nvme_dir", "data_dir", "device_budget", "host_budget", "nvme_budget",
        "io_engine", "queue_depth", "block_size", "machine_profile",
        "collective_timeout"}) {
    config.erase(own);
  }
  config["OPENBLAS_NUM_THREADS"] = blas_threads;
  // Rank 0 alone writes the files: an output asked of another rank with a
  // value rank 0 was not given would be silently dropped (CheckOutputs).
  config[kOutputsKey] = AskedOutputs();
  const std::string mine = config.dump();
  STRATA_ASSIGN_OR_RETURN(std::vector<std::string> all,
                          GatherStrings(mine, "the ranks' flags"));
  const nlohmann::json first = nlohmann::json::parse(all[0]);
  for (int r = 1; r < ranks(); ++r) {
    const nlohmann::json other = nlohmann::json::parse(all[r]);
    for (const auto& item : first.items()) {
      // Named copies, not a structured binding: clang 14 cannot capture one.
      const std::string key = item.key();
      const nlohmann::json& value = item.value();
      const nlohmann::json theirs = other.value(key, nlohmann::json());
      if (theirs == value) continue;
      if (key == kOutputsKey) {
        STRATA_RETURN_IF_ERROR(CheckOutputs(r, theirs, value));
        continue;
      }
      auto setting = [&key](const nlohmann::json& v) {
        const std::string text = v.is_string() ? v.get<std::string>()
                                 : v.is_null() ? "(none)"
                                               : v.dump();
        return key == "OPENBLAS_NUM_THREADS" ? key + "=" + text
                                             : "--" + Dashed(key) + "=" + text;
      };
      return absl::InvalidArgumentError(absl::StrFormat(
          "rank %d runs with %s, rank 0 with %s: launch every rank with the "
          "same flags and OPENBLAS_NUM_THREADS (only the tiers' budgets and "
          "directories, --data-dir and --collective-timeout may differ)",
          r, setting(theirs), setting(value)));
    }
  }
  return absl::OkStatus();
}

absl::Status DistributedRun::AllGather(const void* mine, void* all,
                                       std::span<const uint64_t> offsets,
                                       const std::string& what) const {
  STRATA_ASSIGN_OR_RETURN(train::Collectives::Request request,
                          collectives_->StartAllGather(
                              mine, all, offsets, "the all-gather of " + what));
  return collectives_->Wait(request);
}

absl::StatusOr<std::vector<std::string>> DistributedRun::GatherStrings(
    const std::string& mine, const std::string& what) const {
  const uint64_t size = mine.size();
  std::vector<uint64_t> sizes(ranks());
  STRATA_RETURN_IF_ERROR(AllGather(&size, sizes.data(),
                                   EqualOffsets(ranks(), sizeof(size)),
                                   "the sizes of " + what));
  std::vector<uint64_t> offsets = {0};
  for (const uint64_t n : sizes) offsets.push_back(offsets.back() + n);
  std::string joined(offsets.back(), '\0');
  STRATA_RETURN_IF_ERROR(AllGather(mine.data(), joined.data(), offsets, what));
  std::vector<std::string> all;
  for (int r = 0; r < ranks(); ++r) {
    all.push_back(joined.substr(offsets[r], offsets[r + 1] - offsets[r]));
  }
  return all;
}

int DistributedRun::ShareCores() const {
  // The user's count wins: the one-rank reference run needs the same one,
  // since OpenBLAS's sums change with its thread count.
  if (const int asked = LaunchVariable("OPENBLAS_NUM_THREADS", 0); asked > 0) {
    setenv("STRATA_HOST_THREADS", std::to_string(asked).c_str(), 0);
    return asked;
  }
  const int local =
      std::max(1, LaunchVariable("OMPI_COMM_WORLD_LOCAL_SIZE",
                                 LaunchVariable("MPI_LOCALNRANKS", ranks())));
  const int allowed = CoresAllowed();
  // A launcher that bound each rank to its cores has shared them already.
  const bool bound =
      allowed < static_cast<int>(std::thread::hardware_concurrency());
  const int threads = bound ? allowed : std::max(1, allowed / local);
  setenv("STRATA_HOST_THREADS", std::to_string(threads).c_str(),
         /*overwrite=*/0);
  return threads;
}

void DistributedRun::Abort(int code) const {
  std::fflush(stdout);
  std::fflush(stderr);
  train::AbortMpiRun(code);
  std::exit(code);  // not under MPI
}

absl::StatusOr<nlohmann::json> DistributedRun::ReportJson(const Stats& st,
                                                          uint64_t bytes_sent,
                                                          int64_t steps) const {
  RankNumbers mine{};
  for (int t = 0; t < 3; ++t) mine.peak_bytes[t] = st.tiers[t].peak_used_bytes;
  mine.bytes_sent = bytes_sent;
  std::vector<RankNumbers> all(ranks());
  STRATA_RETURN_IF_ERROR(AllGather(&mine, all.data(),
                                   EqualOffsets(ranks(), sizeof(mine)),
                                   "the ranks' report"));
  nlohmann::json per_rank = nlohmann::json::array();
  for (int r = 0; r < ranks(); ++r) {
    const RankNumbers& n = all[r];
    per_rank.push_back(
        {{"rank", r},
         {"peak_device_bytes", n.peak_bytes[0]},
         {"peak_host_bytes", n.peak_bytes[1]},
         {"peak_nvme_bytes", n.peak_bytes[2]},
         {"bytes_sent", n.bytes_sent},
         {"bytes_sent_per_step", steps > 0 ? n.bytes_sent / steps : 0}});
  }
  return nlohmann::json{
      {"ranks", ranks()},
      {"transport", model_transport_},
      {"reference",
       "bit for bit: one rank with --accumulate x ranks micro-batches and "
       "the same OpenBLAS threads (OPENBLAS_NUM_THREADS)"},
      {"per_rank", per_rank}};
}

}  // namespace strata
