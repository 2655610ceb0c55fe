// checkpoint_writer.h: saves a training checkpoint (checkpoint_manifest.h)
// from the store, tensor by tensor, crash-safely.
//
// Streaming: each tensor is acquired on the host tier with a read lease
// (device-homed tensors, or any when the host tier has no room, are read
// through the device by Store::Read), appended to
// tensors.bin and released before the next, so a model homed on NVMe and
// larger than host memory saves within the host budget: at most one tensor
// is held at a time, plus a 1 MiB write buffer.
//
// Crash safety: DIR/step-NNNNNNNN.tmp is written (tensors.bin, then
// manifest.json, each fsync'd), the directory is fsync'd, renamed to
// DIR/step-NNNNNNNN, and DIR is fsync'd. A kill at any point leaves the
// previous checkpoints whole; a leftover *.tmp, *.old, or step directory
// without a manifest (a removal killed midway) is removed by the next save.
// Old checkpoints are renamed aside before they are removed, so a kill
// during pruning never leaves a half-removed one that looks complete.
//
// Call between steps (outside Store::BeginStep/EndStep): the predictor sees
// the save's host-tier reads as a step of their own shape, recorded beside the
// training step's trace, which is kept (Stats::scheduler.rerecords does not
// move), and the next training step finds its own trace on its first acquire.
// Device-homed tensors (a --resident run) are read on the device, where the
// step reads its weights too: the predictor then re-records the step's trace
// (and back after the next step). Nothing moves in such a run, so nothing is
// lost; avoiding it needs an acquire the predictor does not observe.
#ifndef STRATA_TRAIN_IO_CHECKPOINT_WRITER_H_
#define STRATA_TRAIN_IO_CHECKPOINT_WRITER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "strata/store.h"

namespace strata::train {

// What one checkpoint holds (checkpoint_manifest.h names the fields).
struct CheckpointContent {
  std::string model;  // "mlp" or "gpt"
  int64_t step = 0;   // optimizer steps done
  std::map<std::string, std::string> config;
  std::map<std::string, std::string> state;
  // Saved under their store names, in this order (names must be unique).
  std::vector<TensorId> tensors;
};

struct CheckpointSaveOptions {
  std::string dir;  // checkpoints go to dir/step-NNNNNNNN; created if missing
  int keep = 2;     // the newest `keep` checkpoints stay, older are removed
  // Test-only gate: called after each tensor is written, with how many have
  // been. Default: none.
  std::function<void(int tensors_written)> after_tensor;
  // Test-only: the free bytes of a directory. Default: statvfs's f_bavail
  // x f_frsize.
  std::function<absl::StatusOr<uint64_t>(const std::string& dir)> free_bytes;
};

struct SavedCheckpoint {
  std::string path;
  int64_t step = 0;
  uint64_t bytes = 0;  // tensors.bin + manifest.json
  double seconds = 0;  // wall time of the save, fsyncs included
};

// "step-00000120" for step 120.
std::string CheckpointDirName(int64_t step);

// Saves `content` from `store` as options.dir/step-NNNNNNNN (replacing one
// of the same step), then removes all but the newest options.keep.
// Errors: InvalidArgument (keep < 1, empty dir, a duplicate tensor name);
// ResourceExhausted when the file system has less free space than the
// checkpoint needs (the message gives both sizes); the store's errors
// (NotFound, DataLoss, Unavailable); errno codes naming the file. On an
// error the previous checkpoints are untouched and the partial one removed.
absl::StatusOr<SavedCheckpoint> SaveCheckpoint(
    Store& store, const CheckpointContent& content,
    const CheckpointSaveOptions& options);

}  // namespace strata::train

#endif  // STRATA_TRAIN_IO_CHECKPOINT_WRITER_H_
