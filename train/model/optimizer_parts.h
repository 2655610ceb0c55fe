// optimizer_parts.h: how a parameter's optimizer state is cut into parts.
//
// Adam's moments (and, under mixed precision, the fp32 master weights) of a
// parameter tensor are kept as store tensors of at most kOptimizerPartElements
// elements each, so the host optimizer can lease one part at a time and work
// through a tensor in chunks: the host tier then never has to hold a whole
// weight, its gradient and both moments at once (ZeRO-Infinity swaps its
// optimizer state by sub-groups the same way, Rajbhandari et al., 2021, but
// asks its users to size them: DeepSpeed's sub_group_size). The part size is
// fixed, not a knob: small enough that four parts fit the smallest host
// budget worth training with, large enough that a part's transfer is
// bandwidth, not per-request latency (a 4 KiB read costs ~100 us, a 4 MiB
// one ~1 ms at 4 GB/s). Adam is elementwise, so the parts give the same bits
// as one whole update. A tensor of one part keeps its plain name, so
// checkpoints of layers up to 4 MiB read as before.
#ifndef STRATA_TRAIN_MODEL_OPTIMIZER_PARTS_H_
#define STRATA_TRAIN_MODEL_OPTIMIZER_PARTS_H_

#include <cstdint>
#include <string>
#include <vector>

namespace strata::train {

// Elements per part: 1 Mi (4 MiB of fp32).
inline constexpr int64_t kOptimizerPartElements = int64_t{1} << 20;

// Part k covers elements [first, first + count) of its parameter.
struct OptimizerPart {
  int64_t first = 0;
  int64_t count = 0;
};

// The parts of a parameter of `elements` (>= 1) elements, in order: every
// part but the last holds kOptimizerPartElements.
std::vector<OptimizerPart> OptimizerParts(int64_t elements);

// The name of part k of `parts`: `base` itself for a single part, else
// "<base>.part<k>".
std::string OptimizerPartName(const std::string& base, int k, int parts);

}  // namespace strata::train

#endif  // STRATA_TRAIN_MODEL_OPTIMIZER_PARTS_H_
