// safetensors.cc: checkpoint parameters -> .safetensors (see safetensors.h).
#include "train/safetensors.h"

#include <algorithm>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string_view>
#include <system_error>
#include <vector>

#include "absl/strings/str_format.h"
#include "strata/status.h"
#include "train/atomic_file.h"
#include "train/checkpoint_reader.h"

namespace strata::train {
namespace {

namespace fs = std::filesystem;

// Whether `inner` is `outer` or lies under it (both canonical).
bool IsWithin(const fs::path& inner, const fs::path& outer) {
  auto [o, i] =
      std::mismatch(outer.begin(), outer.end(), inner.begin(), inner.end());
  return o == outer.end();
}

// The export is published by rename: inside the checkpoint it would replace
// the checkpoint's own files (--safetensors=CKPT/tensors.bin) or leave a
// stranger among them; a link to one of them would be written through.
absl::Status CheckOutsideCheckpoint(const std::string& checkpoint,
                                    const std::string& out_path) {
  std::error_code ec;
  const fs::path dir = fs::canonical(checkpoint, ec);
  if (ec) return absl::OkStatus();  // Open names a missing checkpoint
  const fs::path out = fs::weakly_canonical(fs::absolute(out_path), ec);
  bool inside = !ec && IsWithin(out.parent_path(), dir);
  for (const char* file : {kTensorsFile, kManifestFile}) {
    inside = inside || fs::equivalent(out_path, dir / file, ec);
  }
  if (!inside) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrFormat(
      "--safetensors=%s is inside checkpoint %s (or one of its files): the "
      "export would replace or sit among the checkpoint's own files; write "
      "it outside the checkpoint directory",
      out_path, dir.string()));
}

}  // namespace

absl::StatusOr<SafetensorsExport> ExportSafetensors(
    const std::string& checkpoint, const std::string& out_path) {
  STRATA_ASSIGN_OR_RETURN(std::string path, ResolveCheckpoint(checkpoint));
  STRATA_RETURN_IF_ERROR(CheckOutsideCheckpoint(path, out_path));
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<CheckpointReader> reader,
                          CheckpointReader::Open(path));
  const CheckpointManifest& m = reader->manifest();
  if (m.config.contains("ranks")) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s is rank %s's shard of a run sharded over %s ranks: its tensors "
        "are slices, not the model's; exporting a sharded run is not built "
        "yet",
        path, m.config.at("rank"), m.config.at("ranks")));
  }
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
  // Chunk by chunk, never the whole tensor in memory (its size is the
  // manifest's word); a tensor whose checksum fails stops the export before
  // Commit, so no file appears.
  for (const CheckpointTensorEntry* e : params) {
    STRATA_RETURN_IF_ERROR(reader->ReadTensorChunks(
        *e, [&out](std::string_view chunk) { return out->Append(chunk); }));
  }
  STRATA_RETURN_IF_ERROR(out->Commit());
  return SafetensorsExport{.tensors = static_cast<int>(params.size()),
                           .bytes = 8 + n + end};
}

}  // namespace strata::train
