// safetensors.cc: checkpoint parameters -> .safetensors (see safetensors.h).
#include "train/safetensors.h"

#include <algorithm>
#include <memory>
#include <nlohmann/json.hpp>
#include <string_view>
#include <vector>

#include "absl/strings/str_format.h"
#include "strata/status.h"
#include "train/atomic_file.h"
#include "train/checkpoint_reader.h"

namespace strata::train {
namespace {

constexpr uint64_t kChunkBytes = uint64_t{1} << 20;

}  // namespace

absl::StatusOr<SafetensorsExport> ExportSafetensors(
    const std::string& checkpoint, const std::string& out_path) {
  STRATA_ASSIGN_OR_RETURN(std::string path, ResolveCheckpoint(checkpoint));
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<CheckpointReader> reader,
                          CheckpointReader::Open(path));
  const CheckpointManifest& m = reader->manifest();
  // Insertion order: the header lists the tensors in the data's order.
  nlohmann::ordered_json header;
  header["__metadata__"] = {{"format", "pt"},
                            {"strata.model", m.model},
                            {"strata.step", absl::StrFormat("%d", m.step)}};
  std::vector<const CheckpointTensorEntry*> params;
  uint64_t end = 0;
  for (const CheckpointTensorEntry& e : m.tensors) {
    if (e.kind != TensorKind::kParameter) continue;
    header[e.name] = {{"dtype", DTypeCode(e.dtype)},
                      {"shape", e.shape},
                      {"data_offsets", {end, end + e.bytes}}};
    end += e.bytes;
    params.push_back(&e);
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  const uint64_t n = text.size();
  char length[8];
  for (int i = 0; i < 8; ++i) length[i] = static_cast<char>(n >> (8 * i));
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<AtomicFileWriter> out,
                          AtomicFileWriter::Create(out_path));
  STRATA_RETURN_IF_ERROR(out->Append(std::string_view(length, 8)));
  STRATA_RETURN_IF_ERROR(out->Append(text));
  std::vector<char> bytes;
  for (const CheckpointTensorEntry* e : params) {
    bytes.resize(e->bytes);
    STRATA_RETURN_IF_ERROR(reader->ReadTensor(*e, bytes.data()));
    for (uint64_t at = 0; at < e->bytes; at += kChunkBytes) {  // bounded
      const uint64_t len = std::min(kChunkBytes, e->bytes - at);
      STRATA_RETURN_IF_ERROR(
          out->Append(std::string_view(bytes.data() + at, len)));
    }
  }
  STRATA_RETURN_IF_ERROR(out->Commit());
  return SafetensorsExport{.tensors = static_cast<int>(params.size()),
                           .bytes = 8 + n + end};
}

}  // namespace strata::train
