// idx_dataset_fuzzer.cc: LoadIdx, the reader of the MLP's IDX image and
// label files (Fashion-MNIST's format, gzip-compressed or plain). The input
// is the image file and the label file joined by kPartSeparator. A pair
// that loads holds count x rows x cols finite pixels and labels inside the
// classes.
#include <cmath>
#include <string>
#include <vector>

#include "tests/fuzz/fuzz_target.h"
#include "train/data/dataset.h"

STRATA_FUZZ_TARGET(idx_dataset) {
  using namespace strata;
  const std::vector<std::string_view> parts = fuzz::SplitParts(data, 2);
  const std::string dir = fuzz::FreshScratchDir();
  fuzz::WriteFile(dir + "/images", parts[0]);
  fuzz::WriteFile(dir + "/labels", parts[1]);
  auto set = train::LoadIdx(dir + "/images", dir + "/labels", 10);
  STRATA_FUZZ_CHECK_REFUSAL(set.status());
  if (!set.ok()) return false;
  STRATA_FUZZ_CHECK(set->count > 0 && set->rows > 0 && set->cols > 0);
  STRATA_FUZZ_CHECK(set->images.size() ==
                    static_cast<size_t>(set->count * set->features()));
  STRATA_FUZZ_CHECK(set->labels.size() == static_cast<size_t>(set->count));
  for (int32_t label : set->labels) {
    STRATA_FUZZ_CHECK(label >= 0 && label < set->classes);
  }
  for (float p : set->images) STRATA_FUZZ_CHECK(std::isfinite(p));
  return true;
}
