// scale_command.cc: `strata scale` (see scale_command.h).
#include "apps/scale_command.h"

#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "apps/cli/command_table.h"
#include "apps/cli/config_file.h"
#include "apps/cli/exit_code.h"
#include "apps/cli/output_path.h"
#include "apps/train_report.h"
#include "base/byte_size.h"
#include "strata/profile.h"
#include "strata/status.h"
#include "train/run/scale_model.h"

ABSL_DECLARE_FLAG(std::string, machine_profile);  // store_flags.cc

ABSL_FLAG(std::vector<std::string>, ranks,
          std::vector<std::string>({"1", "8", "64", "512"}),
          "Rank counts to estimate, comma-separated.");
ABSL_FLAG(std::vector<std::string>, shapes,
          std::vector<std::string>({"gpt2-xl", "gpt3-175b", "1t"}),
          "Transformer shapes to estimate, comma-separated: gpt2-xl (1.56 B "
          "parameters), gpt3-175b, 1t, 32t.");
ABSL_FLAG(strata::ByteSize, rank_device, strata::ByteSize{141'000'000'000},
          "Device memory per rank (141 GB: an H200's).");
ABSL_FLAG(strata::ByteSize, rank_host, strata::ByteSize{256'000'000'000},
          "Host memory per rank.");
ABSL_FLAG(strata::ByteSize, rank_nvme, strata::ByteSize{3'840'000'000'000},
          "NVMe capacity per rank (0: no NVMe tier).");
ABSL_FLAG(int64_t, tokens_per_rank, 2048,
          "Tokens each rank computes per micro-batch (its activations' "
          "size).");
ABSL_FLAG(int32_t, micro_batches, 1,
          "Micro-batches per optimizer step: each gathers the parameters and "
          "reduce-scatters the gradients; the optimizer state moves once.");
ABSL_FLAG(int32_t, ranks_per_node, 8,
          "Ranks that share a node's faster links (--intra-node-gbps).");
ABSL_FLAG(double, intra_node_gbps, 450,
          "Bandwidth between the ranks of a node, GB/s per rank (450: "
          "NVLink 4 on an H200 node; 0: none, the interconnect's).");
ABSL_FLAG(double, device_tflops, 400,
          "Sustained 16-bit matmul rate per rank, TFLOP/s (400: about 40 % "
          "of an H200's dense bf16 peak).");
ABSL_FLAG(double, net_gbps, 50,
          "Interconnect bandwidth per rank and direction, GB/s (50: a 400 "
          "Gb/s NIC per GPU).");
ABSL_FLAG(double, net_latency_us, 5,
          "Interconnect latency per hop of a ring collective, microseconds.");
ABSL_FLAG(double, host_adam_gps, 1,
          "Host optimizer rate per rank, 1e9 parameters per second "
          "(cpu_adam_bench measures it).");

namespace strata {
namespace {

using train::RankProfile;
using train::ScaleEstimate;

// The largest copy's bandwidth in a profile's sweep (0 if none).
double LargestCopyGbps(const std::vector<LinkPoint>& points) {
  return points.empty() ? 0 : points.back().gbps;
}

// Where the link and NVMe rates came from, for the banner.
struct RateSources {
  std::string link = "the lent H200's pinned copies, bench/gpu_check.sh";
  std::string nvme = "this machine's disk, raw io_uring at 16 MiB (README)";
};

absl::StatusOr<RankProfile> ProfileFromFlags(RateSources* from) {
  RankProfile p{.device_bytes = double(absl::GetFlag(FLAGS_rank_device).bytes),
                .host_bytes = double(absl::GetFlag(FLAGS_rank_host).bytes),
                .nvme_bytes = double(absl::GetFlag(FLAGS_rank_nvme).bytes),
                // Measured in this project (README, Store and tiers): the lent
                // H200's pinned copies and this development machine's disk.
                .h2d_gbps = 53.4,
                .d2h_gbps = 53.7,
                .nvme_read_gbps = 3.8,
                .nvme_write_gbps = 8.0,
                .net_gbps = absl::GetFlag(FLAGS_net_gbps),
                .net_latency_s = absl::GetFlag(FLAGS_net_latency_us) * 1e-6,
                .ranks_per_node = absl::GetFlag(FLAGS_ranks_per_node),
                .intra_node_gbps = absl::GetFlag(FLAGS_intra_node_gbps),
                .device_tflops = absl::GetFlag(FLAGS_device_tflops),
                .host_adam_gps = absl::GetFlag(FLAGS_host_adam_gps),
                .tokens_per_rank = absl::GetFlag(FLAGS_tokens_per_rank),
                .micro_batches = absl::GetFlag(FLAGS_micro_batches)};
  const std::string path = absl::GetFlag(FLAGS_machine_profile);
  if (path.empty()) return p;
  STRATA_ASSIGN_OR_RETURN(MachineProfile m, LoadMachineProfile(path));
  const std::string measured =
      absl::StrFormat("%s, measured on %s", path,
                      m.device.empty() ? "an unnamed device" : m.device);
  if (!m.h2d.empty() && !m.d2h.empty()) {
    p.h2d_gbps = LargestCopyGbps(m.h2d);
    p.d2h_gbps = LargestCopyGbps(m.d2h);
    from->link = measured;
  }
  if (m.nvme_read_gbps > 0 && m.nvme_write_gbps > 0) {
    p.nvme_read_gbps = m.nvme_read_gbps;
    p.nvme_write_gbps = m.nvme_write_gbps;
    from->nvme = measured;
  }
  return p;
}

absl::StatusOr<std::vector<int>> RanksFromFlag() {
  std::vector<int> ranks;
  if (absl::GetFlag(FLAGS_ranks).empty()) {
    return absl::InvalidArgumentError("--ranks: give at least one rank count");
  }
  for (const std::string& r : absl::GetFlag(FLAGS_ranks)) {
    int n = 0;
    if (!absl::SimpleAtoi(r, &n) || n < 1 || n > 1'000'000) {
      return absl::InvalidArgumentError(
          absl::StrFormat("--ranks: '%s' is not a rank count (1..1000000)", r));
    }
    ranks.push_back(n);
  }
  return ranks;
}

absl::StatusOr<std::vector<train::ScaleShape>> ShapesFromFlag() {
  std::vector<train::ScaleShape> shapes;
  if (absl::GetFlag(FLAGS_shapes).empty()) {
    return absl::InvalidArgumentError("--shapes: give at least one shape");
  }
  std::vector<std::string> known;
  for (const train::ScaleShape& s : train::ScaleShapes())
    known.push_back(s.name);
  for (const std::string& name : absl::GetFlag(FLAGS_shapes)) {
    bool found = false;
    for (const train::ScaleShape& s : train::ScaleShapes()) {
      if (s.name == name) shapes.push_back(s), found = true;
    }
    if (!found) {
      return absl::InvalidArgumentError(
          absl::StrFormat("--shapes: no shape '%s' (known: %s)", name,
                          absl::StrJoin(known, ", ")));
    }
  }
  return shapes;
}

std::string Gb(double bytes) { return absl::StrFormat("%.1f", bytes / 1e9); }

void PrintRow(const ScaleEstimate& e) {
  if (!e.fits) {
    absl::PrintF("%-10s %7.3g %6d  does not fit: %s\n", e.shape, e.parameters,
                 e.ranks, e.why_not);
    return;
  }
  absl::PrintF("%-10s %7.3g %6d %9s %7s %7s %7s %9s %8.3f %8.3f  %-14s %7.1f\n",
               e.shape, e.parameters, e.ranks, Gb(e.state_bytes),
               Gb(e.state_on[0]), Gb(e.state_on[1]), Gb(e.state_on[2]),
               Gb(e.sent_bytes), e.step_s, e.serial_step_s, e.bound,
               e.tflops_per_rank);
}

nlohmann::json EstimateJson(const ScaleEstimate& e) {
  nlohmann::json j = {{"shape", e.shape},
                      {"ranks", e.ranks},
                      {"parameters", e.parameters},
                      {"fits", e.fits}};
  if (!e.fits) {
    j["why_not"] = e.why_not;
    return j;
  }
  j.update({{"state_bytes_per_rank", e.state_bytes},
            {"state_bytes_on",
             {{"device", e.state_on[0]},
              {"host", e.state_on[1]},
              {"nvme", e.state_on[2]}}},
            {"parameters_on", e.parameters_split.Where()},
            {"gradients_on", e.gradients_split.Where()},
            {"optimizer_on", e.optimizer_split.Where()},
            {"checkpoints_on", e.checkpoints_split.Where()},
            {"device_working_bytes", e.device_working_bytes},
            {"sent_bytes_per_step", e.sent_bytes},
            {"h2d_bytes_per_step", e.h2d_bytes},
            {"d2h_bytes_per_step", e.d2h_bytes},
            {"nvme_read_bytes_per_step", e.nvme_read_bytes},
            {"nvme_write_bytes_per_step", e.nvme_write_bytes},
            {"seconds",
             {{"compute", e.compute_s},
              {"interconnect", e.comm_s},
              {"host_device", e.link_s},
              {"nvme", e.nvme_s},
              {"host_optimizer", e.optimizer_s}}},
            {"step_seconds_overlapped", e.step_s},
            {"step_seconds_serial", e.serial_step_s},
            {"bound", e.bound},
            {"tflops_per_rank", e.tflops_per_rank}});
  return j;
}

// Bad flags or a profile that cannot be read: exit code 2 (or 1 for I/O).
int Refuse(const absl::Status& status) {
  std::fprintf(stderr, "strata scale: %s\n", ErrorText(status).c_str());
  return ExitCodeBeforeRun(status);
}

// What a run estimates: the rank's profile, where its rates came from, and
// every estimate, computed before anything prints.
struct ScaleInputs {
  RateSources from;
  RankProfile profile;
  std::vector<ScaleEstimate> estimates;
};

// Reads the flags and computes every estimate: a bad value is refused before
// anything prints.
absl::StatusOr<ScaleInputs> InputsFromFlags(const std::string& json_path) {
  ScaleInputs in;
  STRATA_ASSIGN_OR_RETURN(in.profile, ProfileFromFlags(&in.from));
  STRATA_ASSIGN_OR_RETURN(std::vector<int> ranks, RanksFromFlag());
  STRATA_ASSIGN_OR_RETURN(std::vector<train::ScaleShape> shapes,
                          ShapesFromFlag());
  STRATA_RETURN_IF_ERROR(CheckWritable(json_path, "--json"));
  for (const train::ScaleShape& shape : shapes) {
    for (int n : ranks) {
      STRATA_ASSIGN_OR_RETURN(ScaleEstimate e,
                              train::EstimateScale(shape, in.profile, n));
      in.estimates.push_back(std::move(e));
    }
  }
  return in;
}

// The banner: the rank's profile the estimates assume, and its rates' sources.
void PrintBanner(const RankProfile& p, const RateSources& from) {
  absl::PrintF(
      "strata scale: ZeRO-3 sharded data parallelism on paper "
      "(train/run/scale_model.h). Per rank: device %.0f GB, host %.0f GB, NVMe "
      "%.0f GB; h2d %.1f / d2h %.1f GB/s (%s); NVMe read %.2f / write %.2f "
      "GB/s (%s); interconnect %.1f GB/s between nodes, %.0f GB/s among %d "
      "ranks of a node, %.1f us a hop; %.0f TFLOP/s; host Adam %.2f G "
      "params/s; %d tokens a micro-batch, micro-batches a step: %d\n\n",
      p.device_bytes / 1e9, p.host_bytes / 1e9, p.nvme_bytes / 1e9, p.h2d_gbps,
      p.d2h_gbps, from.link, p.nvme_read_gbps, p.nvme_write_gbps, from.nvme,
      p.net_gbps, p.intra_node_gbps, p.ranks_per_node, p.net_latency_s * 1e6,
      p.device_tflops, p.host_adam_gps, p.tokens_per_rank, p.micro_batches);
}

// The estimates' table (header, a row each, its legend); returns their JSON.
nlohmann::json PrintEstimates(const std::vector<ScaleEstimate>& estimates) {
  absl::PrintF("%-10s %7s %6s %9s %7s %7s %7s %9s %8s %8s  %-14s %7s\n",
               "shape", "params", "ranks", "state GB", "device", "host", "nvme",
               "sent GB", "step s", "serial s", "bound", "TF/rank");
  nlohmann::json rows = nlohmann::json::array();
  for (const ScaleEstimate& e : estimates) {
    PrintRow(e);
    rows.push_back(EstimateJson(e));
  }
  absl::PrintF(
      "(GB per rank; sent: bytes a rank sends per step; step: the largest "
      "term, serial: their sum; TF/rank: model TFLOP/s a rank, 6PT + "
      "attention, recompute not counted)\n");
  return rows;
}

// How many micro-batches make a published figure's run compute-bound, and the
// step that gives (or why none does); adds them to the figure's JSON `j`.
void PrintMicroBatchesToComputeBound(const train::PublishedScale& f,
                                     const train::ScaleShape& shape,
                                     const RankProfile& dgx2,
                                     const ScaleEstimate& e,
                                     nlohmann::json& j) {
  const int m = train::MicroBatchesToComputeBound(shape, dgx2, f.ranks);
  j["micro_batches_to_compute_bound"] = m;
  if (m > 0) {
    train::RankProfile accumulated = dgx2;
    accumulated.micro_batches = m;
    const ScaleEstimate a = *train::EstimateScale(shape, accumulated, f.ranks);
    absl::PrintF(
        "    with %d micro-batches a step: %.0f s, compute-bound, %.1f "
        "PFLOP/s in all (%.1f TFLOP/s a GPU)\n",
        m, a.step_s, a.tflops_per_rank * f.ranks / 1000, a.tflops_per_rank);
    j["accumulated"] = EstimateJson(a);
  } else {
    // The gathers and compute both grow with the micro-batch's tokens:
    // their ratio says how many tokens would hide the collectives.
    const double ratio = e.comm_s / e.compute_s;
    absl::PrintF(
        "    no micro-batch count makes it compute-bound: each micro-batch's "
        "collectives take %.1fx its compute (about %.0f tokens a "
        "micro-batch would hide them, if its activations fit)\n",
        ratio, std::ceil(ratio * dgx2.tokens_per_rank));
  }
}

// One published figure next to the model's estimate of its run; returns its
// JSON (an estimate the model refuses is returned as its error).
absl::StatusOr<nlohmann::json> CompareFigure(const train::PublishedScale& f,
                                             const RankProfile& dgx2) {
  if (f.parameters == 0) {
    absl::PrintF("  published: %s\n", f.what);
    return nlohmann::json{
        {"published", f.what}, {"ranks", f.ranks}, {"petaflops", f.petaflops}};
  }
  const train::ScaleShape& shape =
      f.parameters > 2e12 ? train::ScaleShapes()[3] : train::ScaleShapes()[2];
  absl::StatusOr<ScaleEstimate> e = train::EstimateScale(shape, dgx2, f.ranks);
  if (!e.ok()) return e.status();
  absl::PrintF(
      "  published: %s. Model: %s (%s shape, %d ranks); %.1f GB of state "
      "a rank, optimizer on %s; one micro-batch a step: %.0f s, %s-bound, "
      "%.1f PFLOP/s in all\n",
      f.what, e->fits ? "fits" : "does not fit", shape.name, f.ranks,
      e->state_bytes / 1e9, e->fits ? e->optimizer_split.Where().c_str() : "-",
      e->step_s, e->bound, e->fits ? e->tflops_per_rank * f.ranks / 1000 : 0.0);
  nlohmann::json j = EstimateJson(*e);
  j["published"] = f.what;
  PrintMicroBatchesToComputeBound(f, shape, dgx2, *e, j);
  return j;
}

// ZeRO-Infinity's testbed, a V100 of a DGX-2, next to its published
// figures; returns their JSON (printed up to a figure the model refuses).
absl::StatusOr<nlohmann::json> PrintZeroInfinity() {
  absl::PrintF(
      "\nZeRO-Infinity (Rajbhandari et al., SC'21) on its testbed, the model "
      "with a DGX-2 rank (train/run/scale_model.h Dgx2V100Rank: V100 32 GB, "
      "1/16 of 1.5 TB host, 28 TB NVMe and 800 Gb/s, NVSwitch; 40 %% of 125 "
      "TFLOP/s; 2048 tokens a micro-batch):\n");
  nlohmann::json published = nlohmann::json::array();
  const RankProfile dgx2 = train::Dgx2V100Rank();
  for (const train::PublishedScale& f : train::ZeroInfinityFigures()) {
    STRATA_ASSIGN_OR_RETURN(nlohmann::json j, CompareFigure(f, dgx2));
    published.push_back(std::move(j));
  }
  return published;
}

}  // namespace

int RunScale(const std::string& json_path) {
  absl::StatusOr<ScaleInputs> in = InputsFromFlags(json_path);
  if (!in.ok()) return Refuse(in.status());
  PrintBanner(in->profile, in->from);
  const nlohmann::json rows = PrintEstimates(in->estimates);
  absl::StatusOr<nlohmann::json> published = PrintZeroInfinity();
  if (!published.ok()) return Refuse(published.status());
  absl::PrintF(
      "\nLeft out (scale_model.h): pipeline bubbles, stragglers, shared-link "
      "contention, transfer CPU cost, efficiency at small batches.\n");
  if (!json_path.empty()) {
    nlohmann::json report = {
        {"estimates", rows},
        {"zero_infinity", *published},
        {"config", EffectiveConfig(*FindCommand("scale"))}};
    if (absl::Status s = WriteReportJson(json_path, report); !s.ok()) {
      std::fprintf(stderr, "strata scale: %s\n", ErrorText(s).c_str());
      return kExitFailure;  // checked writable above: the machine's error
    }
  }
  return 0;
}

}  // namespace strata
