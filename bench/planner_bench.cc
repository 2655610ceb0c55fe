// planner_bench.cc: what the residency planner (scheduler/residency_plan.h)
// costs and finds on a synthetic step of a deep GPT, with no tensor
// allocated: its planning time against the step it plans, its NVMe bytes
// against the floors, its predicted step against its bound.
//
// The step: --blocks transformer blocks of width --embed. Forward reads
// each block's four weight matrices and two LayerNorm vectors on the
// device and writes its activations; backward, in reverse, reads them
// again, writes the gradients, and the host AdamW of each block reads its
// gradients and updates its weights and both moments. Compute times are
// the accesses' FLOPs at --gflops; budgets are fractions of the state.
//
// Prints a table and, with --json=FILE, the same figures as JSON.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"
#include "scheduler/nvme_floor.h"
#include "scheduler/residency_plan.h"

ABSL_FLAG(int, blocks, 160,
          "Transformer blocks in the synthetic step (64 tensors each).");
ABSL_FLAG(int64_t, embed, 256, "Width C of each block.");
ABSL_FLAG(int64_t, tokens, 512, "Tokens per step (batch x context).");
ABSL_FLAG(double, gflops, 50, "Compute rate the step's times assume.");
ABSL_FLAG(double, device_fraction, 0.1,
          "Device budget as a fraction of the parameters' bytes.");
ABSL_FLAG(double, host_fraction, 0.5,
          "Host budget as a fraction of the whole state's bytes.");
ABSL_FLAG(int, repeats, 5, "Plans timed; the median is reported.");
ABSL_FLAG(std::string, json, "", "Write the figures as JSON to FILE.");

namespace strata {
namespace {

class SyntheticStep {
 public:
  uint32_t Tensor(uint64_t bytes) {
    in_.tensors.push_back({.bytes = bytes,
                           .tier_bytes = {bytes, bytes, bytes},
                           .home = Tier::kNvme});
    return static_cast<uint32_t>(in_.tensors.size() - 1);
  }
  // An acquire after `flops` of compute, released before the next.
  void Use(uint32_t t, Tier tier, Access access, double flops) {
    now_ += flops / (absl::GetFlag(FLAGS_gflops) * 1e9);
    const auto p = static_cast<uint32_t>(in_.accesses.size());
    in_.accesses.push_back({.tensor = t,
                            .tier = tier,
                            .access = access,
                            .hold_end = p + 1,
                            .at_seconds = now_});
  }
  PlanInput& Finish() {
    in_.step_seconds = now_;
    return in_;
  }

 private:
  PlanInput in_;
  double now_ = 0;
};

struct Block {
  std::vector<uint32_t> weights, grads, moments, acts;
};

PlanInput GptStep(uint64_t* param_bytes, uint64_t* state_bytes) {
  const int64_t c = absl::GetFlag(FLAGS_embed);
  const int64_t tokens = absl::GetFlag(FLAGS_tokens);
  // GPT-2's block: qkv, projection, fc and fc2 weights and biases, two
  // LayerNorms' gains and biases.
  const std::vector<int64_t> shapes = {
      3 * c * c, 3 * c, c * c, c, 4 * c * c, 4 * c, 4 * c * c, c, c, c, c, c};
  SyntheticStep s;
  std::vector<Block> blocks(absl::GetFlag(FLAGS_blocks));
  *param_bytes = *state_bytes = 0;
  for (Block& b : blocks) {
    for (int64_t n : shapes) {
      const auto bytes = static_cast<uint64_t>(4 * n);
      b.weights.push_back(s.Tensor(bytes));
      b.grads.push_back(s.Tensor(bytes));
      b.moments.push_back(s.Tensor(bytes));
      b.moments.push_back(s.Tensor(bytes));
      *param_bytes += bytes;
      *state_bytes += 4 * bytes;
    }
    // The activations backward reads: 16 of tokens x C (the 4C ones as
    // four).
    for (int i = 0; i < 16; ++i) {
      b.acts.push_back(s.Tensor(static_cast<uint64_t>(4 * tokens * c)));
    }
  }
  const auto flops = [&](size_t w) {
    return 2.0 * static_cast<double>(tokens) *
           static_cast<double>(shapes[w % shapes.size()]);
  };
  for (Block& b : blocks) {  // forward
    for (size_t w = 0; w < b.weights.size(); ++w) {
      s.Use(b.weights[w], Tier::kDevice, Access::kRead, flops(w));
      for (size_t a = w; a < b.acts.size(); a += b.weights.size()) {
        s.Use(b.acts[a], Tier::kDevice, Access::kOverwrite, 0);
      }
    }
  }
  for (auto it = blocks.rbegin(); it != blocks.rend(); ++it) {  // backward
    Block& b = *it;
    for (size_t w = b.weights.size(); w-- > 0;) {
      for (size_t a = w; a < b.acts.size(); a += b.weights.size()) {
        s.Use(b.acts[a], Tier::kDevice, Access::kRead, 0);
      }
      s.Use(b.weights[w], Tier::kDevice, Access::kRead, 2 * flops(w));
      s.Use(b.grads[w], Tier::kDevice, Access::kOverwrite, 0);
    }
    for (size_t w = 0; w < b.weights.size(); ++w) {  // host AdamW
      s.Use(b.grads[w], Tier::kHost, Access::kRead, 0);
      s.Use(b.moments[2 * w], Tier::kHost, Access::kWrite, 0);
      s.Use(b.moments[2 * w + 1], Tier::kHost, Access::kWrite, 0);
      s.Use(b.weights[w], Tier::kHost, Access::kWrite, flops(w) / tokens);
    }
  }
  return s.Finish();
}

int Main() {
  uint64_t params = 0, state = 0;
  PlanInput in = GptStep(&params, &state);
  in.capacity = {
      static_cast<uint64_t>(absl::GetFlag(FLAGS_device_fraction) * params),
      static_cast<uint64_t>(absl::GetFlag(FLAGS_host_fraction) * state), 0};
  // This machine's order of magnitude: 12 GB/s over PCIe, 2 GB/s of NVMe.
  in.link_bytes_per_second = {12e9, 12e9, 2e9, 2e9};
  std::vector<double> seconds;
  absl::StatusOr<ResidencyPlan> plan;
  for (int r = 0; r < std::max(1, absl::GetFlag(FLAGS_repeats)); ++r) {
    const auto start = std::chrono::steady_clock::now();
    plan = PlanResidency(in);
    seconds.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count());
    if (!plan.ok()) {
      std::fprintf(stderr, "planner_bench: %s\n",
                   plan.status().ToString().c_str());
      return 1;
    }
  }
  std::sort(seconds.begin(), seconds.end());
  const double planning = seconds[seconds.size() / 2];
  // The floors computed alone, their model built included (part of every
  // plan, and of every report).
  std::vector<double> floor_seconds;
  for (int r = 0; r < std::max(1, absl::GetFlag(FLAGS_repeats)); ++r) {
    const auto start = std::chrono::steady_clock::now();
    const NvmeFloors floors = NvmeFloorBytes(in);
    floor_seconds.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count());
    if (floors.read_bytes != plan->nvme_read_floor_bytes ||
        floors.write_bytes != plan->nvme_write_floor_bytes) {
      std::fprintf(stderr,
                   "planner_bench: the floors differ from the plan's\n");
      return 1;
    }
  }
  std::sort(floor_seconds.begin(), floor_seconds.end());
  const double flooring = floor_seconds[floor_seconds.size() / 2];
  const auto link = [&](Link l) {
    return static_cast<double>(plan->link_bytes[static_cast<int>(l)]);
  };
  const double read_floor = static_cast<double>(plan->nvme_read_floor_bytes);
  const double write_floor = static_cast<double>(plan->nvme_write_floor_bytes);
  absl::PrintF(
      "planner_bench: %d blocks, %d tensors, %d accesses per step; "
      "state %.1f MB, budgets device %.1f MB host %.1f MB\n",
      absl::GetFlag(FLAGS_blocks), in.tensors.size(), in.accesses.size(),
      state / 1e6, in.capacity[0] / 1e6, in.capacity[1] / 1e6);
  absl::PrintF("%-28s %12s\n", "figure", "value");
  absl::PrintF("%-28s %12.1f\n", "step (compute) ms", in.step_seconds * 1e3);
  absl::PrintF("%-28s %12.1f\n", "planning ms (median)", planning * 1e3);
  absl::PrintF("%-28s %12.4f\n", "planning / step", planning / in.step_seconds);
  absl::PrintF("%-28s %12.1f\n", "floors alone ms (median)", flooring * 1e3);
  absl::PrintF("%-28s %12.1f\n", "nvme read MB/step",
               link(Link::kNvmeRead) / 1e6);
  absl::PrintF("%-28s %12.3f\n", "nvme read / floor",
               read_floor > 0 ? link(Link::kNvmeRead) / read_floor : 0.0);
  absl::PrintF("%-28s %12.3f\n", "nvme write / floor",
               write_floor > 0 ? link(Link::kNvmeWrite) / write_floor : 0.0);
  absl::PrintF("%-28s %12.1f\n", "predicted step ms",
               plan->predicted_seconds * 1e3);
  absl::PrintF("%-28s %12.1f\n", "bound ms", plan->bound_seconds * 1e3);
  if (const std::string path = absl::GetFlag(FLAGS_json); !path.empty()) {
    std::ofstream(path) << nlohmann::json{
        {"tensors", in.tensors.size()},
        {"accesses", in.accesses.size()},
        {"step_seconds", in.step_seconds},
        {"planning_seconds", planning},
        {"planning_over_step", planning / in.step_seconds},
        {"floors_seconds", flooring},
        {"nvme_read_bytes", link(Link::kNvmeRead)},
        {"nvme_write_bytes", link(Link::kNvmeWrite)},
        {"nvme_read_floor_bytes", read_floor},
        {"nvme_write_floor_bytes", write_floor},
        {"predicted_seconds", plan->predicted_seconds},
        {"bound_seconds",
         plan->bound_seconds}}.dump(2);
  }
  return 0;
}

}  // namespace
}  // namespace strata

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "The residency planner's cost and result on a synthetic deep-GPT step.");
  absl::ParseCommandLine(argc, argv);
  return strata::Main();
}
