// safetensors.cc: checkpoint parameters -> .safetensors (see safetensors.h).
#include "train/run/safetensors.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string_view>
#include <system_error>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "strata/status.h"
#include "train/comm/collectives.h"
#include "train/io/atomic_file.h"
#include "train/io/checkpoint_reader.h"
#include "train/io/checkpoint_writer.h"
#include "train/io/safetensors_header.h"
#include "train/model/model.h"
#include "train/run/train_checkpoint.h"

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

// One tensor of the file: its bytes are its pieces' back to back (a
// sharded run's ranks' slices, in rank order; one piece otherwise).
struct ExportTensor {
  std::string name;
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;
  uint64_t bytes = 0;
  std::vector<std::pair<const CheckpointReader*, const CheckpointTensorEntry*>>
      pieces;
};

// The file: header, then each tensor streamed chunk by chunk (never whole
// in memory: its size is a manifest's word), each chunk's tensor verified
// against its checksum before Commit, so a failure leaves no file.
absl::StatusOr<SafetensorsExport> WriteSafetensors(
    const std::string& model, int64_t step,
    const std::vector<ExportTensor>& tensors, const std::string& out_path) {
  // Insertion order: the header lists the tensors in the data's order.
  nlohmann::ordered_json header;
  header["__metadata__"] = {{"format", "pt"},
                            {"strata.model", model},
                            {"strata.step", absl::StrFormat("%d", step)}};
  uint64_t end = 0;
  for (const ExportTensor& t : tensors) {
    header[t.name] = {{"dtype", DTypeCode(t.dtype)},
                      {"shape", t.shape},
                      {"data_offsets", {end, end + t.bytes}}};
    end += t.bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  // The header read back by the format's rules (those of the loaders it is
  // written for) before a byte is written.
  if (absl::Status read = DecodeSafetensorsHeader(text, end, out_path).status();
      !read.ok()) {
    return absl::InternalError(absl::StrCat(
        "the export's own header fails the format's rules: ", read.message()));
  }
  const uint64_t n = text.size();
  char length[8];
  for (int i = 0; i < 8; ++i) length[i] = static_cast<char>(n >> (8 * i));
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<AtomicFileWriter> out,
                          AtomicFileWriter::Create(out_path));
  STRATA_RETURN_IF_ERROR(out->Append(std::string_view(length, 8)));
  STRATA_RETURN_IF_ERROR(out->Append(text));
  for (const ExportTensor& t : tensors) {
    for (const auto& [reader, entry] : t.pieces) {
      STRATA_RETURN_IF_ERROR(reader->ReadTensorChunks(
          *entry,
          [&out](std::string_view chunk) { return out->Append(chunk); }));
    }
  }
  STRATA_RETURN_IF_ERROR(out->Commit());
  return SafetensorsExport{.tensors = static_cast<int>(tensors.size()),
                           .bytes = 8 + n + end,
                           .step = step};
}

// The whole shape of each of the MLP's parameters, from its checkpoint
// configuration (model.h's layers: weight [out x in], bias [out]).
absl::StatusOr<std::map<std::string, std::vector<int64_t>>> MlpShapes(
    const std::map<std::string, std::string>& config, const std::string& at) {
  ModelConfig c;
  int64_t depth = 0;
  auto number = [&](const char* key, int64_t* v) {
    auto it = config.find(key);
    return it != config.end() && absl::SimpleAtoi(it->second, v);
  };
  if (!number("inputs", &c.inputs) || !number("width", &c.width) ||
      !number("depth", &depth) || !number("classes", &c.classes)) {
    return absl::DataLossError(absl::StrFormat(
        "%s: the configuration lacks the MLP's inputs, width, depth or "
        "classes",
        at));
  }
  c.depth = static_cast<int>(depth);
  std::map<std::string, std::vector<int64_t>> shapes;
  int l = 0;
  for (const auto& [in, out] : LayerShapes(c)) {
    shapes[absl::StrFormat("layer%d.weight", l)] = {out, in};
    shapes[absl::StrFormat("layer%d.bias", l++)] = {out};
  }
  return shapes;
}

// The whole shapes a sharded GPT rank's checkpoint records in its state
// (train_checkpoint.h's kWholeShapePrefix).
absl::StatusOr<std::map<std::string, std::vector<int64_t>>> RecordedShapes(
    const std::map<std::string, std::string>& state, const std::string& at) {
  std::map<std::string, std::vector<int64_t>> shapes;
  const std::string prefix = kWholeShapePrefix;
  for (const auto& [key, value] : state) {
    if (!absl::StartsWith(key, prefix)) continue;
    std::vector<int64_t>& shape = shapes[key.substr(prefix.size())];
    for (absl::string_view d : absl::StrSplit(value, 'x')) {
      int64_t n = 0;
      if (!absl::SimpleAtoi(d, &n) || n < 0) {
        return absl::DataLossError(absl::StrFormat(
            "%s: %s=%s is not a shape (a damaged manifest)", at, key, value));
      }
      shape.push_back(n);
    }
  }
  if (shapes.empty()) {
    return absl::DataLossError(absl::StrFormat(
        "%s: a sharded GPT checkpoint without its parameters' whole shapes "
        "(a damaged manifest)",
        at));
  }
  return shapes;
}

// The newest step every rank directory holds a checkpoint of, or -1.
int64_t CommonStep(const std::vector<RankDir>& ranks) {
  std::vector<std::vector<CheckpointRef>> lists;  // each directory read once
  for (const RankDir& r : ranks) lists.push_back(ListCheckpoints(r.path));
  for (const CheckpointRef& c : lists[0]) {
    const bool everywhere = std::all_of(
        lists.begin(), lists.end(), [&](const std::vector<CheckpointRef>& l) {
          return std::any_of(l.begin(), l.end(),
                             [&](const auto& t) { return t.step == c.step; });
        });
    if (everywhere) return c.step;
  }
  return -1;
}

// Every rank's slice of each parameter, gathered in rank order
// (ShardOffsets: rank r holds elements [n r / N, n (r + 1) / N)).
absl::StatusOr<SafetensorsExport> ExportShardedSafetensors(
    const std::string& dir, const std::string& out_path) {
  const std::vector<RankDir> ranks = ListRankDirs(dir);
  const int n = ranks.back().ranks;
  bool whole = static_cast<int>(ranks.size()) == n;
  for (int r = 0; whole && r < n; ++r) {
    whole = ranks[r].rank == r && ranks[r].ranks == n;
  }
  if (!whole) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s does not hold one directory per rank of one run (rank-0-of-N "
        "... rank-(N-1)-of-N): export one run's --save-dir",
        dir));
  }
  const int64_t step = CommonStep(ranks);
  if (step < 0) {
    return absl::NotFoundError(absl::StrFormat(
        "%s: no step was saved by every rank, so no whole model is there",
        dir));
  }
  std::vector<std::unique_ptr<CheckpointReader>> readers;
  std::vector<std::map<std::string, const CheckpointTensorEntry*>> entries(n);
  for (int r = 0; r < n; ++r) {
    const std::string path = ranks[r].path + "/" + CheckpointDirName(step);
    STRATA_RETURN_IF_ERROR(CheckOutsideCheckpoint(path, out_path));
    STRATA_ASSIGN_OR_RETURN(readers.emplace_back(),
                            CheckpointReader::Open(path));
    auto config = readers[r]->manifest().config;
    if (config["rank"] != absl::StrCat(r) ||
        config["ranks"] != absl::StrCat(n)) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "%s holds rank %s of %s ranks' checkpoint, not rank %d of %d's: "
          "put each rank's directory back under its own name",
          path, config["rank"], config["ranks"], r, n));
    }
    auto first = readers[0]->manifest().config;
    config.erase("rank");
    first.erase("rank");
    const std::string& model = readers[r]->manifest().model;
    if (config != first || model != readers[0]->manifest().model ||
        (model != "mlp" && model != "gpt")) {
      return absl::FailedPreconditionError(
          absl::StrFormat("%s and %s are not ranks of one sharded run",
                          readers[0]->path(), path));
    }
    for (const CheckpointTensorEntry& e : readers[r]->manifest().tensors) {
      entries[r][e.name] = &e;
    }
  }
  const CheckpointManifest& m0 = readers[0]->manifest();
  STRATA_ASSIGN_OR_RETURN(const auto shapes,
                          m0.model == "mlp"
                              ? MlpShapes(m0.config, readers[0]->path())
                              : RecordedShapes(m0.state, readers[0]->path()));
  std::vector<ExportTensor> tensors;
  for (const CheckpointTensorEntry& e : m0.tensors) {
    if (e.kind != TensorKind::kParameter) continue;
    auto shape = shapes.find(e.name);
    if (shape == shapes.end()) {
      return absl::DataLossError(absl::StrFormat(
          "%s: tensor '%s' is no parameter of the %s its configuration "
          "describes",
          readers[0]->path(), e.name, m0.model));
    }
    int64_t elements = 1;
    for (int64_t d : shape->second) elements *= d;
    const std::vector<int64_t> at = ShardOffsets(elements, n);
    ExportTensor t{e.name,
                   e.dtype,
                   shape->second,
                   static_cast<uint64_t>(elements) * DTypeSize(e.dtype),
                   {}};
    for (int r = 0; r < n; ++r) {
      auto it = entries[r].find(e.name);
      const uint64_t want = (at[r + 1] - at[r]) * DTypeSize(e.dtype);
      if (it == entries[r].end() || it->second->dtype != e.dtype ||
          it->second->bytes != want) {
        return absl::DataLossError(absl::StrFormat(
            "%s: rank %d's slice of '%s' is missing or not %d bytes of %s",
            readers[r]->path(), r, e.name, want, DTypeCode(e.dtype)));
      }
      t.pieces.emplace_back(readers[r].get(), it->second);
    }
    tensors.push_back(std::move(t));
  }
  return WriteSafetensors(m0.model, step, tensors, out_path);
}

}  // namespace

absl::StatusOr<SafetensorsExport> ExportSafetensors(
    const std::string& checkpoint, const std::string& out_path) {
  if (!ListRankDirs(checkpoint).empty()) {
    return ExportShardedSafetensors(checkpoint, out_path);
  }
  STRATA_ASSIGN_OR_RETURN(std::string path, ResolveCheckpoint(checkpoint));
  STRATA_RETURN_IF_ERROR(CheckOutsideCheckpoint(path, out_path));
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<CheckpointReader> reader,
                          CheckpointReader::Open(path));
  const CheckpointManifest& m = reader->manifest();
  if (m.config.contains("ranks")) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s is rank %s's shard of a run sharded over %s ranks: its tensors "
        "are slices; export the --save-dir that holds every rank's "
        "directory (%s), which gathers them",
        path, m.config.at("rank"), m.config.at("ranks"),
        fs::path(path).parent_path().parent_path().string()));
  }
  std::vector<ExportTensor> tensors;
  for (const CheckpointTensorEntry& e : m.tensors) {
    if (e.kind != TensorKind::kParameter) continue;
    tensors.push_back(
        {e.name, e.dtype, e.shape, e.bytes, {{reader.get(), &e}}});
  }
  return WriteSafetensors(m.model, m.step, tensors, out_path);
}

}  // namespace strata::train
