// safetensors_header.h: reads the header of a .safetensors file (Hugging
// Face's format) and checks it by the format's rules, as the reference
// implementation (huggingface/safetensors, `SafeTensors::read_metadata`)
// does: the file a strata export writes is read back by the same rules
// PyTorch users' loaders apply.
//
// The format: an 8-byte little-endian header length N (at most
// kMaxSafetensorsHeaderBytes); N bytes of UTF-8 JSON, an object mapping each
// tensor name to {"dtype", "shape", "data_offsets": [begin, end]} with
// offsets relative to the data after the header, plus an optional
// "__metadata__" object of string values; trailing spaces pad it. The
// tensors' data must tile the rest of the file: sorted by offset, each
// begins where the one before ends, the first at 0, the last at its end, and
// each holds exactly shape's element count times its dtype's size.
#ifndef STRATA_TRAIN_IO_SAFETENSORS_HEADER_H_
#define STRATA_TRAIN_IO_SAFETENSORS_HEADER_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace strata::train {

// The reference implementation's limit on N (100 MB): a larger length is
// damage, not a header.
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;

struct SafetensorsTensor {
  std::string name;
  std::string dtype;  // "F32", "BF16", ... (the format's codes)
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  // [begin, end) in the data, bytes
};

struct SafetensorsHeader {
  uint64_t header_bytes = 0;               // N
  uint64_t data_bytes = 0;                 // the file's size less 8 + N
  std::vector<SafetensorsTensor> tensors;  // by data offset
  std::map<std::string, std::string> metadata;
};

// The size of one element of a safetensors dtype code in bytes ("BOOL",
// "U8", "I8", "F8_E5M2", "F8_E4M3": 1; "I16", "U16", "F16", "BF16": 2;
// "I32", "U32", "F32": 4; "I64", "U64", "F64": 8); 0 for an unknown code.
int SafetensorsDTypeSize(std::string_view dtype);

// Checks the header `json` (N bytes, padding included) of a file whose data
// after the header is `data_bytes` long. DataLoss naming `path` and the
// tensor for JSON that is not such an object, an unknown dtype, a negative
// shape, an element count or byte size that overflows 64 bits, offsets that
// disagree with the size, or data that does not tile [0, data_bytes).
absl::StatusOr<SafetensorsHeader> DecodeSafetensorsHeader(
    std::string_view json, uint64_t data_bytes, const std::string& path);

// Reads and checks the header of the file at `path` (never more of it than
// the header). NotFound for a missing file; errno codes naming it when it
// cannot be read; DataLoss for a file shorter than 8 bytes, a length over
// kMaxSafetensorsHeaderBytes or past the file's end, and
// DecodeSafetensorsHeader's.
absl::StatusOr<SafetensorsHeader> ReadSafetensorsHeader(
    const std::string& path);

}  // namespace strata::train

#endif  // STRATA_TRAIN_IO_SAFETENSORS_HEADER_H_
