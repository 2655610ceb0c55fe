// checkpoint_reader.h: finds, verifies and reads back the checkpoints that
// checkpoint_writer.h saves: the newest complete one in a directory, its
// manifest, each tensor checked against its XXH3 checksum, the configuration
// compared with this run's, and the tensors restored into a store.
//
// Nothing is loaded silently: a checkpoint whose manifest is damaged, whose
// tensors.bin is shorter than the manifest says, or whose tensor bytes do not
// match their checksum is refused with DataLoss naming the file and tensor.
#ifndef STRATA_TRAIN_IO_CHECKPOINT_READER_H_
#define STRATA_TRAIN_IO_CHECKPOINT_READER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "strata/store.h"
#include "train/io/checkpoint_manifest.h"

namespace strata::train {

struct CheckpointRef {
  int64_t step = 0;
  std::string path;  // dir/step-NNNNNNNN
};

// The complete checkpoints in `dir` (step-NNNNNNNN directories holding a
// manifest.json; never a *.tmp one), newest first. Empty when there are none
// or `dir` does not exist.
std::vector<CheckpointRef> ListCheckpoints(const std::string& dir);

// A sharded run's rank directory inside a --save-dir ("rank-R-of-N"): each
// rank saves its slices there (apps/distributed_run.h).
std::string RankDirName(int rank, int ranks);
struct RankDir {
  int rank = 0, ranks = 0;
  std::string path;  // dir/rank-R-of-N
};
// The rank directories in `dir`, by rank (then rank count); empty when
// there are none.
std::vector<RankDir> ListRankDirs(const std::string& dir);

// `path` itself when it holds a manifest.json, else the newest complete
// checkpoint in it. NotFound, naming `path`, when there is none;
// FailedPrecondition when it holds a sharded run's rank directories
// (rank-R-of-N), naming how to resume or export them.
absl::StatusOr<std::string> ResolveCheckpoint(const std::string& path);

// One checkpoint open for reading. Thread-compatible: ReadTensor may run on
// many threads at once (pread).
class CheckpointReader {
 public:
  // Reads and checks the manifest of `checkpoint` (a step directory) and
  // opens its tensors.bin. NotFound when either file is missing; DataLoss
  // for a damaged manifest or a tensors.bin shorter or longer than the
  // manifest says (naming the first tensor it cuts).
  static absl::StatusOr<std::unique_ptr<CheckpointReader>> Open(
      const std::string& checkpoint);
  ~CheckpointReader();
  CheckpointReader(const CheckpointReader&) = delete;
  CheckpointReader& operator=(const CheckpointReader&) = delete;

  const CheckpointManifest& manifest() const { return manifest_; }
  const std::string& path() const { return path_; }

  // Reads `entry`'s bytes (entry.bytes of them) into `dst` and verifies
  // their checksum. DataLoss naming tensors.bin and the tensor on a
  // mismatch; errno codes on a failed read.
  absl::Status ReadTensor(const CheckpointTensorEntry& entry, void* dst) const;
  // As ReadTensor, in chunks of at most 1 MiB handed to `sink` as they are
  // read (memory stays bounded whatever the manifest says the tensor's size
  // is). The checksum is known only after the last chunk: a caller must not
  // publish what it sank before this returns OK. Stops at the first error
  // of `sink`, and returns it.
  absl::Status ReadTensorChunks(
      const CheckpointTensorEntry& entry,
      const std::function<absl::Status(std::string_view)>& sink) const;

 private:
  // DataLoss naming the tensor unless `sum` is its checksum.
  absl::Status CheckSum(const CheckpointTensorEntry& entry, uint64_t sum) const;

  CheckpointReader(std::string path, CheckpointManifest manifest, int fd)
      : path_(std::move(path)), manifest_(std::move(manifest)), fd_(fd) {}

  const std::string path_;
  const CheckpointManifest manifest_;
  const int fd_;
};

// Writes each checkpoint tensor into the store tensor of the same name among
// `tensors` (one tensor in memory at a time: a host-tier overwrite lease
// filled straight from the file; device-homed tensors, or any when the host
// tier has no room, through Store::Write).
// InvalidArgument when a name is missing on either side or a dtype or shape
// differs (the message says which); ReadTensor's and the store's errors.
absl::Status RestoreTensors(const CheckpointReader& reader, Store& store,
                            const std::vector<TensorId>& tensors);

// Compares the configuration saved in `reader`'s checkpoint with this run's
// (flag name -> value). A key of `must_match` that differs, or that either
// side lacks, is InvalidArgument listing every such difference
// ("--width: checkpoint 1024, this run 512"); other differing keys are
// returned, one line each, for a warning. A key the checkpoint lacks takes
// its value in `absent` when there is one (a setting added after the
// checkpoint was written, at what it was then).
absl::StatusOr<std::vector<std::string>> CompareConfig(
    const CheckpointReader& reader,
    const std::map<std::string, std::string>& run,
    const std::vector<std::string>& must_match,
    const std::map<std::string, std::string>& absent = {});

}  // namespace strata::train

#endif  // STRATA_TRAIN_IO_CHECKPOINT_READER_H_
