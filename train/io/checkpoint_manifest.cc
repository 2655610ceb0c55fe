// checkpoint_manifest.cc: the manifest's JSON (see checkpoint_manifest.h).
#include "train/io/checkpoint_manifest.h"

#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "base/json_nesting.h"
#include "base/json_numbers.h"
#include "base/xxh3.h"
#include "strata/status.h"

namespace strata::train {
namespace {

using nlohmann::json;

constexpr DType kDTypes[] = {DType::kUInt8,    DType::kFloat32, DType::kFloat16,
                             DType::kBFloat16, DType::kInt32,   DType::kInt64};
constexpr TensorKind kKinds[] = {TensorKind::kParameter, TensorKind::kGradient,
                                 TensorKind::kOptimizerState,
                                 TensorKind::kActivation, TensorKind::kOther};

absl::Status Bad(const std::string& path, const std::string& what) {
  return absl::DataLossError(absl::StrFormat(
      "checkpoint manifest %s is not valid: %s (the checkpoint is damaged: "
      "delete its directory and resume from an older one)",
      path, what));
}

// The XXH3 of the manifest's compact dump without its own "xxh3" key (keys
// sorted, no floats: the same text after a parse), so that an edit or a
// flipped bit in the step, the configuration or the trainer's state — which
// no tensor checksum covers — is caught.
std::string ManifestChecksum(json j) {
  j.erase("xxh3");
  const std::string text = j.dump();
  return absl::StrFormat("%016x", XXH3_64bits(text.data(), text.size()));
}

// The whole number `object[key]` holds, as a T; throws (DecodeManifest's
// catch makes it DataLoss) for a float, a negative byte count or one past
// T: nlohmann's own get<T>() would cast it (undefined for a float past
// T's range: found by the checkpoint_reader fuzz target).
template <typename T>
T WholeNumber(const json& object, const char* key) {
  const std::optional<T> v = JsonInteger<T>(object.at(key));
  if (!v) {
    throw std::invalid_argument(
        absl::StrFormat("\"%s\" is %s, not a whole number in range", key,
                        object.at(key).dump()));
  }
  return *v;
}

std::string ShapeText(const std::vector<int64_t>& shape) {
  std::string out;
  for (int64_t d : shape) out += (out.empty() ? "" : ", ") + std::to_string(d);
  return "[" + out + "]";
}

// A shape's dimensions are >= 0 and its byte size fits in 64 bits, so no
// reader of the manifest computes a size that wrapped (a crafted manifest
// would otherwise describe a tensor of 2^62 elements in 4 bytes).
absl::Status CheckShape(const std::string& path,
                        const CheckpointTensorEntry& e) {
  uint64_t bytes = DTypeSize(e.dtype);
  for (int64_t d : e.shape) {
    if (d < 0 ||
        __builtin_mul_overflow(bytes, static_cast<uint64_t>(d), &bytes)) {
      return Bad(path,
                 absl::StrFormat("tensor '%s': shape %s is negative or larger "
                                 "than any file",
                                 e.name, ShapeText(e.shape)));
    }
  }
  return absl::OkStatus();
}

}  // namespace

const char* DTypeCode(DType dtype) {
  switch (dtype) {
    case DType::kUInt8:
      return "U8";
    case DType::kFloat32:
      return "F32";
    case DType::kFloat16:
      return "F16";
    case DType::kBFloat16:
      return "BF16";
    case DType::kInt32:
      return "I32";
    case DType::kInt64:
      return "I64";
  }
  return "?";
}

std::string EncodeManifest(const CheckpointManifest& m) {
  json tensors = json::array();
  for (const CheckpointTensorEntry& t : m.tensors) {
    tensors.push_back({{"name", t.name},
                       {"kind", std::string(TensorKindName(t.kind))},
                       {"dtype", DTypeCode(t.dtype)},
                       {"shape", t.shape},
                       {"offset", t.offset},
                       {"bytes", t.bytes},
                       {"xxh3", absl::StrFormat("%016x", t.xxh3)}});
  }
  json j = {{"format", kCheckpointFormat},
            {"version", kCheckpointVersion},
            {"model", m.model},
            {"step", m.step},
            {"config", m.config},
            {"state", m.state},
            {"data_file", kTensorsFile},
            {"data_bytes", m.data_bytes},
            {"tensors", tensors}};
  j["xxh3"] = ManifestChecksum(j);
  return j.dump(1) + "\n";
}

absl::StatusOr<CheckpointManifest> DecodeManifest(const std::string& text,
                                                  const std::string& path) {
  if (JsonNestingDepth(text) > kMaxJsonNesting) {
    return Bad(path, absl::StrFormat("it nests deeper than %d levels",
                                     kMaxJsonNesting));
  }
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return Bad(path, "not JSON (truncated?)");
  }
  // find, not value(): value() throws for a "format" that is not a string
  // (found by the checkpoint_resume fuzz target, where it terminated).
  if (const auto format = j.find("format");
      format == j.end() || *format != kCheckpointFormat) {
    return Bad(path, "no \"format\": \"strata-checkpoint\"");
  }
  const std::optional<int> version =
      j.contains("version") ? JsonInteger<int>(j["version"]) : std::nullopt;
  if (!version) return Bad(path, "no whole-number \"version\"");
  if (*version != kCheckpointVersion) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "checkpoint manifest %s is format version %d; this strata reads "
        "version %d (use the strata that wrote it)",
        path, *version, kCheckpointVersion));
  }
  if (!j.contains("xxh3") || !j["xxh3"].is_string() ||
      j["xxh3"].get<std::string>() != ManifestChecksum(j)) {
    return Bad(path,
               "its checksum does not match its contents (edited or "
               "corrupted)");
  }
  CheckpointManifest m;
  try {
    m.model = j.at("model").get<std::string>();
    m.step = WholeNumber<int64_t>(j, "step");
    m.config = j.at("config").get<std::map<std::string, std::string>>();
    m.state = j.at("state").get<std::map<std::string, std::string>>();
    m.data_bytes = WholeNumber<uint64_t>(j, "data_bytes");
    uint64_t end = 0;
    std::set<std::string> names;
    for (const json& t : j.at("tensors")) {
      CheckpointTensorEntry e;
      e.name = t.at("name").get<std::string>();
      // A name twice would restore or export one tensor's bytes as
      // another's (found by the checkpoint_reader fuzz target: the export
      // wrote a header with a hole).
      if (!names.insert(e.name).second) {
        return Bad(path,
                   absl::StrFormat("tensor '%s' is listed twice", e.name));
      }
      const std::string kind = t.at("kind").get<std::string>();
      const std::string dtype = t.at("dtype").get<std::string>();
      bool kind_ok = false, dtype_ok = false;
      for (TensorKind k : kKinds) {
        if (TensorKindName(k) == kind) e.kind = k, kind_ok = true;
      }
      for (DType d : kDTypes) {
        if (dtype == DTypeCode(d)) e.dtype = d, dtype_ok = true;
      }
      if (!kind_ok || !dtype_ok) {
        return Bad(path, absl::StrFormat("tensor '%s': kind '%s', dtype '%s'",
                                         e.name, kind, dtype));
      }
      if (!t.at("shape").is_array()) {
        return Bad(path, absl::StrFormat("tensor '%s': a shape that is not a "
                                         "list",
                                         e.name));
      }
      for (const json& d : t.at("shape")) {
        const std::optional<int64_t> n = JsonInteger<int64_t>(d);
        if (!n) {
          return Bad(path, absl::StrFormat("tensor '%s': a dimension %s",
                                           e.name, d.dump()));
        }
        e.shape.push_back(*n);
      }
      e.offset = WholeNumber<uint64_t>(t, "offset");
      e.bytes = WholeNumber<uint64_t>(t, "bytes");
      e.xxh3 = std::stoull(t.at("xxh3").get<std::string>(), nullptr, 16);
      STRATA_RETURN_IF_ERROR(CheckShape(path, e));
      uint64_t elements = 1;
      for (int64_t d : e.shape) elements *= static_cast<uint64_t>(d);
      if (e.offset != end || elements * DTypeSize(e.dtype) != e.bytes) {
        return Bad(path, absl::StrFormat(
                             "tensor '%s': offset %d and %d bytes do not "
                             "follow the previous tensor (at %d) or its shape",
                             e.name, e.offset, e.bytes, end));
      }
      end += e.bytes;
      m.tensors.push_back(std::move(e));
    }
    if (end != m.data_bytes) {
      return Bad(path, absl::StrFormat("tensors hold %d bytes, data_bytes %d",
                                       end, m.data_bytes));
    }
  } catch (const std::exception& e) {
    return Bad(path, e.what());
  }
  return m;
}

std::string ResealManifest(const std::string& text) {
  if (JsonNestingDepth(text) > kMaxJsonNesting) return text;
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return text;
  j["xxh3"] = ManifestChecksum(j);
  return j.dump();
}

const CheckpointTensorEntry* FindEntry(const CheckpointManifest& manifest,
                                       const std::string& name) {
  for (const CheckpointTensorEntry& e : manifest.tensors) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

}  // namespace strata::train
