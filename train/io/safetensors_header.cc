// safetensors_header.cc: a .safetensors header read and checked by the
// format's rules (see safetensors_header.h).
#include "train/io/safetensors_header.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <limits>
#include <nlohmann/json.hpp>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "base/json_nesting.h"
#include "strata/status.h"

namespace strata::train {
namespace {

using json = nlohmann::json;

absl::Status Bad(const std::string& path, std::string_view why) {
  return absl::DataLossError(
      absl::StrFormat("%s is not a valid safetensors file: %s", path, why));
}

// One tensor's entry; `name` is its key.
absl::StatusOr<SafetensorsTensor> DecodeTensor(const std::string& name,
                                               const json& t,
                                               const std::string& path) {
  const auto bad = [&](std::string_view why) {
    return Bad(path, absl::StrFormat("tensor '%s': %s", name, why));
  };
  if (!t.is_object()) return bad("its entry is not an object");
  const auto dtype = t.find("dtype");
  const auto shape = t.find("shape");
  const auto offsets = t.find("data_offsets");
  if (dtype == t.end() || !dtype->is_string() || shape == t.end() ||
      !shape->is_array() || offsets == t.end() || !offsets->is_array() ||
      offsets->size() != 2) {
    return bad(
        "it needs \"dtype\" (a string), \"shape\" (an array) and "
        "\"data_offsets\" ([begin, end])");
  }
  SafetensorsTensor out{.name = name, .dtype = dtype->get<std::string>()};
  const int size = SafetensorsDTypeSize(out.dtype);
  if (size == 0) return bad(absl::StrFormat("unknown dtype '%s'", out.dtype));
  uint64_t bytes = static_cast<uint64_t>(size);
  for (const json& d : *shape) {
    if (!d.is_number_unsigned()) {
      return bad("a dimension is not a non-negative integer");
    }
    const uint64_t n = d.get<uint64_t>();
    if (n > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
        (n != 0 && bytes > std::numeric_limits<uint64_t>::max() / n)) {
      return bad("its size overflows 64 bits");
    }
    bytes *= n;
    out.shape.push_back(static_cast<int64_t>(n));
  }
  if (!(*offsets)[0].is_number_unsigned() ||
      !(*offsets)[1].is_number_unsigned()) {
    return bad("data_offsets are not non-negative integers");
  }
  out.begin = (*offsets)[0].get<uint64_t>();
  out.end = (*offsets)[1].get<uint64_t>();
  if (out.end < out.begin || out.end - out.begin != bytes) {
    return bad(absl::StrFormat(
        "data_offsets [%d, %d] do not hold its %d bytes (dtype %s, shape of "
        "%d dimensions)",
        out.begin, out.end, bytes, out.dtype, out.shape.size()));
  }
  return out;
}

// The tensors, sorted by offset, must tile [0, data_bytes).
absl::Status CheckTiling(std::vector<SafetensorsTensor>& tensors,
                         uint64_t data_bytes, const std::string& path) {
  std::stable_sort(tensors.begin(), tensors.end(),
                   [](const SafetensorsTensor& a, const SafetensorsTensor& b) {
                     return std::pair(a.begin, a.end) <
                            std::pair(b.begin, b.end);
                   });
  uint64_t at = 0;
  for (const SafetensorsTensor& t : tensors) {
    if (t.begin != at) {
      return Bad(path, absl::StrFormat(
                           "tensor '%s' begins at byte %d of the data, where "
                           "%s (overlapping or a hole)",
                           t.name, t.begin,
                           absl::StrFormat("the one before ends at %d", at)));
    }
    at = t.end;
  }
  if (at != data_bytes) {
    return Bad(path,
               absl::StrFormat("the tensors hold %d bytes of data, the file %d "
                               "(truncated, or bytes after them)",
                               at, data_bytes));
  }
  return absl::OkStatus();
}

}  // namespace

int SafetensorsDTypeSize(std::string_view dtype) {
  static constexpr std::pair<std::string_view, int> kSizes[] = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1},
      {"I16", 2},  {"U16", 2}, {"F16", 2}, {"BF16", 2},    {"I32", 4},
      {"U32", 4},  {"F32", 4}, {"I64", 8}, {"U64", 8},     {"F64", 8}};
  for (const auto& [code, size] : kSizes) {
    if (code == dtype) return size;
  }
  return 0;
}

absl::StatusOr<SafetensorsHeader> DecodeSafetensorsHeader(
    std::string_view text, uint64_t data_bytes, const std::string& path) {
  if (JsonNestingDepth(text) > kMaxJsonNesting) {
    return Bad(path, absl::StrFormat("its header nests deeper than %d levels",
                                     kMaxJsonNesting));
  }
  // The reference parser takes the whole N bytes; JSON allows the padding.
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return Bad(path, "its header is not a JSON object");
  }
  SafetensorsHeader out{.header_bytes = text.size(), .data_bytes = data_bytes};
  for (const auto& [key, value] : j.items()) {
    if (key == "__metadata__") {
      if (!value.is_object()) return Bad(path, "__metadata__ is not an object");
      for (const auto& [name, v] : value.items()) {
        if (!v.is_string()) {
          return Bad(
              path, absl::StrFormat("__metadata__ '%s' is not a string", name));
        }
        out.metadata[name] = v.get<std::string>();
      }
      continue;
    }
    STRATA_ASSIGN_OR_RETURN(SafetensorsTensor t,
                            DecodeTensor(key, value, path));
    out.tensors.push_back(std::move(t));
  }
  STRATA_RETURN_IF_ERROR(CheckTiling(out.tensors, data_bytes, path));
  return out;
}

absl::StatusOr<SafetensorsHeader> ReadSafetensorsHeader(
    const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    return absl::ErrnoToStatus(err, absl::StrFormat("open %s", path));
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    return absl::ErrnoToStatus(err, absl::StrFormat("fstat %s", path));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrFormat("%s is not a regular file", path));
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  // Reads exactly n bytes at `offset`.
  const auto read_at = [&](uint64_t offset, uint64_t n,
                           char* dst) -> absl::Status {
    for (uint64_t done = 0; done < n;) {
      const ssize_t got =
          ::pread(fd, dst + done, n - done, static_cast<off_t>(offset + done));
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) {
        const int err = errno;
        return absl::ErrnoToStatus(err, absl::StrFormat("read %s", path));
      }
      if (got == 0) return Bad(path, "it ended while being read");
      done += static_cast<uint64_t>(got);
    }
    return absl::OkStatus();
  };
  if (size < 8) return Bad(path, absl::StrFormat("%d bytes long", size));
  unsigned char length[8];
  STRATA_RETURN_IF_ERROR(read_at(0, 8, reinterpret_cast<char*>(length)));
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = n << 8 | length[i];
  if (n > kMaxSafetensorsHeaderBytes || n > size - 8) {
    return Bad(
        path, absl::StrFormat("a header of %d bytes (the file has %d after the "
                              "length; the format allows at most %d)",
                              n, size - 8, kMaxSafetensorsHeaderBytes));
  }
  std::string text(n, '\0');
  STRATA_RETURN_IF_ERROR(read_at(8, n, text.data()));
  return DecodeSafetensorsHeader(text, size - 8 - n, path);
}

}  // namespace strata::train
