// checkpoint_manifest.h: what a training checkpoint holds and how its
// manifest reads and writes.
//
// A checkpoint is a directory DIR/step-NNNNNNNN holding two files:
//   tensors.bin    every saved tensor's bytes, back to back, in manifest order
//                  (little-endian, as the store holds them);
//   manifest.json  the format and version, the model ("mlp" or "gpt"), the
//                  step (optimizer steps done), the effective configuration
//                  (flag name -> value), the trainer's state (step counters,
//                  RNG states, data position: name -> value), and for each
//                  tensor its name, kind, dtype, shape, byte offset and size
//                  in tensors.bin and its XXH3-64 checksum.
// Values in `config` and `state` are strings so that 64-bit integers (RNG
// states) and doubles (as %.17g) survive JSON exactly.
#ifndef STRATA_TRAIN_IO_CHECKPOINT_MANIFEST_H_
#define STRATA_TRAIN_IO_CHECKPOINT_MANIFEST_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "strata/tensor.h"

namespace strata::train {

inline constexpr char kCheckpointFormat[] = "strata-checkpoint";
inline constexpr int kCheckpointVersion = 1;
inline constexpr char kManifestFile[] = "manifest.json";
inline constexpr char kTensorsFile[] = "tensors.bin";

struct CheckpointTensorEntry {
  std::string name;  // the store tensor's name ("layer0.weight", "wte", ...)
  TensorKind kind = TensorKind::kParameter;
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;
  uint64_t offset = 0;  // byte offset in tensors.bin
  uint64_t bytes = 0;
  uint64_t xxh3 = 0;  // XXH3-64 of the bytes, seed 0
};

struct CheckpointManifest {
  std::string model;  // "mlp" or "gpt"
  int64_t step = 0;   // optimizer steps done when saved
  std::map<std::string, std::string> config;
  std::map<std::string, std::string> state;
  std::vector<CheckpointTensorEntry> tensors;
  uint64_t data_bytes = 0;  // size of tensors.bin
};

// The manifest as JSON text.
std::string EncodeManifest(const CheckpointManifest& manifest);

// Parses manifest JSON read from `path` (named in errors). DataLoss for text
// that is not a manifest of this format and version (truncated, corrupted,
// an unknown dtype, offsets that overlap or leave tensors.bin).
absl::StatusOr<CheckpointManifest> DecodeManifest(const std::string& text,
                                                  const std::string& path);

// `text` with its "xxh3" set to the checksum of its other keys (compact,
// as EncodeManifest writes it), for tools that make manifests by hand (the
// fuzz targets: a mutated manifest then reaches the checks after the
// checksum's). `text` itself when it is not a JSON object.
std::string ResealManifest(const std::string& text);

// "F32", "F16", "BF16", "I32", "U8": the names safetensors uses.
const char* DTypeCode(DType dtype);

// The entry named `name`, or null.
const CheckpointTensorEntry* FindEntry(const CheckpointManifest& manifest,
                                       const std::string& name);

}  // namespace strata::train

#endif  // STRATA_TRAIN_IO_CHECKPOINT_MANIFEST_H_
