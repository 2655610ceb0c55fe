// optimizer_parts.cc: the parts of a parameter's optimizer state (see
// optimizer_parts.h).
#include "train/model/optimizer_parts.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace strata::train {

std::vector<OptimizerPart> OptimizerParts(int64_t elements) {
  std::vector<OptimizerPart> parts;
  for (int64_t first = 0; first < elements; first += kOptimizerPartElements) {
    parts.push_back(
        {first, std::min(kOptimizerPartElements, elements - first)});
  }
  return parts;
}

std::string OptimizerPartName(const std::string& base, int k, int parts) {
  return parts == 1 ? base : absl::StrCat(base, ".part", k);
}

}  // namespace strata::train
