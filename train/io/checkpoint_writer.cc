// checkpoint_writer.cc: streams tensors from the store into a temporary
// checkpoint directory, then publishes it by rename (see
// checkpoint_writer.h).
#include "train/io/checkpoint_writer.h"

#include <fcntl.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <memory>
#include <set>
#include <string_view>

#include "absl/strings/str_format.h"
#include "base/xxh3.h"
#include "strata/status.h"
#include "train/io/atomic_file.h"
#include "train/io/checkpoint_manifest.h"
#include "train/io/checkpoint_reader.h"

namespace strata::train {
namespace {

namespace fs = std::filesystem;

constexpr uint64_t kChunkBytes = uint64_t{1} << 20;
// Room for the manifest on top of the tensors (a few hundred bytes a tensor).
constexpr uint64_t kManifestAllowance = uint64_t{1} << 20;

absl::Status SyncDirectory(const std::string& dir) {
  const int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  int err = fd < 0 ? errno : 0;
  if (fd >= 0 && fsync(fd) != 0) err = errno;
  if (fd >= 0) close(fd);
  if (err == 0) return absl::OkStatus();
  return absl::ErrnoToStatus(err,
                             absl::StrFormat("cannot fsync directory %s", dir));
}

absl::StatusOr<uint64_t> FreeBytes(const std::string& dir) {
  struct statvfs vfs;
  if (statvfs(dir.c_str(), &vfs) != 0) {
    const int err = errno;
    return absl::ErrnoToStatus(err, absl::StrFormat("statvfs %s", dir));
  }
  return uint64_t{vfs.f_bavail} * vfs.f_frsize;
}

absl::Status CheckFreeSpace(const CheckpointSaveOptions& options,
                            uint64_t needed, const std::string& name) {
  const std::string& dir = options.dir;
  STRATA_ASSIGN_OR_RETURN(
      const uint64_t free_bytes,
      options.free_bytes ? options.free_bytes(dir) : FreeBytes(dir));
  if (free_bytes >= needed) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrFormat(
      "checkpoint %s needs %d bytes in %s, but only %d are free: free space "
      "there, lower --keep, or choose another --save-dir",
      name, needed, dir, free_bytes));
}

// Appends one tensor's bytes to `out` through a read lease (host tier, or
// the device for device-homed tensors or a host tier with no room, copied
// out by Store::Read); a tensor without contents is saved as zeros.
absl::StatusOr<CheckpointTensorEntry> WriteTensor(Store& store, TensorId id,
                                                  uint64_t offset,
                                                  AtomicFileWriter& out) {
  STRATA_ASSIGN_OR_RETURN(TensorSpec spec, store.GetSpec(id));
  CheckpointTensorEntry e{.name = spec.name,
                          .kind = spec.kind,
                          .dtype = spec.dtype,
                          .shape = spec.shape,
                          .offset = offset,
                          .bytes = spec.size_bytes};
  if (e.shape.empty()) e.shape = {static_cast<int64_t>(spec.size_bytes)};
  std::vector<char> copy;
  Lease lease;
  const char* bytes = nullptr;
  STRATA_ASSIGN_OR_RETURN(Residency residency, store.GetResidency(id));
  if (!residency.has_contents) {
    // Never written (Adam's moments before the first step): zeros, as a
    // kWrite lease presents it.
    copy.assign(spec.size_bytes, 0);
    bytes = copy.data();
  } else {
    absl::StatusOr<Lease> host =
        spec.home == Tier::kDevice
            ? absl::ResourceExhaustedError("device-homed")
            : store.Acquire(id, Tier::kHost, Access::kRead);
    if (host.ok()) {
      lease = std::move(*host);
      bytes = static_cast<const char*>(lease.data());
    } else if (host.status().code() == absl::StatusCode::kResourceExhausted) {
      // Device-homed, or no room on the host: Read copies it out through
      // the device.
      copy.resize(spec.size_bytes);
      STRATA_RETURN_IF_ERROR(store.Read(id, copy.data(), copy.size()));
      bytes = copy.data();
    } else {
      return host.status();
    }
  }
  e.xxh3 = XXH3_64bits(bytes, spec.size_bytes);
  for (uint64_t at = 0; at < spec.size_bytes; at += kChunkBytes) {
    const uint64_t n = std::min(kChunkBytes, spec.size_bytes - at);
    STRATA_RETURN_IF_ERROR(out.Append(std::string_view(bytes + at, n)));
  }
  if (lease.valid()) STRATA_RETURN_IF_ERROR(lease.Release());
  return e;
}

absl::Status WriteContents(Store& store, const CheckpointContent& content,
                           const CheckpointSaveOptions& options,
                           const std::string& temp, uint64_t* bytes) {
  CheckpointManifest m{.model = content.model,
                       .step = content.step,
                       .config = content.config,
                       .state = content.state};
  STRATA_ASSIGN_OR_RETURN(
      std::unique_ptr<AtomicFileWriter> data,
      AtomicFileWriter::Create((fs::path(temp) / kTensorsFile).string()));
  for (TensorId id : content.tensors) {
    STRATA_ASSIGN_OR_RETURN(CheckpointTensorEntry e,
                            WriteTensor(store, id, m.data_bytes, *data));
    m.data_bytes += e.bytes;
    m.tensors.push_back(std::move(e));
    if (options.after_tensor) {
      options.after_tensor(static_cast<int>(m.tensors.size()));
    }
  }
  STRATA_RETURN_IF_ERROR(data->Commit());
  const std::string manifest = EncodeManifest(m);
  STRATA_RETURN_IF_ERROR(
      WriteFileAtomically((fs::path(temp) / kManifestFile).string(), manifest));
  *bytes = m.data_bytes + manifest.size();
  return SyncDirectory(temp);
}

// Whether `entry` is what a save or a removal killed midway leaves: a
// step-* temporary (.tmp, .old), or a step-NNNNNNNN directory without its
// manifest (the rename publishes a checkpoint whole, so only an interrupted
// removal by an older strata leaves one, often empty). Never a checkpoint.
bool IsLeftover(const fs::directory_entry& entry) {
  const std::string name = entry.path().filename().string();
  if (!name.starts_with("step-")) return false;
  if (name.ends_with(".tmp") || name.ends_with(".old")) return true;
  std::error_code ec;
  return name.find('.') == std::string::npos && entry.is_directory(ec) &&
         !fs::exists(entry.path() / kManifestFile, ec);
}

// Removes leftovers (IsLeftover) and all but the newest `keep` checkpoints.
// Safe only for the directory's one writer: strata train holds its lock
// (DIR/.lock) for the whole run. A checkpoint is renamed aside to *.old
// before it is removed, so a kill during the removal leaves a leftover, not
// a checkpoint with half its files that a resume would pick.
void Prune(const std::string& dir, int keep) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (IsLeftover(entry)) fs::remove_all(entry.path(), ec);
  }
  std::vector<CheckpointRef> all = ListCheckpoints(dir);
  for (size_t i = static_cast<size_t>(keep); i < all.size(); ++i) {
    const std::string aside = all[i].path + ".old";
    fs::remove_all(aside, ec);
    fs::rename(all[i].path, aside, ec);
    fs::remove_all(ec ? all[i].path : aside, ec);
  }
}

}  // namespace

std::string CheckpointDirName(int64_t step) {
  return absl::StrFormat("step-%08d", step);
}

absl::StatusOr<SavedCheckpoint> SaveCheckpoint(
    Store& store, const CheckpointContent& content,
    const CheckpointSaveOptions& options) {
  if (options.keep < 1 || options.dir.empty()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--save-dir='%s' --keep=%d: need a directory and keep >= 1",
        options.dir, options.keep));
  }
  const auto start = std::chrono::steady_clock::now();
  uint64_t needed = kManifestAllowance;
  std::set<std::string> names;
  for (TensorId id : content.tensors) {
    STRATA_ASSIGN_OR_RETURN(TensorSpec spec, store.GetSpec(id));
    if (!names.insert(spec.name).second) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "two checkpoint tensors are named '%s'; names must be unique",
          spec.name));
    }
    needed += spec.size_bytes;
  }
  STRATA_RETURN_IF_ERROR(MakeDirectories(options.dir));
  const std::string name = CheckpointDirName(content.step);
  const std::string final_path = (fs::path(options.dir) / name).string();
  const std::string temp = final_path + ".tmp";
  std::error_code ec;
  fs::remove_all(temp, ec);  // a crashed save's
  STRATA_RETURN_IF_ERROR(CheckFreeSpace(options, needed, name));
  STRATA_RETURN_IF_ERROR(MakeDirectories(temp));
  SavedCheckpoint saved{.path = final_path, .step = content.step};
  absl::Status st = WriteContents(store, content, options, temp, &saved.bytes);
  // An older save of the same step (a resumed run saving again) steps aside
  // first, so one of the two is whole at every moment.
  const std::string old = final_path + ".old";
  const bool replacing = st.ok() && fs::exists(final_path, ec);
  if (replacing) {
    fs::remove_all(old, ec);
    if (rename(final_path.c_str(), old.c_str()) != 0) {
      const int err = errno;
      st = absl::ErrnoToStatus(
          err, absl::StrFormat("cannot rename %s to %s", final_path, old));
    }
  }
  if (st.ok()) {
    if (rename(temp.c_str(), final_path.c_str()) != 0) {
      const int err = errno;
      st = absl::ErrnoToStatus(
          err, absl::StrFormat("cannot rename %s to %s", temp, final_path));
    }
  }
  if (!st.ok()) {
    if (replacing && !fs::exists(final_path, ec)) {
      (void)rename(old.c_str(), final_path.c_str());  // the older one back
    }
    fs::remove_all(temp, ec);
    return st;
  }
  STRATA_RETURN_IF_ERROR(SyncDirectory(options.dir));
  if (replacing) fs::remove_all(old, ec);
  Prune(options.dir, options.keep);
  saved.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  return saved;
}

}  // namespace strata::train
