// checkpoint_command.cc: checkpoint flags, saves and `strata export` (see
// checkpoint_command.h).
#include "apps/checkpoint_command.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "apps/cli/exit_code.h"
#include "apps/cli/store_flags.h"
#include "apps/distributed_run.h"
#include "base/byte_size.h"
#include "strata/status.h"
#include "train/io/atomic_file.h"
#include "train/io/checkpoint_reader.h"
#include "train/run/safetensors.h"

ABSL_FLAG(std::string, save_dir, "",
          "Save checkpoints to DIR/step-NNNNNNNN (every "
          "--save-every steps and at the end; a --distributed rank to "
          "DIR/rank-R-of-N/step-NNNNNNNN); empty: no checkpoints (a "
          "--resume without it saves none).");
ABSL_FLAG(int64_t, save_every, 0,
          "Save a checkpoint every N steps (0: only at the "
          "end); needs --save-dir.");
ABSL_FLAG(int32_t, keep, 2,
          "Checkpoints kept in --save-dir, newest first; older "
          "ones are removed after each save (a --distributed rank keeps "
          "one more, so a crash between the ranks' saves leaves a step "
          "every rank holds).");
ABSL_FLAG(std::string, resume, "",
          "Continue from the newest complete checkpoint in "
          "this directory (or this step directory), with the same flags: the "
          "losses are then bitwise those of the uninterrupted run.");
ABSL_FLAG(std::string, safetensors, "",
          "Write the checkpoint's parameters to this "
          ".safetensors file.");

namespace strata {
namespace {

// `dir` and those of its parents that do not exist yet, leaf first.
std::vector<std::string> MissingDirs(const std::string& dir) {
  std::vector<std::string> missing;
  std::error_code error;
  for (std::filesystem::path p = std::filesystem::absolute(dir, error);
       !p.empty() && !std::filesystem::exists(p, error); p = p.parent_path()) {
    missing.push_back(p.string());
    if (p == p.parent_path()) break;
  }
  return missing;
}

}  // namespace

CreatedSaveDirs::~CreatedSaveDirs() {
  if (dirs_.empty()) return;
  const std::filesystem::path leaf = dirs_.front();
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(leaf, error)) {
    if (entry.path().filename() != ".lock") return;  // something was saved
  }
  if (error) return;
  ::unlink((leaf / ".lock").c_str());
  for (const std::string& d : dirs_) {
    if (::rmdir(d.c_str()) != 0) break;
  }
}

absl::StatusOr<RunCheckpoints> RunCheckpoints::FromFlags(
    const std::string& rank_dir) {
  RunCheckpoints r;
  r.save_flag_ = r.save_.dir = absl::GetFlag(FLAGS_save_dir);
  r.save_.keep = absl::GetFlag(FLAGS_keep);
  r.every_ = absl::GetFlag(FLAGS_save_every);
  r.resume_flag_ = r.resume_ = absl::GetFlag(FLAGS_resume);
  STRATA_RETURN_IF_ERROR(CheckFlagValues());
  if (!rank_dir.empty()) STRATA_RETURN_IF_ERROR(r.UseRankDirs(rank_dir));
  // Sharded ranks prune on their own, before they know the others' saves
  // are done: one more kept means a crash during one round still leaves a
  // step every rank holds.
  if (!rank_dir.empty()) ++r.save_.keep;
  // A --resume with nothing to resume from is refused before any work (the
  // corpus, the model) and before the save dir is created or locked.
  if (!r.resume_.empty()) {
    if (absl::Status s = train::ResolveCheckpoint(r.resume_).status();
        !s.ok()) {
      return absl::Status(s.code(), absl::StrCat("--resume: ", s.message()));
    }
  }
  if (!r.save_.dir.empty()) {
    if (rank_dir.empty()) {
      STRATA_RETURN_IF_ERROR(CheckNoOtherRun(r.save_.dir, 0, "--save-dir"));
    }
    std::vector<std::string> missing = MissingDirs(r.save_.dir);
    STRATA_RETURN_IF_ERROR(PrepareSaveDir(r.save_.dir));
    if (!missing.empty()) {
      r.created_ = std::make_shared<CreatedSaveDirs>(std::move(missing));
    }
    STRATA_RETURN_IF_ERROR(LockSaveDir(r.save_.dir));
    STRATA_RETURN_IF_ERROR(
        CheckSaveDirIsOurs(r.save_.dir, r.save_flag_, r.resume_));
  }
  return r;
}

absl::Status RunCheckpoints::CheckFlagValues() {
  const int64_t every = absl::GetFlag(FLAGS_save_every);
  const int64_t keep = absl::GetFlag(FLAGS_keep);
  if (every < 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--save-every=%d: give the steps between saves, >= 0 (0: only at the "
        "end)",
        every));
  }
  if (keep < 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--keep=%d: give how many checkpoints to keep, >= 1", keep));
  }
  if (absl::GetFlag(FLAGS_save_dir).empty()) {
    if (every > 0) {
      return absl::InvalidArgumentError(
          "--save-every needs --save-dir=DIR (where the checkpoints go)");
    }
    if (FlagGiven("keep")) {
      return absl::InvalidArgumentError(
          "--keep needs --save-dir=DIR (it says how many of the checkpoints "
          "saved there to keep)");
    }
  }
  return absl::OkStatus();
}

// A sharded run's rank saves and resumes in its own subdirectory: its
// tensors are its shards.
absl::Status RunCheckpoints::UseRankDirs(const std::string& rank_dir) {
  int rank = 0, ranks = 0;
  std::sscanf(rank_dir.c_str(), "rank-%d-of-%d", &rank, &ranks);
  if (!save_.dir.empty()) {
    STRATA_RETURN_IF_ERROR(CheckNoOtherRun(save_.dir, ranks, "--save-dir"));
    save_.dir += "/" + rank_dir;
  }
  if (resume_.empty()) return absl::OkStatus();
  std::error_code error;
  if (std::filesystem::exists(resume_ + "/manifest.json", error)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--resume=%s is one checkpoint; a --distributed run resumes from the "
        "--save-dir its ranks saved into (each rank takes its %s there)",
        resume_flag_, rank_dir));
  }
  resume_ += "/" + rank_dir;
  if (!train::ResolveCheckpoint(resume_).ok()) {
    return absl::NotFoundError(absl::StrFormat(
        "--resume=%s holds no checkpoint of this rank (%s): %s", resume_flag_,
        resume_, WhatIsThere(resume_flag_, rank_dir, ranks)));
  }
  // Another run's directories beside this one's: export would refuse it.
  return CheckNoOtherRun(resume_flag_, ranks, "--resume");
}

// Why a save dir holds nothing for rank directory `rank_dir`: what it does
// hold, and what would resume it.
std::string RunCheckpoints::WhatIsThere(const std::string& dir,
                                        const std::string& rank_dir,
                                        int ranks_here) {
  const std::vector<train::RankDir> ranks = train::ListRankDirs(dir);
  for (const train::RankDir& r : ranks) {
    if (train::RankDirName(r.rank, r.ranks) == rank_dir) {
      return "its directory is there but holds no complete checkpoint (the "
             "run stopped before this rank's first save?): start again "
             "without --resume";
    }
  }
  for (const train::RankDir& r : ranks) {
    if (r.ranks != ranks_here) continue;
    return absl::StrFormat(
        "the other ranks' directories of this %d-rank run are there, this "
        "rank's is not (moved or deleted?): put %s back, or start again "
        "without --resume",
        ranks_here, rank_dir);
  }
  if (!ranks.empty()) {
    return absl::StrFormat(
        "it holds a %d-rank run's directories; resume it with mpirun -np %d",
        ranks.back().ranks, ranks.back().ranks);
  }
  if (!train::ListCheckpoints(dir).empty()) {
    return "it holds an unsharded run's checkpoints, which resume without "
           "--distributed";
  }
  return "give the --save-dir of a --distributed run (the directory holding "
         "its rank-R-of-N directories)";
}

// A save dir holds one run: another rank count's directories or an
// unsharded run's steps would make it unexportable and unresumable.
absl::Status RunCheckpoints::CheckNoOtherRun(const std::string& dir, int ranks,
                                             const char* flag) {
  const bool resume = std::string(flag) == "--resume";
  const char* advice =
      resume ? "move the other run's out of it" : "choose another --save-dir";
  for (const train::RankDir& r : train::ListRankDirs(dir)) {
    if (r.ranks == ranks) continue;  // this run's
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s=%s holds %s, a %d-rank run's: one save dir holds one run; %s "
        "(to continue that run, launch it with mpirun -np %d)",
        flag, dir, r.path, r.ranks, advice, r.ranks));
  }
  const std::vector<train::CheckpointRef> steps = train::ListCheckpoints(dir);
  if (ranks > 0 && !steps.empty()) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s=%s holds %s, an unsharded run's: one save dir holds one run; %s",
        flag, dir, steps.front().path, advice));
  }
  return absl::OkStatus();
}

std::vector<train::CheckpointRef> RunCheckpoints::ResumeCandidates() const {
  return resume_.empty() ? std::vector<train::CheckpointRef>{}
                         : train::ListCheckpoints(resume_);
}

absl::Status RunCheckpoints::ResumeFrom(const train::CheckpointRef& ref) {
  resume_ = ref.path;
  if (save_.dir.empty()) return absl::OkStatus();
  for (const train::CheckpointRef& newer : train::ListCheckpoints(save_.dir)) {
    if (newer.step <= ref.step) continue;
    std::string aside = newer.path + ".unmatched";
    std::error_code taken;
    for (int k = 2; std::filesystem::exists(aside, taken); ++k) {
      aside = absl::StrFormat("%s.unmatched-%d", newer.path, k);
    }
    if (std::rename(newer.path.c_str(), aside.c_str()) != 0) {
      return absl::ErrnoToStatus(
          errno, absl::StrFormat("cannot rename %s to %s (move it out of "
                                 "--save-dir, then resume)",
                                 newer.path, aside));
    }
    std::fputs(absl::StrFormat("strata train: %s is newer than the step "
                               "every rank saved (%d): renamed %s, kept\n",
                               newer.path, ref.step, aside)
                   .c_str(),
               stderr);
  }
  return absl::OkStatus();
}

// One run saves into a directory at a time: a second would delete the
// first's checkpoints in progress (its cleanup removes *.tmp) and prune its
// saves. The lock is an flock on DIR/.lock, held until the process exits
// (the kernel drops it even after kill -9).
absl::Status RunCheckpoints::LockSaveDir(const std::string& dir) {
  const std::string path = dir + "/.lock";
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    return absl::PermissionDeniedError(
        absl::StrFormat("--save-dir=%s: cannot create its lock file %s: %s",
                        dir, path, std::strerror(errno)));
  }
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    ::close(fd);
    return absl::FailedPreconditionError(absl::StrFormat(
        "--save-dir=%s: another strata run is saving there; wait for it or "
        "choose another directory",
        dir));
  }
  return absl::OkStatus();  // fd stays open: the lock lasts the process
}

// Pruning keeps the highest step numbers, so a run whose saves would be
// older than checkpoints already in the directory would lose its own saves
// to them. Refused up front: continue the newest (--resume=DIR), or save
// elsewhere.
absl::Status RunCheckpoints::CheckSaveDirIsOurs(const std::string& dir,
                                                const std::string& flag,
                                                const std::string& resume) {
  const std::vector<train::CheckpointRef> there = train::ListCheckpoints(dir);
  if (there.empty()) return absl::OkStatus();
  const train::CheckpointRef& newest = there.front();
  if (resume.empty()) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "--save-dir=%s already holds checkpoints of another run (newest: "
        "step %d%s); continue it with --resume=%s, or choose an empty "
        "--save-dir",
        flag, newest.step, dir == flag ? "" : ", in " + dir, flag));
  }
  absl::StatusOr<std::string> from = train::ResolveCheckpoint(resume);
  if (!from.ok()) return from.status();
  std::error_code error;
  if (std::filesystem::equivalent(*from, newest.path, error)) {
    return absl::OkStatus();
  }
  return absl::FailedPreconditionError(absl::StrFormat(
      "--save-dir=%s holds %s, newer than the checkpoint resumed (%s): this "
      "run's saves would be pruned in its favour; resume from the newest or "
      "save into another --save-dir",
      dir, newest.path, *from));
}

// Creates the save directory (and its parents) now, so that a path that
// cannot hold checkpoints is refused before the run, not at its first save.
absl::Status RunCheckpoints::PrepareSaveDir(const std::string& dir) {
  std::error_code is_dir;
  if (std::filesystem::exists(dir, is_dir) &&
      !std::filesystem::is_directory(dir, is_dir)) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "--save-dir=%s is a file, not a directory; choose another", dir));
  }
  if (absl::Status made = train::MakeDirectories(dir); !made.ok()) {
    return absl::Status(made.code(),
                        absl::StrCat("--save-dir: ", made.message()));
  }
  std::error_code error;
  if (!std::filesystem::is_directory(dir, error) ||
      ::access(dir.c_str(), W_OK | X_OK) != 0) {
    return absl::PermissionDeniedError(absl::StrFormat(
        "--save-dir=%s: not a directory this user can write; choose another",
        dir));
  }
  return absl::OkStatus();
}

// The run directory a --resume names: a step directory's parent (saving
// into a step directory would nest checkpoints in a checkpoint).
std::string RunCheckpoints::SaveDirOf(const std::string& resume) {
  const std::filesystem::path path(resume);
  const std::filesystem::path leaf =
      path.has_filename() ? path.filename() : path.parent_path().filename();
  if (leaf.string().rfind("step-", 0) != 0) return resume;
  const std::filesystem::path run = path.has_filename()
                                        ? path.parent_path()
                                        : path.parent_path().parent_path();
  return run.empty() ? std::string(".") : run.string();
}

void RunCheckpoints::Resumed(const train::Resumed& resumed) {
  resumed_from_ = resumed.path;
  resumed_step_ = resumed.step;
  absl::PrintF("strata train: resuming from %s (step %d)\n", resumed.path,
               resumed.step);
  // Said once the run resumes: a refusal of the flags comes alone.
  if (save_.dir.empty() && DistributedRun::LaunchRank() == 0) {
    std::fprintf(stderr,
                 "strata train: --resume without --save-dir: this run saves "
                 "no checkpoints (add --save-dir=%s to go on saving there)\n",
                 SaveDirOf(resume_flag_).c_str());
  }
  for (const std::string& w : resumed.warnings) {
    std::fprintf(stderr,
                 "strata train: warning: %s (the resumed run will not match "
                 "the uninterrupted one bit for bit)\n",
                 w.c_str());
  }
  std::fflush(stdout);
}

absl::Status RunCheckpoints::AfterStep(
    Store& store, int64_t step, int64_t total,
    const std::function<train::CheckpointContent()>& content) {
  if (save_.dir.empty()) return absl::OkStatus();
  const bool due = (every_ > 0 && step % every_ == 0) || step == total;
  if (!due) return absl::OkStatus();
  STRATA_ASSIGN_OR_RETURN(train::SavedCheckpoint saved,
                          train::SaveCheckpoint(store, content(), save_));
  std::fprintf(stderr, "checkpoint %s: %s in %.2f s\n", saved.path.c_str(),
               FormatByteSize(saved.bytes).c_str(), saved.seconds);
  saved_.push_back(saved);
  return absl::OkStatus();
}

nlohmann::json RunCheckpoints::ReportJson() const {
  nlohmann::json list = nlohmann::json::array();
  for (const train::SavedCheckpoint& s : saved_) {
    list.push_back({{"path", s.path},
                    {"step", s.step},
                    {"bytes", s.bytes},
                    {"seconds", s.seconds}});
  }
  return {
      {"checkpoints", list},
      {"resume_source", resumed_from_.empty() ? nlohmann::json(nullptr)
                                              : nlohmann::json(resumed_from_)},
      {"resume_step", resumed_step_}};
}

std::string RunCheckpoints::ResumeHint() const {
  if (save_.dir.empty()) return "";
  const std::vector<train::CheckpointRef> there =
      train::ListCheckpoints(save_.dir);
  if (there.empty()) return "";
  // This run resumed from it and saved nothing: the hint would repeat the
  // command that just failed.
  std::error_code error;
  if (saved_.empty() && !resumed_from_.empty() &&
      std::filesystem::equivalent(there.front().path, resumed_from_, error)) {
    return "";
  }
  if (save_.dir != save_flag_) {  // a rank's directory of a sharded run
    return absl::StrFormat(
        "this rank's newest checkpoint, %s (step %d), is intact (another "
        "rank's may be older): --resume=%s resumes every rank from the "
        "newest step all of them saved, once the cause is fixed",
        there.front().path, there.front().step, save_flag_);
  }
  return absl::StrFormat(
      "the newest checkpoint, %s (step %d), is intact: continue with "
      "--resume=%s once the cause is fixed",
      there.front().path, there.front().step, save_flag_);
}

int RunExport(const std::string& checkpoint) {
  const std::string out = absl::GetFlag(FLAGS_safetensors);
  if (checkpoint.empty() || out.empty()) {
    std::fputs(
        "strata export: usage: strata export CHECKPOINT --safetensors=FILE "
        "(CHECKPOINT: a --save-dir, for its newest checkpoint — a sharded "
        "run's gathers its ranks' slices — or one step-NNNNNNNN "
        "directory)\n",
        stderr);
    return 2;
  }
  absl::StatusOr<train::SafetensorsExport> done =
      train::ExportSafetensors(checkpoint, out);
  if (!done.ok()) {
    std::fprintf(stderr, "strata export: %s\n",
                 ErrorText(done.status()).c_str());
    return ExitCodeBeforeRun(done.status());
  }
  absl::PrintF("strata export: step %d, %d parameter tensors, %s -> %s\n",
               done->step, done->tensors, FormatByteSize(done->bytes), out);
  return 0;
}

}  // namespace strata
