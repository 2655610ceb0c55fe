// safetensors.h: exports a checkpoint's model parameters as a .safetensors
// file (Hugging Face's format), so PyTorch users can load strata-trained
// weights with safetensors.torch.load_file.
//
// The format: an 8-byte little-endian header length N; N bytes of JSON, an
// object mapping each tensor name to {"dtype", "shape", "data_offsets":
// [begin, end)} with offsets relative to the data that follows, plus an
// optional "__metadata__" of string values; padded with spaces so the data
// starts 8-byte aligned; then the tensors' raw little-endian bytes, back to
// back in the header's order.
#ifndef STRATA_TRAIN_RUN_SAFETENSORS_H_
#define STRATA_TRAIN_RUN_SAFETENSORS_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace strata::train {

struct SafetensorsExport {
  int tensors = 0;     // parameters written
  uint64_t bytes = 0;  // size of the file
  int64_t step = 0;    // of the checkpoint exported (a sharded run's: the
                       // newest every rank saved)
};

// Writes the parameters (kind "parameter") of the checkpoint at
// `checkpoint` (a step directory, or a --save-dir: its newest; the save dir
// of a sharded MLP run, its rank-R-of-N directories: every rank's slices of
// the newest step all saved, gathered in rank order into whole tensors) to
// `out_path`, named as in the manifest, in its dtype (fp32 today), with
// metadata "format": "pt", "strata.model" and "strata.step". Streams each
// tensor in 1 MiB chunks (memory stays bounded whatever size a manifest
// claims), each verified against its checksum before the file appears
// atomically (temporary + rename). Errors: InvalidArgument when `out_path`
// is inside the checkpoint directory or one of its files;
// FailedPrecondition for one rank's checkpoint (export its save dir), rank
// directories of several runs or not every rank, ranks of different runs;
// NotFound when no step is saved by every rank; DataLoss for a rank's slice
// of the wrong size; those of
// ResolveCheckpoint and CheckpointReader (NotFound; DataLoss naming the file
// and tensor, e.g. for a shape that is negative or overflows); errno codes
// naming `out_path`.
absl::StatusOr<SafetensorsExport> ExportSafetensors(
    const std::string& checkpoint, const std::string& out_path);

}  // namespace strata::train

#endif  // STRATA_TRAIN_RUN_SAFETENSORS_H_
