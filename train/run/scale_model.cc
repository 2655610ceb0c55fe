// scale_model.cc: the sharded data-parallel model on paper (see
// scale_model.h).
#include "train/run/scale_model.h"

#include <algorithm>
#include <cmath>
#include <string_view>
#include <utility>

#include "absl/strings/str_format.h"
#include "strata/options.h"
#include "strata/status.h"

namespace strata::train {
namespace {

constexpr double kG = 1e9;

GptConfig Shape(int layers, int heads, int64_t embed, int64_t context) {
  GptConfig c;
  c.layers = layers;
  c.heads = heads;
  c.embed = embed;
  c.context = context;
  c.vocab = 50257;  // GPT-2's BPE vocabulary
  return c;
}

absl::Status CheckProfile(const RankProfile& p) {
  const std::pair<const char*, double> positive[] = {
      {"device bytes", p.device_bytes},
      {"host bytes", p.host_bytes},
      {"h2d GB/s", p.h2d_gbps},
      {"d2h GB/s", p.d2h_gbps},
      {"interconnect GB/s", p.net_gbps},
      {"device TFLOPS", p.device_tflops},
      {"host Adam rate", p.host_adam_gps},
      {"tokens per rank", static_cast<double>(p.tokens_per_rank)},
      {"micro-batches", static_cast<double>(p.micro_batches)},
      {"ranks per node", static_cast<double>(p.ranks_per_node)}};
  for (const auto& [what, v] : positive) {
    if (!(v > 0) || !std::isfinite(v)) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s = %g: must be a positive number", what, v));
    }
  }
  const std::pair<const char*, double> non_negative[] = {
      {"NVMe bytes", p.nvme_bytes},
      {"interconnect latency (s)", p.net_latency_s},
      {"intra-node GB/s", p.intra_node_gbps}};
  for (const auto& [what, v] : non_negative) {
    if (!(v >= 0) || !std::isfinite(v)) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s = %g: must be >= 0", what, v));
    }
  }
  if (p.nvme_bytes > 0 && !(p.nvme_read_gbps > 0 && p.nvme_write_gbps > 0)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "NVMe read %g / write %g GB/s: an NVMe tier needs positive "
        "bandwidths",
        p.nvme_read_gbps, p.nvme_write_gbps));
  }
  return absl::OkStatus();
}

// Places `bytes` on the fastest tiers with room left in `free` (device,
// host, NVMe), filling each before the next: `split` receives the bytes on
// each. False when they do not all fit.
bool Place(double bytes, double free[3], ScaleSplit& split) {
  for (int t = 0; t < 3 && bytes > 0; ++t) {
    const double here = std::min(bytes, std::max(0.0, free[t]));
    free[t] -= here;
    split.on[t] += here;
    bytes -= here;
  }
  return bytes <= 0;
}

const char* kTierNames[] = {"device", "host", "nvme"};

}  // namespace

std::string ScaleSplit::Where() const {
  std::string where;
  for (int t = 0; t < 3; ++t) {
    if (on[t] <= 0) continue;
    if (!where.empty()) where += "+";
    where += kTierNames[t];
  }
  return where.empty() ? "-" : where;
}

namespace {}  // namespace

const std::vector<ScaleShape>& ScaleShapes() {
  static const std::vector<ScaleShape> shapes = {
      {"gpt2-xl", Shape(48, 25, 1600, 1024)},
      {"gpt3-175b", Shape(96, 96, 12288, 2048)},
      {"1t", Shape(128, 160, 25600, 2048)},
      {"32t", Shape(128, 128, 144384, 2048)},
  };
  return shapes;
}

absl::StatusOr<ScaleEstimate> EstimateScale(const ScaleShape& shape,
                                            const RankProfile& p, int ranks) {
  if (ranks < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%d ranks: need at least 1", ranks));
  }
  STRATA_RETURN_IF_ERROR(CheckProfile(p));
  const GptConfig& c = shape.config;
  const double N = ranks, L = c.layers, C = static_cast<double>(c.embed);
  const double S = static_cast<double>(c.context), H = c.heads;
  const double T = static_cast<double>(p.tokens_per_rank);
  const double P = static_cast<double>(GptParameterCount(c));
  ScaleEstimate e;
  e.shape = shape.name;
  e.ranks = ranks;
  e.parameters = P;
  const double shard = P / N;  // parameters each rank owns
  e.state_bytes = 16 * shard;
  // The largest operator (the MLP's 4C x C weight) is gathered in tiles
  // of at most a quarter of the device, three at a time: the one computing,
  // the one prefetched, one tile of gradients (ZeRO-Infinity's
  // memory-centric tiling).
  const double op = 2 * 4 * C * C;
  const double tiles = std::ceil(3 * op / (p.device_bytes / 4));
  e.device_working_bytes =
      3 * op / std::max(1.0, tiles) + T * C * (34 + 5 * H * S / C);
  double free[3] = {p.device_bytes - e.device_working_bytes, p.host_bytes,
                    p.nvme_bytes};
  if (free[0] < 0) {
    e.why_not = absl::StrFormat(
        "the device working set (%.1f GB: gathered tiles, one block's "
        "activations for %d tokens) exceeds the device's %.1f GB: fewer "
        "tokens per rank",
        e.device_working_bytes / kG, p.tokens_per_rank, p.device_bytes / kG);
    return e;
  }
  // Each block's checkpointed input: on the device, or the host (never
  // NVMe, as in ZeRO-Infinity); then down after forward, up for backward.
  const double checkpoints = L * 2 * T * C;
  // First, since they cannot spill to NVMe.
  double above_nvme[3] = {free[0], free[1], 0};
  bool placed = Place(checkpoints, above_nvme, e.checkpoints_split);
  free[0] = above_nvme[0];
  free[1] = above_nvme[1];
  placed = placed && Place(2 * shard, free, e.parameters_split) &&
           Place(2 * shard, free, e.gradients_split);
  placed = placed && Place(12 * shard, free, e.optimizer_split);
  if (!placed) {
    e.why_not = absl::StrFormat(
        "%.1f GB of model state and %.1f GB of activation checkpoints per "
        "rank do not fit beside the working set: more ranks or more memory",
        e.state_bytes / kG, checkpoints / kG);
    return e;
  }
  for (const ScaleSplit* split :
       {&e.parameters_split, &e.gradients_split, &e.optimizer_split}) {
    for (int t = 0; t < 3; ++t) e.state_on[t] += split->on[t];
  }
  e.fits = true;
  // Fractions of each component below the device and on NVMe.
  const auto below = [](const ScaleSplit& x, double total) {
    return (x.on[1] + x.on[2]) / total;
  };
  const auto on_nvme = [](const ScaleSplit& x, double total) {
    return x.on[2] / total;
  };
  const double micro = p.micro_batches;
  // Collectives: two all-gathers of the parameters, one reduce-scatter of
  // the gradients, each sending (N - 1) / N of the 16-bit model per rank.
  e.sent_bytes = micro * 3 * 2 * P * (N - 1) / N;
  const double net = ranks <= p.ranks_per_node && p.intra_node_gbps > 0
                         ? p.intra_node_gbps
                         : p.net_gbps;
  e.comm_s =
      e.sent_bytes / (net * kG) + micro * 3 * L * (N - 1) * p.net_latency_s;
  const double params = 2 * shard, grads = 2 * shard, opt = 12 * shard;
  const double p_below = below(e.parameters_split, params);
  const double p_nvme = on_nvme(e.parameters_split, params);
  const double o_below = below(e.optimizer_split, opt);
  // The parameter shard's part below the device crosses up for each
  // gather, read from NVMe first where it lives there; once updated, that
  // part is written back to NVMe.
  e.h2d_bytes += micro * 2 * params * p_below;
  e.nvme_read_bytes += micro * 2 * params * p_nvme;
  e.nvme_write_bytes += params * p_nvme;
  // The gradients the host updates cross down once a step; those kept on
  // NVMe until the update are written and read back.
  e.d2h_bytes += grads * o_below;
  const double g_nvme = on_nvme(e.gradients_split, grads);
  e.nvme_write_bytes += grads * g_nvme;
  e.nvme_read_bytes += grads * g_nvme;
  // Parameters on the device that the host updated cross back up.
  e.h2d_bytes += params * (1 - p_below) * o_below;
  // The optimizer state on NVMe is read and written once a step.
  e.nvme_read_bytes += opt * on_nvme(e.optimizer_split, opt);
  e.nvme_write_bytes += opt * on_nvme(e.optimizer_split, opt);
  e.optimizer_s = shard * o_below / (p.host_adam_gps * kG);
  const double c_host = e.checkpoints_split.on[1] / checkpoints;
  e.d2h_bytes += micro * checkpoints * c_host;
  e.h2d_bytes += micro * checkpoints * c_host;
  e.link_s = std::max(e.h2d_bytes / (p.h2d_gbps * kG),
                      e.d2h_bytes / (p.d2h_gbps * kG));
  if (e.nvme_read_bytes + e.nvme_write_bytes > 0) {
    e.nvme_s = e.nvme_read_bytes / (p.nvme_read_gbps * kG) +
               e.nvme_write_bytes / (p.nvme_write_gbps * kG);
  }
  const double attention = micro * 4 * L * S * C * T;  // forward: QK^T, AV
  e.compute_s = (micro * 8 * P * T + 4 * attention) / (p.device_tflops * 1e12);
  const std::pair<const char*, double> terms[] = {
      {"compute", e.compute_s},
      {"interconnect", e.comm_s},
      {"host<->device", e.link_s},
      {"nvme", e.nvme_s},
      {"host optimizer", e.optimizer_s}};
  for (const auto& [name, s] : terms) {
    e.serial_step_s += s;
    if (s > e.step_s) {
      e.step_s = s;
      e.bound = name;
    }
  }
  e.tflops_per_rank = (micro * 6 * P * T + 3 * attention) / e.step_s / 1e12;
  return e;
}

int MicroBatchesToComputeBound(const ScaleShape& shape, RankProfile profile,
                               int ranks) {
  for (int m = 1; m <= 65536; m *= 2) {
    profile.micro_batches = m;
    absl::StatusOr<ScaleEstimate> e = EstimateScale(shape, profile, ranks);
    if (!e.ok() || !e->fits) return 0;
    if (std::string_view(e->bound) == "compute") return m;
  }
  return 0;
}

RankProfile Dgx2V100Rank() {
  constexpr double kRanks = 16;  // V100s in a DGX-2
  return {.device_bytes = 32.0 * kGiB,
          .host_bytes = 1.5e12 / kRanks,
          .nvme_bytes = 28e12 / kRanks,
          .h2d_gbps = 12,  // PCIe 3.0 x16, as measured on such hosts
          .d2h_gbps = 12,
          .nvme_read_gbps = 25.0 / kRanks,  // assumed: ~25 GB/s a node
          .nvme_write_gbps = 25.0 / kRanks,
          .net_gbps = 100.0 / kRanks,  // 8 x 100 Gb/s a node
          .net_latency_s = 5e-6,
          .ranks_per_node = 16,
          .intra_node_gbps = 150,      // NVSwitch
          .device_tflops = 0.4 * 125,  // 40 % of the V100's 125 TFLOPS
          .host_adam_gps = 0.5,        // assumed: 3 Xeon cores a rank
          .tokens_per_rank = 2048};    // a sequence a GPU, as for fine-tuning
}

const std::vector<PublishedScale>& ZeroInfinityFigures() {
  static const std::vector<PublishedScale> figures = {
      {"1T parameters fine-tuned on one DGX-2 node", 1e12, 16, 0},
      {"32T parameters trained on 32 DGX-2 nodes", 32e12, 512, 0},
      {"over 25 PFLOPS sustained on 512 V100s (40 % of peak)", 0, 512, 25},
  };
  return figures;
}

}  // namespace strata::train
