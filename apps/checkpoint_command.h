// checkpoint_command.h: the checkpoint flags of `strata train` (--save-dir,
// --save-every, --keep, --resume), the saves of one run and their report,
// and `strata export CHECKPOINT --safetensors FILE`.
#ifndef STRATA_APPS_CHECKPOINT_COMMAND_H_
#define STRATA_APPS_CHECKPOINT_COMMAND_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "strata/store.h"
#include "train/io/checkpoint_reader.h"
#include "train/io/checkpoint_writer.h"
#include "train/run/train_checkpoint.h"

namespace strata {

// The directories a --save-dir created, leaf first; on destruction each is
// removed while it is empty (its `.lock` aside, in the leaf): a run refused
// or failed before its first save leaves no directory behind. rmdir removes
// only empty directories, so whatever another run or rank put there stays.
class CreatedSaveDirs {
 public:
  explicit CreatedSaveDirs(std::vector<std::string> leaf_first)
      : dirs_(std::move(leaf_first)) {}
  ~CreatedSaveDirs();
  CreatedSaveDirs(const CreatedSaveDirs&) = delete;
  CreatedSaveDirs& operator=(const CreatedSaveDirs&) = delete;

 private:
  std::vector<std::string> dirs_;
};

// The checkpoints of one `strata train` run. Not thread-safe.
class RunCheckpoints {
 public:
  // From the flags; InvalidArgument for --save-every < 0, --keep < 1, or
  // --save-every without --save-dir. `rank_dir`: one rank of a sharded run
  // ("rank-R-of-N"), whose saves go to --save-dir/rank_dir and whose resume
  // comes from --resume/rank_dir (--resume then names a save dir, not a
  // step: InvalidArgument).
  static absl::StatusOr<RunCheckpoints> FromFlags(
      const std::string& rank_dir = "");
  // FromFlags's checks of the flags' values alone (the same on every rank:
  // no file is read), for a refusal the ranks of one mpirun print once.
  static absl::Status CheckFlagValues();

  const std::string& resume_path() const { return resume_; }  // "" : fresh
  // The complete checkpoints --resume offers, newest first.
  std::vector<train::CheckpointRef> ResumeCandidates() const;
  // Resumes from `ref`, one of ResumeCandidates, instead of the newest (the
  // newest step every rank of a sharded run saved). The save dir's
  // checkpoints newer than it are renamed *.unmatched (kept, never listed),
  // so that pruning cannot keep them over this run's saves; errno codes
  // when a rename fails.
  absl::Status ResumeFrom(const train::CheckpointRef& ref);
  // Records (and prints) what a resume found.
  void Resumed(const train::Resumed& resumed);
  // The run directory a --resume value names: a step-NNNNNNNN directory's
  // parent, else the value itself ("." for a bare step directory).
  static std::string SaveDirOf(const std::string& resume);

  // After step `step` of `total`: saves `content()` every --save-every steps
  // and after the last, when --save-dir is set. Prints one line per save.
  absl::Status AfterStep(
      Store& store, int64_t step, int64_t total,
      const std::function<train::CheckpointContent()>& content);

  // Report keys: checkpoints [{path, step, bytes, seconds}], resume_source
  // (null for a fresh run), resume_step.
  nlohmann::json ReportJson() const;

  // For a run that failed: where it can go on from ("the newest checkpoint,
  // DIR/step-N, is intact: continue with --resume=DIR"), or "" when
  // --save-dir holds none or the run resumed from that one and saved none.
  std::string ResumeHint() const;

 private:
  RunCheckpoints() = default;
  absl::Status UseRankDirs(const std::string& rank_dir);
  // FailedPrecondition when `dir` holds another run's checkpoints: rank
  // directories of another count than `ranks` (0: an unsharded run), or,
  // for a sharded run, unsharded steps.
  // `flag` ("--save-dir", "--resume") names `dir` in the refusal.
  static absl::Status CheckNoOtherRun(const std::string& dir, int ranks,
                                      const char* flag);
  static absl::Status PrepareSaveDir(const std::string& dir);
  static absl::Status LockSaveDir(const std::string& dir);
  // `flag`: the --save-dir as given (`dir` may be a rank's below it).
  static absl::Status CheckSaveDirIsOurs(const std::string& dir,
                                         const std::string& flag,
                                         const std::string& resume);
  // Why `dir` holds nothing for `rank_dir`, one rank of `ranks_here`.
  static std::string WhatIsThere(const std::string& dir,
                                 const std::string& rank_dir, int ranks_here);

  train::CheckpointSaveOptions save_;
  std::string save_flag_, resume_flag_;  // as given (the rank's dirs below)
  int64_t every_ = 0;
  std::string resume_;
  std::vector<train::SavedCheckpoint> saved_;
  std::string resumed_from_;
  int64_t resumed_step_ = 0;
  // The --save-dir directories this run created, removed when it ends
  // having saved nothing there (shared: the last copy of this object
  // removes them).
  std::shared_ptr<const CreatedSaveDirs> created_;
};

// `strata export CHECKPOINT --safetensors FILE`: returns the exit code
// (0 ok, 1 failed, 2 bad arguments).
int RunExport(const std::string& checkpoint);

}  // namespace strata

#endif  // STRATA_APPS_CHECKPOINT_COMMAND_H_
