// checkpoint_reader.cc: listing, opening, verifying and restoring
// checkpoints (see checkpoint_reader.h).
#include "train/io/checkpoint_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "base/xxh3.h"
#include "strata/status.h"
#include "train/io/atomic_file.h"

namespace strata::train {
namespace {

namespace fs = std::filesystem;

// The step of a "step-NNNNNNNN" name, or -1.
int64_t StepOf(const std::string& name) {
  if (!name.starts_with("step-") || name.size() <= 5) return -1;
  int64_t step = -1;
  const char* end = name.data() + name.size();
  const auto [p, ec] = std::from_chars(name.data() + 5, end, step);
  return ec == std::errc() && p == end ? step : -1;
}

bool IsFile(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

}  // namespace

std::vector<CheckpointRef> ListCheckpoints(const std::string& dir) {
  std::vector<CheckpointRef> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const int64_t step = StepOf(entry.path().filename().string());
    if (step >= 0 && IsFile(entry.path() / kManifestFile)) {
      out.push_back({step, entry.path().string()});
    }
  }
  std::sort(out.begin(), out.end(),
            [](const auto& a, const auto& b) { return a.step > b.step; });
  return out;
}

std::string RankDirName(int rank, int ranks) {
  return absl::StrFormat("rank-%d-of-%d", rank, ranks);
}

std::vector<RankDir> ListRankDirs(const std::string& dir) {
  std::vector<RankDir> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    RankDir r;
    char tail = 0;
    if (std::sscanf(name.c_str(), "rank-%d-of-%d%c", &r.rank, &r.ranks,
                    &tail) == 2 &&
        name == RankDirName(r.rank, r.ranks) && entry.is_directory(ec)) {
      r.path = entry.path().string();
      out.push_back(r);
    }
  }
  std::sort(out.begin(), out.end(), [](const RankDir& a, const RankDir& b) {
    return std::pair(a.rank, a.ranks) < std::pair(b.rank, b.ranks);
  });
  return out;
}

absl::StatusOr<std::string> ResolveCheckpoint(const std::string& path) {
  if (IsFile(fs::path(path) / kManifestFile)) return path;
  std::error_code error;
  if (!fs::is_directory(path, error)) {
    return absl::NotFoundError(absl::StrCat(
        fs::exists(path, error) ? path + " is not a directory"
                                : "no such directory " + path,
        " (give a checkpoint: a step-NNNNNNNN directory, or the --save-dir "
        "that holds them)"));
  }
  std::vector<CheckpointRef> all = ListCheckpoints(path);
  if (const std::vector<RankDir> ranks = ListRankDirs(path);
      all.empty() && !ranks.empty()) {
    const int n = ranks.back().ranks;
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s holds the rank directories of a %d-rank sharded run "
        "(rank-R-of-%d): resume it with mpirun -np %d strata train "
        "--distributed --resume=%s; strata export gathers it",
        path, n, n, n, path));
  }
  if (all.empty()) {
    return absl::NotFoundError(absl::StrFormat(
        "no complete checkpoint in %s (a checkpoint is a step-NNNNNNNN "
        "directory with a %s, written by strata train --save-dir)",
        path, kManifestFile));
  }
  return all.front().path;
}

absl::StatusOr<std::unique_ptr<CheckpointReader>> CheckpointReader::Open(
    const std::string& checkpoint) {
  const std::string manifest_path =
      (fs::path(checkpoint) / kManifestFile).string();
  STRATA_ASSIGN_OR_RETURN(std::string text, ReadWholeFile(manifest_path));
  STRATA_ASSIGN_OR_RETURN(CheckpointManifest m,
                          DecodeManifest(text, manifest_path));
  const std::string data_path = (fs::path(checkpoint) / kTensorsFile).string();
  const int fd = open(data_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    return absl::ErrnoToStatus(
        err, absl::StrFormat("cannot open %s of checkpoint %s", data_path,
                             checkpoint));
  }
  std::unique_ptr<CheckpointReader> reader(
      new CheckpointReader(checkpoint, std::move(m), fd));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    const int err = errno;
    return absl::ErrnoToStatus(err, absl::StrFormat("fstat %s", data_path));
  }
  const auto size = static_cast<uint64_t>(st.st_size);
  const CheckpointManifest& mm = reader->manifest();
  if (size != mm.data_bytes) {
    std::string cut = "none";
    for (const CheckpointTensorEntry& e : mm.tensors) {
      if (e.offset + e.bytes > size) {
        cut = "'" + e.name + "'";
        break;
      }
    }
    return absl::DataLossError(absl::StrFormat(
        "%s holds %d bytes; its manifest says %d (truncated: tensor %s is "
        "cut); the checkpoint is damaged: delete %s and resume from an "
        "older one",
        data_path, size, mm.data_bytes, cut, checkpoint));
  }
  return reader;
}

CheckpointReader::~CheckpointReader() { close(fd_); }

absl::Status CheckpointReader::ReadTensor(const CheckpointTensorEntry& e,
                                          void* dst) const {
  auto* p = static_cast<char*>(dst);
  uint64_t done = 0;
  while (done < e.bytes) {
    const ssize_t n = pread(fd_, p + done, e.bytes - done,
                            static_cast<off_t>(e.offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : EIO;
      return absl::ErrnoToStatus(
          err, absl::StrFormat("cannot read tensor '%s' from %s/%s", e.name,
                               path_, kTensorsFile));
    }
    done += static_cast<uint64_t>(n);
  }
  return CheckSum(e, XXH3_64bits(dst, e.bytes));
}

absl::Status CheckpointReader::ReadTensorChunks(
    const CheckpointTensorEntry& e,
    const std::function<absl::Status(std::string_view)>& sink) const {
  constexpr uint64_t kChunkBytes = uint64_t{1} << 20;
  std::vector<char> chunk(std::min(kChunkBytes, e.bytes));
  XXH3_state_t* state = XXH3_createState();
  XXH3_64bits_reset(state);
  absl::Status status;
  for (uint64_t done = 0; status.ok() && done < e.bytes;) {
    const uint64_t want = std::min<uint64_t>(chunk.size(), e.bytes - done);
    const ssize_t n =
        pread(fd_, chunk.data(), want, static_cast<off_t>(e.offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : EIO;
      status = absl::ErrnoToStatus(
          err, absl::StrFormat("cannot read tensor '%s' from %s/%s", e.name,
                               path_, kTensorsFile));
      break;
    }
    XXH3_64bits_update(state, chunk.data(), static_cast<size_t>(n));
    status = sink(std::string_view(chunk.data(), static_cast<size_t>(n)));
    done += static_cast<uint64_t>(n);
  }
  const uint64_t sum = XXH3_64bits_digest(state);
  XXH3_freeState(state);
  STRATA_RETURN_IF_ERROR(status);
  return CheckSum(e, sum);
}

absl::Status CheckpointReader::CheckSum(const CheckpointTensorEntry& e,
                                        uint64_t sum) const {
  if (sum == e.xxh3) return absl::OkStatus();
  return absl::DataLossError(absl::StrFormat(
      "tensor '%s' in %s/%s does not match its checksum (xxh3 %016x, "
      "manifest %016x): the checkpoint is corrupted; delete it and resume "
      "from an older one",
      e.name, path_, kTensorsFile, sum, e.xxh3));
}

namespace {

// "<base>.part<k>" (optimizer_parts.h): sets *base and *k.
bool ParsePartName(const std::string& name, std::string* base, int* k) {
  const size_t dot = name.rfind(".part");
  if (dot == std::string::npos || dot + 5 == name.size()) return false;
  const char* first = name.data() + dot + 5;
  const char* last = name.data() + name.size();
  auto [end, ec] = std::from_chars(first, last, *k);
  if (ec != std::errc() || end != last) return false;
  *base = name.substr(0, dot);
  return true;
}

absl::Status CheckSameType(const CheckpointReader& reader,
                           const CheckpointTensorEntry& e,
                           const TensorSpec& spec) {
  std::vector<int64_t> shape = spec.shape;
  if (shape.empty()) shape = {static_cast<int64_t>(spec.size_bytes)};
  if (e.dtype == spec.dtype && e.shape == shape) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrFormat(
      "tensor '%s' is %s [%s] in checkpoint %s and %s [%s] in this model",
      spec.name, DTypeCode(e.dtype), absl::StrJoin(e.shape, ", "),
      reader.path(), DTypeCode(spec.dtype), absl::StrJoin(shape, ", ")));
}

// Writes `bytes` at `data` into tensor `id`: through a host-tier overwrite
// lease filled by `fill`, or (device-homed, or no room on the host) through
// Store::Write.
absl::Status FillTensor(Store& store, TensorId id, const TensorSpec& spec,
                        const std::function<absl::Status(void*)>& fill) {
  absl::StatusOr<Lease> host =
      spec.home == Tier::kDevice
          ? absl::ResourceExhaustedError("device-homed")
          : store.Acquire(id, Tier::kHost, Access::kOverwrite);
  if (host.ok()) {
    STRATA_RETURN_IF_ERROR(fill(host->data()));
    return host->Release();
  }
  if (host.status().code() != absl::StatusCode::kResourceExhausted) {
    return host.status();
  }
  std::vector<char> bytes(spec.size_bytes);
  STRATA_RETURN_IF_ERROR(fill(bytes.data()));
  return store.Write(id, bytes.data(), bytes.size());
}

// The store tensors restored from one whole checkpoint tensor: the parts of
// an optimizer state written by a strata from before optimizer parts.
struct WholeSource {
  const CheckpointTensorEntry* entry = nullptr;
  std::map<int, std::pair<TensorId, TensorSpec>> parts;  // by part index
};

}  // namespace

absl::Status RestoreTensors(const CheckpointReader& reader, Store& store,
                            const std::vector<TensorId>& tensors) {
  const CheckpointManifest& m = reader.manifest();
  // Plan first, so that a mismatch is refused before anything is written.
  std::vector<std::pair<TensorId, TensorSpec>> direct;
  std::map<std::string, WholeSource> wholes;
  for (TensorId id : tensors) {
    STRATA_ASSIGN_OR_RETURN(TensorSpec spec, store.GetSpec(id));
    if (const CheckpointTensorEntry* e = FindEntry(m, spec.name)) {
      STRATA_RETURN_IF_ERROR(CheckSameType(reader, *e, spec));
      direct.emplace_back(id, spec);
      continue;
    }
    std::string base;
    int k = 0;
    const CheckpointTensorEntry* whole =
        ParsePartName(spec.name, &base, &k) ? FindEntry(m, base) : nullptr;
    if (whole == nullptr || whole->dtype != spec.dtype) {
      return absl::InvalidArgumentError(
          absl::StrFormat("checkpoint %s has no tensor '%s' (a different "
                          "model)",
                          reader.path(), spec.name));
    }
    wholes[base].entry = whole;
    wholes[base].parts[k] = {id, spec};
  }
  for (const auto& [base, w] : wholes) {
    uint64_t bytes = 0;
    int next = 0;
    for (const auto& [k, part] : w.parts) {
      if (k != next++) break;
      bytes += part.second.size_bytes;
    }
    if (next != static_cast<int>(w.parts.size()) || bytes != w.entry->bytes) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "tensor '%s' of checkpoint %s (%d bytes) does not split into this "
          "model's %d parts of it (a different model)",
          base, reader.path(), w.entry->bytes, w.parts.size()));
    }
  }
  if (direct.size() + wholes.size() != m.tensors.size()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "checkpoint %s holds %d tensors; this model has %d (a different "
        "model)",
        reader.path(), m.tensors.size(), direct.size() + wholes.size()));
  }
  for (const auto& [id, spec] : direct) {
    const CheckpointTensorEntry* e = FindEntry(m, spec.name);
    STRATA_RETURN_IF_ERROR(FillTensor(store, id, spec, [&](void* dst) {
      return reader.ReadTensor(*e, dst);
    }));
  }
  // An old checkpoint's whole tensor, read once and cut into the parts.
  for (const auto& [base, w] : wholes) {
    std::vector<char> bytes(w.entry->bytes);
    STRATA_RETURN_IF_ERROR(reader.ReadTensor(*w.entry, bytes.data()));
    uint64_t offset = 0;
    for (const auto& [k, part] : w.parts) {
      const uint64_t n = part.second.size_bytes;
      STRATA_RETURN_IF_ERROR(
          FillTensor(store, part.first, part.second, [&](void* dst) {
            std::memcpy(dst, bytes.data() + offset, n);
            return absl::OkStatus();
          }));
      offset += n;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> CompareConfig(
    const CheckpointReader& reader,
    const std::map<std::string, std::string>& run,
    const std::vector<std::string>& must_match,
    const std::map<std::string, std::string>& absent) {
  std::map<std::string, std::string> saved = reader.manifest().config;
  for (const auto& [k, v] : absent) saved.try_emplace(k, v);
  auto value = [](const std::map<std::string, std::string>& m,
                  const std::string& key) {
    auto it = m.find(key);
    return it == m.end() ? std::string("(none)") : it->second;
  };
  std::vector<std::string> errors, warnings;
  if (value(saved, "model") != value(run, "model")) {  // nothing else matters
    return absl::InvalidArgumentError(absl::StrFormat(
        "checkpoint %s is of --model=%s; this run is --model=%s", reader.path(),
        value(saved, "model"), value(run, "model")));
  }
  std::vector<std::string> keys;
  for (const auto& [k, v] : saved) keys.push_back(k);
  for (const auto& [k, v] : run) {
    if (!saved.contains(k)) keys.push_back(k);
  }
  for (const std::string& k : keys) {
    const std::string a = value(saved, k), b = value(run, k);
    if (a == b) continue;
    const std::string line =
        absl::StrFormat("--%s: checkpoint %s, this run %s",
                        absl::StrReplaceAll(k, {{"_", "-"}}), a, b);
    const bool fatal =
        std::find(must_match.begin(), must_match.end(), k) != must_match.end();
    (fatal ? errors : warnings).push_back(line);
  }
  if (!errors.empty()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "checkpoint %s is of another model or shape; resume it with the "
        "same flags, or start afresh without --resume: %s",
        reader.path(), absl::StrJoin(errors, "; ")));
  }
  return warnings;
}

}  // namespace strata::train
