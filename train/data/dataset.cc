// dataset.cc: the IDX reader and the deterministic epoch shuffle.
//
// Files are read through zlib's gz* interface, which decompresses gzip and
// passes plain files through unchanged. Pixels are read in 1 MiB chunks and
// normalised through a 256-entry table as they arrive, so memory grows with
// the data actually present, never with what a corrupt header claims. Every
// file is read to its end: the gzip CRC is only checked there, and bytes past
// the promised data are rejected.
#include "train/data/dataset.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cassert>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <random>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/splitmix64.h"
#include "strata/status.h"

namespace strata::train {
namespace {

constexpr uint32_t kImageMagic = 0x00000803;  // uint8 data, 3 dimensions
constexpr uint32_t kLabelMagic = 0x00000801;  // uint8 data, 1 dimension
constexpr uint32_t kMaxImageSide = 1u << 16;
constexpr int64_t kChunkBytes = int64_t{1} << 20;
constexpr int64_t kMaxReserve = int64_t{1} << 26;  // elements reserved up front
// The most bytes deflate expands one byte into (zlib's technical details:
// 1032:1 at best), so a file of n bytes holds at most n * this of data.
constexpr int64_t kMaxInflation = 1032;

constexpr char kRefetchHint[] =
    "the file is incomplete or corrupt; download it again (or reinstall "
    "dataset-fashion-mnist)";

// A gzip-or-plain file open for reading; closes it on destruction.
class GzFile {
 public:
  static absl::StatusOr<GzFile> Open(const std::string& path);
  GzFile(GzFile&& other) noexcept
      : path_(std::move(other.path_)), file_(std::exchange(other.file_, {})) {}
  GzFile& operator=(GzFile&&) = delete;
  ~GzFile() {
    if (file_ != nullptr) gzclose(file_);
  }

  const std::string& path() const { return path_; }
  // Reads exactly `n` bytes into `dst`; DataLoss naming `what` if the file
  // ends first or the gzip stream is corrupt.
  absl::Status ReadExact(void* dst, int64_t n, const char* what);
  // Returns OK if the file has no bytes left (which also verifies the gzip
  // CRC); DataLoss otherwise.
  absl::Status ExpectEnd(const char* after);
  // Reads up to `n` bytes, fewer only at the end of the file; returns the
  // count, or DataLoss if the gzip stream is corrupt.
  absl::StatusOr<int64_t> ReadSome(void* dst, int64_t n);
  // DataLoss: `what` should be `want` bytes but the file ends after `got`.
  absl::Status Truncated(const char* what, int64_t got, int64_t want) const;

 private:
  GzFile(std::string path, gzFile file) : path_(std::move(path)), file_(file) {}

  std::string path_;
  gzFile file_ = nullptr;
};

absl::StatusOr<GzFile> GzFile::Open(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    return absl::Status(
        absl::ErrnoToStatusCode(err),
        absl::StrFormat("%s: cannot open (%s); check the path or --data-dir",
                        path, std::strerror(err)));
  }
  gzFile file = gzdopen(fd, "rb");
  if (file == nullptr) {
    close(fd);
    return absl::ResourceExhaustedError(
        absl::StrFormat("%s: zlib could not allocate a reader", path));
  }
  gzbuffer(file, 1u << 18);
  return GzFile(path, file);
}

absl::StatusOr<int64_t> GzFile::ReadSome(void* dst, int64_t n) {
  auto* out = static_cast<unsigned char*>(dst);
  int64_t done = 0;
  while (done < n) {
    const auto want =
        static_cast<unsigned>(std::min<int64_t>(n - done, kChunkBytes));
    const int got = gzread(file_, out + done, want);
    int errnum = Z_OK;
    const char* message = gzerror(file_, &errnum);
    if (errnum == Z_ERRNO) {
      return absl::DataLossError(absl::StrFormat(
          "%s: read failed (%s); check the path and the disk", path_, message));
    }
    if (got < 0 || (errnum != Z_OK && errnum != Z_STREAM_END)) {
      return absl::DataLossError(
          absl::StrFormat("%s: corrupt gzip data (zlib: %s); %s", path_,
                          message, kRefetchHint));
    }
    if (got == 0) break;
    done += got;
  }
  return done;
}

absl::Status GzFile::ReadExact(void* dst, int64_t n, const char* what) {
  STRATA_ASSIGN_OR_RETURN(const int64_t got, ReadSome(dst, n));
  if (got == n) return absl::OkStatus();
  return Truncated(what, got, n);
}

absl::Status GzFile::Truncated(const char* what, int64_t got,
                               int64_t want) const {
  return absl::DataLossError(absl::StrFormat(
      "%s: truncated: %s should be %d bytes but the file ends after %d of "
      "them; %s",
      path_, what, want, got, kRefetchHint));
}

absl::Status GzFile::ExpectEnd(const char* after) {
  unsigned char byte = 0;
  STRATA_ASSIGN_OR_RETURN(const int64_t got, ReadSome(&byte, 1));
  if (got == 0) return absl::OkStatus();
  return absl::DataLossError(absl::StrFormat(
      "%s: unexpected bytes after %s (the header and the data disagree); %s",
      path_, after, kRefetchHint));
}

// Reads a big-endian uint32.
absl::StatusOr<uint32_t> ReadWord(GzFile& file) {
  unsigned char raw[4];
  STRATA_RETURN_IF_ERROR(file.ReadExact(raw, 4, "the IDX header"));
  return uint32_t{raw[0]} << 24 | uint32_t{raw[1]} << 16 |
         uint32_t{raw[2]} << 8 | uint32_t{raw[3]};
}

// Reads and checks the magic number, then fills `dims` from the header.
absl::Status ReadHeader(GzFile& file, uint32_t magic, const char* kind,
                        std::vector<uint32_t>& dims) {
  STRATA_ASSIGN_OR_RETURN(const uint32_t found, ReadWord(file));
  if (found != magic) {
    return absl::DataLossError(absl::StrFormat(
        "%s: bad magic 0x%08x, expected 0x%08x (IDX %s file); check that "
        "the path names the right file",
        file.path(), found, magic, kind));
  }
  for (uint32_t& dim : dims) {
    STRATA_ASSIGN_OR_RETURN(dim, ReadWord(file));
  }
  return absl::OkStatus();
}

absl::Status CheckImageDims(const std::string& path, uint32_t count,
                            uint32_t rows, uint32_t cols) {
  if (count == 0 || rows == 0 || cols == 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: header says %u images of %ux%u; every dimension must be "
        "positive — use a non-empty data set",
        path, count, rows, cols));
  }
  if (rows > kMaxImageSide || cols > kMaxImageSide) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: header says images of %ux%u, more than %u on a side; this is "
        "not a small-image data set — check the file",
        path, rows, cols, kMaxImageSide));
  }
  // 2^40 pixels (a terabyte of floats) is far beyond any set this loads; the
  // check also keeps count * rows * cols from overflowing.
  constexpr uint64_t kMaxPixels = uint64_t{1} << 40;
  if (uint64_t{rows} * cols > kMaxPixels / count) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: header says %u images of %ux%u, more than 2^40 pixels in all — "
        "check the file",
        path, count, rows, cols));
  }
  return absl::OkStatus();
}

// The normalised float for each pixel value.
std::array<float, 256> NormaliseTable() {
  std::array<float, 256> table{};
  for (int p = 0; p < 256; ++p) {
    table[p] = (static_cast<float>(p) / 255.0f - kPixelMean) / kPixelStd;
  }
  return table;
}

// Reads `total` pixels from `file`, appending them normalised to `out`.
absl::Status ReadPixels(GzFile& file, int64_t total, std::vector<float>& out) {
  static const std::array<float, 256> kTable = NormaliseTable();
  // Reserved up front: what the header says, never more than the file could
  // hold (a damaged header's count is not a reason to allocate).
  std::error_code error;
  const auto file_bytes = std::filesystem::file_size(file.path(), error);
  const int64_t could_hold =
      error ? 0
            : static_cast<int64_t>(std::min<uintmax_t>(
                  file_bytes, kMaxReserve / kMaxInflation)) *
                  kMaxInflation;
  out.reserve(static_cast<size_t>(std::min({total, kMaxReserve, could_hold})));
  std::vector<unsigned char> chunk(static_cast<size_t>(kChunkBytes));
  for (int64_t done = 0; done < total;) {
    const int64_t want = std::min(total - done, kChunkBytes);
    STRATA_ASSIGN_OR_RETURN(const int64_t got,
                            file.ReadSome(chunk.data(), want));
    const size_t old_size = out.size();
    out.resize(old_size + static_cast<size_t>(got));
    std::transform(chunk.begin(), chunk.begin() + got, out.begin() + old_size,
                   [](unsigned char p) { return kTable[p]; });
    done += got;
    if (got < want) return file.Truncated("the pixel data", done, total);
  }
  return absl::OkStatus();
}

// Reads an IDX image file into count, rows, cols and images of `d`.
absl::Status ReadImages(const std::string& path, Dataset& d) {
  STRATA_ASSIGN_OR_RETURN(GzFile file, GzFile::Open(path));
  std::vector<uint32_t> dims(3);
  STRATA_RETURN_IF_ERROR(ReadHeader(file, kImageMagic, "image", dims));
  STRATA_RETURN_IF_ERROR(CheckImageDims(path, dims[0], dims[1], dims[2]));
  d.count = dims[0];
  d.rows = static_cast<int>(dims[1]);
  d.cols = static_cast<int>(dims[2]);
  STRATA_RETURN_IF_ERROR(ReadPixels(file, d.count * d.features(), d.images));
  return file.ExpectEnd("the pixel data");
}

// Checks every label of `d` is below `d.classes`.
absl::Status CheckLabels(const std::string& path, const Dataset& d) {
  for (int64_t i = 0; i < d.count; ++i) {
    if (d.labels[i] >= d.classes) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: label %d of sample %d is not below the %d classes; pass the "
          "right class count or check the file",
          path, d.labels[i], i, d.classes));
    }
  }
  return absl::OkStatus();
}

// Reads an IDX label file whose count must match `d.count` into `d.labels`.
absl::Status ReadLabels(const std::string& path, Dataset& d) {
  STRATA_ASSIGN_OR_RETURN(GzFile file, GzFile::Open(path));
  std::vector<uint32_t> dims(1);
  STRATA_RETURN_IF_ERROR(ReadHeader(file, kLabelMagic, "label", dims));
  if (dims[0] != d.count) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: %u labels for the %d images of the image file; pair each image "
        "file with its own label file",
        path, dims[0], d.count));
  }
  std::vector<unsigned char> raw(static_cast<size_t>(d.count));
  STRATA_RETURN_IF_ERROR(file.ReadExact(raw.data(), d.count, "the labels"));
  STRATA_RETURN_IF_ERROR(file.ExpectEnd("the labels"));
  d.labels.assign(raw.begin(), raw.end());
  return CheckLabels(path, d);
}

// A uniform draw from [0, bound), bound > 0, by masked rejection: no modulo,
// so the result depends only on the engine's (standard-fixed) outputs.
uint64_t UniformBelow(std::mt19937_64& rng, uint64_t bound) {
  const uint64_t mask = std::bit_ceil(bound) - 1;
  while (true) {
    const uint64_t x = rng() & mask;
    if (x < bound) return x;
  }
}

// Returns the path of `name` in `dir`, preferring "name.gz" over "name", or
// an empty string if neither exists.
std::string FindFile(const std::string& dir, const std::string& name) {
  for (const std::string& candidate : {name + ".gz", name}) {
    const std::filesystem::path path = std::filesystem::path(dir) / candidate;
    std::error_code error;
    if (std::filesystem::exists(path, error)) return path.string();
  }
  return "";
}

}  // namespace

absl::StatusOr<Dataset> LoadIdx(const std::string& images_path,
                                const std::string& labels_path, int classes) {
  if (classes < 1 || classes > 256) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%d classes requested for %s; uint8 labels allow 1 to 256", classes,
        labels_path));
  }
  Dataset d;
  d.classes = classes;
  STRATA_RETURN_IF_ERROR(ReadImages(images_path, d));
  STRATA_RETURN_IF_ERROR(ReadLabels(labels_path, d));
  return d;
}

absl::StatusOr<FashionMnist> LoadFashionMnist(const std::string& dir) {
  const std::array<std::string, 4> names = {
      "train-images-idx3-ubyte", "train-labels-idx1-ubyte",
      "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"};
  std::array<std::string, 4> paths;
  std::vector<std::string> missing;
  for (size_t i = 0; i < names.size(); ++i) {
    paths[i] = FindFile(dir, names[i]);
    if (paths[i].empty()) missing.push_back(names[i] + "[.gz]");
  }
  if (!missing.empty()) {
    return absl::NotFoundError(absl::StrFormat(
        "Fashion-MNIST not found in %s: missing %s; install it with "
        "`apt-get install dataset-fashion-mnist`, or pass --data-dir with a "
        "directory holding %s.gz (each also accepted without .gz)",
        dir, absl::StrJoin(missing, ", "), absl::StrJoin(names, ".gz, ")));
  }
  FashionMnist data;
  STRATA_ASSIGN_OR_RETURN(data.train, LoadIdx(paths[0], paths[1]));
  STRATA_ASSIGN_OR_RETURN(data.test, LoadIdx(paths[2], paths[3]));
  return data;
}

std::vector<int64_t> EpochOrder(int64_t count, uint64_t seed, int epoch) {
  if (count <= 0) return {};
  std::vector<int64_t> order(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) order[i] = i;
  const uint64_t epoch_bits = static_cast<uint64_t>(int64_t{epoch});
  std::mt19937_64 rng(
      SplitMix64Mix(SplitMix64Mix(seed) ^ (epoch_bits * kSplitMix64Gamma)));
  for (int64_t i = count - 1; i > 0; --i) {
    const auto j =
        static_cast<int64_t>(UniformBelow(rng, static_cast<uint64_t>(i) + 1));
    std::swap(order[i], order[j]);
  }
  return order;
}

void GatherBatch(const Dataset& d, const std::vector<int64_t>& order,
                 int64_t first, int64_t batch, float* images_out,
                 int32_t* labels_out) {
  assert(first >= 0 && batch >= 0 &&
         first + batch <= static_cast<int64_t>(order.size()));
  const int64_t features = d.features();
  for (int64_t i = 0; i < batch; ++i) {
    const int64_t sample = order[first + i];
    assert(sample >= 0 && sample < d.count);
    std::memcpy(images_out + i * features, d.images.data() + sample * features,
                static_cast<size_t>(features) * sizeof(float));
    labels_out[i] = d.labels[sample];
  }
}

}  // namespace strata::train
