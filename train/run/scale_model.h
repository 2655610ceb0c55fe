// scale_model.h: a model, on paper, of ZeRO-3-style sharded data
// parallelism over N ranks (Rajbhandari et al., ZeRO, 2020; ZeRO-Infinity,
// 2021): per-rank memory on each tier, bytes communicated and moved per step,
// and the step time those imply, from one rank's profile (tier budgets, the
// host<->device link and NVMe bandwidths `strata bench --profile` measures,
// and the interconnect, compute rate and host optimizer rate, given).
//
// The model, per step and per rank, for a GPT-2 style transformer of P
// parameters in mixed precision (16-bit parameters and gradients, fp32
// master weights and two Adam moments: 16 bytes a parameter) on T tokens:
//   - State: 16 P / N bytes, placed kind by kind after the activation
//     checkpoints (16-bit parameters, 16-bit gradients, the 12 bytes of
//     optimizer state), each filling the fastest
//     tier with room after the device's working set and spilling to the
//     next, as ZeRO-Infinity places them on GPU, CPU or NVMe.
//   - Device working set: the largest operator's (the MLP's 4C x C) 16-bit
//     parameters gathered, another prefetched and its gradients before
//     their reduce-scatter — in tiles of at most a quarter of the device
//     when that is too large (ZeRO-Infinity's memory-centric tiling) — and
//     one block's full activations (T C (34 + 5 H S / C) bytes, Korthikanti
//     et al., 2022). Each block's checkpointed input (2 T C bytes) stays on
//     the device when it fits, else on the host (crossing down after
//     forward and up for backward).
//   - Communication, per micro-batch: all-gather of the parameters in
//     forward and again in backward, reduce-scatter of the gradients:
//     3 x 2 P (N - 1) / N bytes sent, in 3 L collectives, each paying
//     (N - 1) latencies (ring); at the intra-node bandwidth while the ranks
//     share a node, else at the inter-node one (the slowest hop of the
//     ring).
//   - Link and NVMe: the part of the parameter shard below the device
//     crosses H2D for each of the two gathers of each micro-batch (read
//     from NVMe first where it lives there, and written back there once
//     updated); once a step the gradients of the part the host updates
//     cross D2H (written to and read back from NVMe where they are kept
//     there), the optimizer state on NVMe is read and written, and
//     parameters on the device the host updated cross back H2D.
//   - Compute: 8 P T FLOPs (forward, recompute under checkpointing,
//     backward) plus attention's 16 L S C T, at the given sustained rate;
//     the host optimizer updates its P / N parameters at its measured rate.
//   - Step: max of the terms (every transfer overlapped with compute, as
//     strata's prefetch and ZeRO-Infinity's overlap-centric design aim for)
//     and their sum (nothing overlapped): the truth lies between.
// Left out: pipeline bubbles and stragglers, collective contention on
// shared links (per-rank bandwidth is taken as given), NVMe and PCIe shared
// by the ranks of a node (give each rank its share), CPU cost of the
// transfers, the embedding's gradient (dense here), loss scaling's skipped
// steps, fragmentation, and compute efficiency falling at small per-rank
// batches.
#ifndef STRATA_TRAIN_RUN_SCALE_MODEL_H_
#define STRATA_TRAIN_RUN_SCALE_MODEL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "train/model/gpt_config.h"

namespace strata::train {

// A named transformer shape (GptConfig's layers, heads, embed, context,
// vocab) to estimate.
struct ScaleShape {
  std::string name;
  GptConfig config;
};

// GPT-2 XL (48 x 1600, 1.56 B), GPT-3 (96 x 12288, 175 B), ZeRO-Infinity's
// 1T (128 x 25600) and a 32T (128 x 143360) shape.
const std::vector<ScaleShape>& ScaleShapes();

// One rank's machine. Bandwidths in GB/s (1e9 bytes per second), each
// direction; bytes per rank.
struct RankProfile {
  double device_bytes = 0, host_bytes = 0, nvme_bytes = 0;
  double h2d_gbps = 0, d2h_gbps = 0;
  double nvme_read_gbps = 0, nvme_write_gbps = 0;
  double net_gbps = 0;       // interconnect between nodes, per rank
  double net_latency_s = 0;  // per hop of a ring collective
  // Ranks that share a node, and their bandwidth to each other (NVLink,
  // NVSwitch): collectives among at most this many ranks run at it.
  int ranks_per_node = 1;
  double intra_node_gbps = 0;
  double device_tflops = 0;     // sustained 16-bit matmul rate
  double host_adam_gps = 0;     // host optimizer, 1e9 parameters per second
  int64_t tokens_per_rank = 0;  // per micro-batch
  // Micro-batches per optimizer step (gradient accumulation): parameters are
  // gathered and gradients reduce-scattered for each; the optimizer state
  // moves once a step.
  int micro_batches = 1;
};

// Bytes of one kind of per-rank data on each tier (device, host, NVMe).
struct ScaleSplit {
  double on[3] = {0, 0, 0};
  // "device", "host+nvme", ...; "-" when empty.
  std::string Where() const;
};

struct ScaleEstimate {
  std::string shape;
  int ranks = 0;
  double parameters = 0;
  // Bytes per rank: model state, where it lives, the device's working set.
  double state_bytes = 0;
  double state_on[3] = {0, 0, 0};  // device, host, NVMe (Tier order)
  // Where each kind lives: each fills the fastest tier with room, then the
  // next (checkpoints first, as they cannot go to NVMe; then parameters,
  // gradients, optimizer state).
  ScaleSplit parameters_split, gradients_split, optimizer_split;
  ScaleSplit checkpoints_split;  // device and host only
  double device_working_bytes = 0;
  bool fits = false;
  std::string why_not;  // when !fits
  // Bytes per rank and step.
  double sent_bytes = 0;  // collectives
  double h2d_bytes = 0, d2h_bytes = 0;
  double nvme_read_bytes = 0, nvme_write_bytes = 0;
  // Seconds per step.
  double compute_s = 0, comm_s = 0, link_s = 0, nvme_s = 0, optimizer_s = 0;
  double step_s = 0;           // overlapped: the largest term
  double serial_step_s = 0;    // their sum
  const char* bound = "";      // the largest term's name
  double tflops_per_rank = 0;  // 6 P T + attention over step_s, in TFLOP/s
};

// The estimate for `shape` on `ranks` (>= 1) ranks of `profile`.
// InvalidArgument for ranks < 1 or a profile value that is not positive
// (zero NVMe bytes is allowed: no NVMe tier).
absl::StatusOr<ScaleEstimate> EstimateScale(const ScaleShape& shape,
                                            const RankProfile& profile,
                                            int ranks);

// The fewest micro-batches per step (a power of two up to 65536) at which
// compute is the largest term — the per-step transfers (optimizer state,
// gradients) then hide behind it; 0 when no count gets there (the
// per-micro-batch collectives or transfers outrun compute), or the shape
// does not fit.
int MicroBatchesToComputeBound(const ScaleShape& shape, RankProfile profile,
                               int ranks);

// A rank of ZeRO-Infinity's testbed, one of the 16 V100 32 GB GPUs of a
// DGX-2 node: its share of 1.5 TB of host memory, of 28 TB of NVMe (~25 GB/s
// assumed) and of 800 Gb/s of inter-node network, NVSwitch (150 GB/s) to
// the other 15, PCIe 3 x16, 40 % of 125 TFLOPS, one 2048-token sequence a
// micro-batch.
RankProfile Dgx2V100Rank();

// ZeRO-Infinity's published figures (Rajbhandari et al., SC'21): a model
// size trained on a number of DGX-2 GPUs, and the aggregate throughput
// stated for it (0: none stated).
struct PublishedScale {
  const char* what;
  double parameters;
  int ranks;
  double petaflops;
};
const std::vector<PublishedScale>& ZeroInfinityFigures();

}  // namespace strata::train

#endif  // STRATA_TRAIN_RUN_SCALE_MODEL_H_
