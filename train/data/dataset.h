// dataset.h: the image-classification data `strata train` learns from — an
// IDX reader (the MNIST / Fashion-MNIST file format, gzip'd or plain), the
// Fashion-MNIST loader, and the deterministic per-epoch shuffle and batch
// gather the training loop draws minibatches with.
//
// Everything here is plain host memory and pure functions; a Dataset is a
// value type and is safe to read from many threads at once.
#ifndef STRATA_TRAIN_DATA_DATASET_H_
#define STRATA_TRAIN_DATA_DATASET_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace strata::train {

// One split of an image-classification set, ready to train on.
struct Dataset {
  int64_t count = 0;       // samples
  int rows = 0, cols = 0;  // image size (28 x 28 for Fashion-MNIST)
  int classes = 10;        // labels are in [0, classes)
  // count x (rows*cols), row-major, normalised:
  // (pixel/255 - kPixelMean) / kPixelStd.
  std::vector<float> images;
  std::vector<int32_t> labels;  // count
  int64_t features() const { return int64_t{rows} * cols; }
};

// Mean and (population) standard deviation of pixel/255 over all 47,040,000
// pixels of the Fashion-MNIST training set, computed once in double from
// train-images-idx3-ubyte.gz (0.2860405969887955 and 0.3530242445149226).
// The same constants normalise every split, so the test set sees the
// training set's statistics.
inline constexpr float kPixelMean = 0.28604060f;
inline constexpr float kPixelStd = 0.35302424f;
inline constexpr char kFashionMnistDir[] = "/usr/share/datasets/fashion-mnist";

// Reads an IDX image file (magic 0x00000803; big-endian uint32 count, rows,
// cols; then count*rows*cols uint8 pixels) and its IDX label file (magic
// 0x00000801; count; then count uint8 labels). Each may be gzip-compressed or
// plain. On success returns the normalised Dataset with `classes` set.
// Errors, each naming the file:
//   NotFound         a file does not exist.
//   PermissionDenied / other errno codes  a file cannot be opened.
//   DataLoss         bad magic, a file shorter than its header promises,
//                    bytes after the promised data (rejected: they mean the
//                    header and the data disagree), or a corrupt gzip stream
//                    (CRC or format error). Bytes after the end of a gzip
//                    stream are not data and are ignored, as zlib and gzip(1)
//                    do.
//   InvalidArgument  image and label counts differ, a label >= classes,
//                    classes outside [1, 256], a zero dimension, rows or
//                    cols > 65536, or more than 2^40 pixels in all.
absl::StatusOr<Dataset> LoadIdx(const std::string& images_path,
                                const std::string& labels_path,
                                int classes = 10);

struct FashionMnist {
  Dataset train, test;
};

// Loads train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz,
// t10k-images-idx3-ubyte.gz and t10k-labels-idx1-ubyte.gz from `dir`; each
// name is also accepted without ".gz". Returns NotFound, listing `dir` and the
// names it looked for, when a file is missing (`apt-get install
// dataset-fashion-mnist`, or --data-dir, fixes it); otherwise LoadIdx's
// errors.
absl::StatusOr<FashionMnist> LoadFashionMnist(
    const std::string& dir = kFashionMnistDir);

// Returns a shuffled order of [0, count) for epoch `epoch` under `seed`: the
// same seed and epoch give the same order on every machine and standard
// library (Fisher-Yates over std::mt19937_64, whose output the standard fixes,
// with rejection-sampled bounded draws). Returns an empty vector for
// count <= 0.
std::vector<int64_t> EpochOrder(int64_t count, uint64_t seed, int epoch);

// Copies samples order[first .. first+batch) of `d` into `images_out`
// (batch x d.features() floats, row-major) and `labels_out` (batch int32s).
// Requires 0 <= first, first+batch <= order.size() and every order entry in
// [0, d.count); the caller owns both output buffers.
void GatherBatch(const Dataset& d, const std::vector<int64_t>& order,
                 int64_t first, int64_t batch, float* images_out,
                 int32_t* labels_out);

}  // namespace strata::train

#endif  // STRATA_TRAIN_DATA_DATASET_H_
