// distributed_run.h: `strata train --distributed`, one rank of a sharded
// data-parallel run launched by mpirun (train/comm/collectives.h,
// train/model/model_sharding.h): the flags it refuses, the output only rank 0
// writes, the cores each rank's OpenBLAS takes, the ranks' report.
#ifndef STRATA_APPS_DISTRIBUTED_RUN_H_
#define STRATA_APPS_DISTRIBUTED_RUN_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "apps/checkpoint_command.h"
#include "nlohmann/json.hpp"
#include "strata/stats.h"
#include "train/comm/collectives.h"

namespace strata {

class DistributedRun {
 public:
  // Whether --distributed was given.
  static bool Requested();

  // Before MPI starts, the same on every rank, with or without
  // --distributed: InvalidArgument for a flag a sharded run does not take
  // (--resident, a
  // --collective-timeout <= 0) and for --collective-timeout
  // without --distributed. Mutes this process's stdout unless it is rank 0
  // (the launcher's rank variable), so the run prints once. Says on stderr
  // when mpirun started several processes without --distributed, or one
  // with it.
  static absl::Status CheckFlags();

  // This process's rank as the launcher names it (OMPI_COMM_WORLD_RANK,
  // PMI_RANK), before MPI starts; 0 outside a launcher.
  static int LaunchRank();
  // The number of ranks the launcher started (OMPI_COMM_WORLD_SIZE,
  // PMI_SIZE), before MPI starts; 1 outside a launcher.
  static int LaunchSize();

  // Under mpirun with one app context (OMPI_NUM_APP_CTX=1: every rank got
  // the same flags), a rank other than 0 with --distributed: before MPI
  // starts, what it would say of its flags rank 0 says word for word.
  static bool EchoesRankZero();
  // The same, for a command line not yet applied to the flags: `given` says
  // whether it holds --distributed.
  static bool EchoesRankZero(bool given);

  // Before a refusal is printed, before training begins (before or after
  // MPI starts): on a rank that echoes rank 0 (EchoesRankZero) and a
  // refusal of its input (InvalidArgument; NotFound for a file or directory
  // a flag names; ResourceExhausted for budgets the model does not fit),
  // waits for mpirun to end this process, which it does once rank 0 has
  // printed the same refusal and exited or aborted the job, so the run says
  // it once. After 10 s or half of --collective-timeout, whichever is
  // shorter, it returns so the caller prints it: rank 0 may not have refused
  // after all (a file this rank reads differs on its node), and then waits
  // in MPI_Init or its first collective. Returns at once otherwise. Errors
  // of a rank's own files (its checkpoint directory) are not passed here.
  static void AwaitRankZeroRefusal(const absl::Status& refusal);
  // The same for a refusal of the command line itself (an unknown flag, a
  // value that does not parse, --config), met before the flags are set:
  // `given` says whether the command line holds --distributed.
  static void AwaitRankZeroRefusal(const absl::Status& refusal, bool given);

  // The CUDA device of this rank: its local rank on the node
  // (OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID), or 0 when
  // CUDA_VISIBLE_DEVICES gives each rank a single device (NCCL takes one
  // rank per GPU).
  static int CudaDevice();

  // What the model's collectives run over, when it is not collectives()'s
  // (NCCL on GPUs, bootstrapped by MPI): named in the report.
  void set_model_transport(std::string name) {
    model_transport_ = std::move(name);
  }
  const std::string& model_transport() const { return model_transport_; }

  // "rank-R-of-N" from the launcher's variables, before MPI starts: where
  // this rank's checkpoints go in --save-dir (RunCheckpoints::FromFlags).
  static std::string RankDirName();

  // Starts MPI and joins the run. FailedPrecondition when strata was built
  // without MPI; Internal for an MPI error.
  static absl::StatusOr<DistributedRun> Start();

  train::Collectives* collectives() const { return collectives_.get(); }
  int rank() const { return collectives_->rank(); }
  int ranks() const { return collectives_->size(); }

  // The OpenBLAS threads of this rank: OPENBLAS_NUM_THREADS when set, else
  // the cores the launcher bound it to, else the machine's cores divided
  // among its ranks here (at least 1). Also sets STRATA_HOST_THREADS, the
  // host optimizer's pool, when the user has not.
  int ShareCores() const;

  // Collective, every rank, right after Start: InvalidArgument naming the
  // first setting of `config` (the run's effective flags, EffectiveConfig)
  // or of `blas_threads` (ShareCores) in which a rank differs from rank 0,
  // or an output flag (--json, --timeline, --plot: rank 0 alone writes
  // them) given to another rank with a value rank 0 was not given.
  // Ranks launched with different flags would otherwise hang, crash inside
  // MPI or train wrong numbers; the tiers' budgets and directories,
  // --data-dir and --collective-timeout may differ.
  absl::Status CheckSameRun(nlohmann::json config, int blas_threads) const;

  // Collective, every rank, after CheckSameRun: points `checkpoints` (made
  // with RankDirName) at the newest step every rank saved, which after a
  // crash during a save may be older than a rank's newest. Internal when
  // the launcher's rank variables are not MPI's; FailedPrecondition, listing
  // each rank's steps, when no step is everywhere; RunCheckpoints::
  // ResumeFrom's errors.
  absl::Status AgreeOnResume(RunCheckpoints& checkpoints) const;
  // Collective: FailedPrecondition when the ranks' checkpoints at `path`
  // were saved with different configurations (rank directories of two runs).
  absl::Status CheckOneRun(const std::string& path) const;

  // Prints each rank's row of ReportJson's object: peaks per tier, bytes
  // sent per step.
  static void PrintRanks(const nlohmann::json& ranks);

  // Collective: returns when every rank has called it (`what` names it in
  // a timeout).
  absl::Status Barrier(const std::string& what) const;

  // Ends the whole run after this rank's error (code: the exit code), so
  // no rank waits for one that is gone. Does not return.
  [[noreturn]] void Abort(int code) const;

  // Collective, every rank: the "distributed" object of the report, each
  // rank's peaks and bytes sent (`st` its store's stats, `bytes_sent` what
  // its `steps` training steps sent).
  absl::StatusOr<nlohmann::json> ReportJson(const Stats& st,
                                            uint64_t bytes_sent,
                                            int64_t steps) const;

 private:
  // One all-gather, started and waited for (collective; Collectives::
  // StartAllGather says what `offsets` are).
  absl::Status AllGather(const void* mine, void* all,
                         std::span<const uint64_t> offsets,
                         const std::string& what) const;

  // Every rank's `mine`, in rank order (collective).
  absl::StatusOr<std::vector<std::string>> GatherStrings(
      const std::string& mine, const std::string& what) const;

  explicit DistributedRun(std::unique_ptr<train::Collectives> c)
      : collectives_(std::move(c)), model_transport_(collectives_->name()) {}
  std::unique_ptr<train::Collectives> collectives_;
  std::string model_transport_;
};

}  // namespace strata

#endif  // STRATA_APPS_DISTRIBUTED_RUN_H_
