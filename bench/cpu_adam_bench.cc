// cpu_adam_bench: the host Adam update (AdamUpdateCpu,
// train/compute/cpu/cpu_adam.h) in elements per second on fp32 arrays of 256 Ki
// to 64 Mi elements, for every vector path this CPU runs, on one thread and
// split over a HostPool as AdamUpdateCpu splits it. Next to each:
//  - the memory-bandwidth bound measured in the same run, at the same size and
//    on the same threads: the 28 bytes an update must touch per element (read
//    w, g, m, v; write w, m, v) over the best of three streaming rates — copy
//    (memcpy of each thread's range), triad (a = b + s * c) and the update's
//    own access pattern with trivial arithmetic (read four arrays, write three
//    in place);
//  - the implementation before issue 18 (bench/cpu_adam_baseline.cc), so the
//    speedup is measured in the same run;
//  - the fused mixed-precision pass (AdamMixedUpdateCpu: bf16 and fp16
//    gradient in, 16-bit parameter copy out; "bf16 sr" with stochastic
//    rounding) per path on the pool. It touches 28 bytes per element too
//    (read g16, w, m, v: 14; write w, m, v, w16: 14), so its bound is the
//    same best stream over 28 B.
// Cases of one size run interleaved (one sample of each in turn, so drift on
// a shared machine hits all alike); a sample repeats its case until it lasts
// --min_sample_ms, and the median of --samples is reported. A split sweep
// times the chosen path on one thread against a forced split over every
// thread at 4 Ki to 512 Ki elements: where splitting pays (the pool's
// kAdamMinElementsPerThread). After timing, every path's bits are checked
// against the old kernel's on the same inputs (exit 1 if they differ).
// GB = 1e9 bytes.
//
//   cpu_adam_bench [--min_elements N] [--max_elements N] [--samples N]
//                  [--min_sample_ms N] [--threads N] [--json FILE]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "base/splitmix64.h"
#include "bench/aligned_buffer.h"
#include "bench/cpu_adam_baseline.h"
#include "bench/cpu_adam_ceilings.h"
#include "train/compute/cpu/cpu_adam.h"
#include "train/compute/cpu/host_pool.h"
#include "train/compute/cpu/vector_path.h"
#include "train/compute/half.h"

namespace strata {
namespace {

using train::AdamParams;
using train::HostPool;
using train::VectorPath;

constexpr double kBytesPerElement = 28;  // 4 arrays read, 3 written, fp32
// The fused mixed pass: g16, w, m, v read (2 + 12), w, m, v, w16 written.
constexpr double kMixedBytesPerElement = 28;

struct Args {
  int64_t min_elements = int64_t{256} << 10;
  int64_t max_elements = int64_t{64} << 20;
  int samples = 5;
  double min_sample_seconds = 0.02;
  int threads = train::HostThreads();
  std::string json;
};

Args ParseArgs(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string s = argv[i];
    auto value = [&](const char* name) -> const char* {
      const std::string prefix = std::string(name) + "=";
      if (s.rfind(prefix, 0) == 0) return argv[i] + prefix.size();
      if (s == name && i + 1 < argc) return argv[++i];
      return nullptr;
    };
    if (const char* v = value("--min_elements")) {
      a.min_elements = std::max<int64_t>(16, std::atoll(v));
    } else if (const char* v = value("--max_elements")) {
      a.max_elements = std::max<int64_t>(16, std::atoll(v));
    } else if (const char* v = value("--samples")) {
      a.samples = std::max(1, std::atoi(v));
    } else if (const char* v = value("--min_sample_ms")) {
      a.min_sample_seconds = std::max(0.0, std::atof(v) / 1e3);
    } else if (const char* v = value("--threads")) {
      a.threads = std::max(1, std::atoi(v));
    } else if (const char* v = value("--json")) {
      a.json = v;
    } else {
      std::fprintf(stderr,
                   "usage: cpu_adam_bench [--min_elements N] [--max_elements "
                   "N] [--samples N] [--min_sample_ms N] [--threads N] "
                   "[--json FILE]\n");
      std::exit(s == "--help" ? 0 : 2);
    }
  }
  a.max_elements = std::max(a.max_elements, a.min_elements);
  return a;
}

double Now() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// A timed case: `run` does one pass over n elements.
struct Case {
  std::string name;  // "old", "avx2 x1", "avx2 pool", "copy", ...
  std::string path;  // the vector path, "" for streams
  int threads = 1;
  // Per element: a stream's bytes; for an update, 0 means kBytesPerElement.
  bool stream = false;
  double stream_bytes_per_element = 0;
  std::function<void()> run;
  std::string precision = "fp32";  // of the gradient, for updates
  int reps = 1;
  std::vector<double> seconds;  // per pass, one per sample
  double median() const {
    std::vector<double> s = seconds;
    std::sort(s.begin(), s.end());
    return s[s.size() / 2];
  }
};

// Warms each case up, sizes its sample to min_sample_seconds, then takes
// `samples` samples of every case in turn.
void TimeInterleaved(std::vector<Case>& cases, const Args& a) {
  for (Case& c : cases) {
    c.run();  // warm-up: page tables, caches, the pool's threads
    const double start = Now();
    c.run();
    const double one = std::max(Now() - start, 1e-7);
    c.reps = std::max(1, int(std::ceil(a.min_sample_seconds / one)));
  }
  for (int s = 0; s < a.samples; ++s) {
    for (Case& c : cases) {
      const double start = Now();
      for (int r = 0; r < c.reps; ++r) c.run();
      c.seconds.push_back((Now() - start) / c.reps);
    }
  }
}

// The four arrays of an update and the mixed pass's two 16-bit ones, 2 MiB
// aligned and pre-faulted.
struct State {
  explicit State(int64_t n)
      : bw(n * 4),
        bm(n * 4),
        bv(n * 4),
        bg(n * 4),
        bg16(n * 2),
        bw16(n * 2),
        n(n) {}
  float* w() { return reinterpret_cast<float*>(bw.data); }
  float* m() { return reinterpret_cast<float*>(bm.data); }
  float* v() { return reinterpret_cast<float*>(bv.data); }
  float* g() { return reinterpret_cast<float*>(bg.data); }
  uint16_t* g16() { return reinterpret_cast<uint16_t*>(bg16.data); }
  uint16_t* w16() { return reinterpret_cast<uint16_t*>(bw16.data); }
  // Weights and moments of a few steps in: w, m, g in [-1, 1), v in [0, 1e-2).
  void Fill(int64_t count, uint64_t seed) {
    uint64_t rng = seed;
    const auto unit = [&] {
      return float(int64_t(SplitMix64Next(rng) >> 40) - (int64_t{1} << 23)) /
             float(int64_t{1} << 23);
    };
    for (int64_t i = 0; i < count; ++i) {
      w()[i] = unit();
      m()[i] = unit() * 0.1f;
      v()[i] = std::abs(unit()) * 1e-2f;
      g()[i] = unit();
      // bf16 bits of g; fp16 cases read them as fp16, which is as finite.
      g16()[i] = train::FloatToBf16(g()[i]);
    }
  }
  AlignedBuffer bw, bm, bv, bg, bg16, bw16;
  int64_t n;
};

AdamParams BenchParams() {
  AdamParams p;
  p.lr = 1e-3f;
  p.correction1 = float(1.0 / (1.0 - std::pow(0.9, 10)));
  p.correction2 = float(1.0 / (1.0 - std::pow(0.999, 10)));
  return p;
}

// The mixed-precision passes measured: nearest even for both formats, and
// bf16 with stochastic rounding; a clip of 0.5 and AdamW decay folded in.
std::vector<std::pair<std::string, train::MixedAdamParams>> MixedVariants() {
  using train::Precision;
  using train::Rounding;
  return {
      {"bf16", {Precision::kBf16, 0.5f, 1.0f - 1e-5f, {}}},
      {"fp16", {Precision::kFp16, 0.5f / 65536, 1.0f - 1e-5f, {}}},
      {"bf16 sr",
       {Precision::kBf16, 0.5f, 1.0f - 1e-5f, {Rounding::kStochastic, 7, 0}}}};
}

std::vector<VectorPath> SupportedPaths() {
  std::vector<VectorPath> paths;
  for (VectorPath p : train::kVectorPaths) {
    if (train::VectorPathSupported(p)) paths.push_back(p);
  }
  return paths;
}

// The cases of one size: streams, the old kernel, each path on one thread
// and on the pool.
std::vector<Case> CasesFor(State& st, int64_t n, HostPool& pool,
                           const AdamParams& p) {
  std::vector<Case> cases;
  const int t = pool.threads();
  float *w = st.w(), *m = st.m(), *v = st.v(), *g = st.g();
  const auto split = [&pool, n](std::function<void(int64_t, int64_t)> fn) {
    return [&pool, n, fn] { pool.ParallelFor(n, 1, 16, fn); };
  };
  cases.push_back({"copy", "", t, true, 8, split([=](int64_t b, int64_t e) {
                     std::memcpy(m + b, w + b, (e - b) * sizeof(float));
                   })});
  cases.push_back({"triad", "", t, true, 12, split([=](int64_t b, int64_t e) {
                     bench::StreamTriad(m + b, w + b, g + b, e - b);
                   })});
  cases.push_back({"pattern", "", t, true, kBytesPerElement,
                   split([=](int64_t b, int64_t e) {
                     bench::StreamPattern(w + b, m + b, v + b, g + b, e - b);
                   })});
  cases.push_back({"old", "baseline", 0, false, 0,
                   [=] { bench::OldAdamUpdateCpu(p, w, m, v, g, n); }});
  for (VectorPath path : SupportedPaths()) {
    const std::string name = train::VectorPathName(path);
    cases.push_back({name + " x1", name, 1, false, 0,
                     [=] { train::AdamRange(path, p, w, m, v, g, n); }});
    cases.push_back({name + " pool", name, t, false, 0, [=, &pool] {
                       train::AdamUpdateCpuWith(path, pool, p, w, m, v, g, n);
                     }});
  }
  uint16_t *g16 = st.g16(), *w16 = st.w16();
  for (VectorPath path : SupportedPaths()) {
    const std::string name = train::VectorPathName(path);
    for (const auto& [label, mp] : MixedVariants()) {
      Case c{name + " " + label + " pool",
             name,
             t,
             false,
             kMixedBytesPerElement,
             [=, &pool] {
               train::AdamMixedUpdateCpuWith(path, pool, p, mp, w, m, v, g16,
                                             w16, n);
             }};
      c.precision = label;
      cases.push_back(c);
    }
  }
  return cases;
}

// How many threads the old kernel used at n (for the table).
int OldThreads(int64_t n) { return n >= (int64_t{1} << 20) ? 2 : 1; }

// Where a footprint of `bytes` lives: "L2" (fits the threads' L2s), "LLC" or
// "DRAM".
std::string Level(double bytes, int threads) {
  if (bytes <= bench::L2BytesPerCore() * threads) return "L2";
  if (bytes <= bench::LlcBytes()) return "LLC";
  return "DRAM";
}

// One update of every path, and of the old kernel, from the same inputs:
// bitwise equal? Checks `count` elements (odd, so tails run).
bool VerifyBits(int64_t count, HostPool& pool) {
  const AdamParams p = BenchParams();
  State ref(count);
  ref.Fill(count, 99);
  bench::OldAdamUpdateCpu(p, ref.w(), ref.m(), ref.v(), ref.g(), count);
  bool ok = true;
  for (VectorPath path : SupportedPaths()) {
    for (bool pooled : {false, true}) {
      State s(count);
      s.Fill(count, 99);
      if (pooled) {
        train::AdamUpdateCpuWith(path, pool, p, s.w(), s.m(), s.v(), s.g(),
                                 count);
      } else {
        train::AdamRange(path, p, s.w(), s.m(), s.v(), s.g(), count);
      }
      const size_t bytes = count * sizeof(float);
      if (std::memcmp(s.w(), ref.w(), bytes) != 0 ||
          std::memcmp(s.m(), ref.m(), bytes) != 0 ||
          std::memcmp(s.v(), ref.v(), bytes) != 0) {
        std::fprintf(stderr,
                     "cpu_adam_bench: %s %s differs from the old "
                     "kernel's bits\n",
                     train::VectorPathName(path), pooled ? "pool" : "x1");
        ok = false;
      }
    }
  }
  return ok;
}

// The mixed passes of every path, on one thread and on the pool, against
// the baseline path's on the same inputs: bitwise equal?
bool VerifyMixedBits(int64_t count, HostPool& pool) {
  const AdamParams p = BenchParams();
  bool ok = true;
  for (const auto& [label, mp] : MixedVariants()) {
    State ref(count);
    ref.Fill(count, 98);
    train::AdamMixedRange(VectorPath::kBaseline, p, mp, ref.w(), ref.m(),
                          ref.v(), ref.g16(), ref.w16(), count);
    for (VectorPath path : SupportedPaths()) {
      State s(count);
      s.Fill(count, 98);
      train::AdamMixedUpdateCpuWith(path, pool, p, mp, s.w(), s.m(), s.v(),
                                    s.g16(), s.w16(), count);
      const size_t bytes = count * sizeof(float);
      if (std::memcmp(s.w(), ref.w(), bytes) != 0 ||
          std::memcmp(s.m(), ref.m(), bytes) != 0 ||
          std::memcmp(s.v(), ref.v(), bytes) != 0 ||
          std::memcmp(s.w16(), ref.w16(), count * 2) != 0) {
        std::fprintf(stderr,
                     "cpu_adam_bench: %s %s pool differs from the baseline "
                     "path's bits\n",
                     train::VectorPathName(path), label.c_str());
        ok = false;
      }
    }
  }
  return ok;
}

// Which rows the targets are judged on: the chosen path on the pool.
struct Targets {
  std::string row;          // e.g. "avx2 pool"
  double dram_bound = 1e9;  // worst ratio to the bound beyond the LLC
  double cache_old = 1e9;   // worst ratio to the old kernel in cache
};

void PrintHeader(const Args& a, const HostPool& pool, VectorPath chosen,
                 nlohmann::json* j) {
  std::string paths;
  for (VectorPath path : SupportedPaths()) {
    paths +=
        std::string(paths.empty() ? "" : ", ") + train::VectorPathName(path);
  }
  std::printf(
      "cpu_adam_bench: fp32 and mixed precision, %d threads in the pool, paths "
      "here: %s (chosen: "
      "%s); L2 %ld KiB per core, LLC %ld MiB; median of %d interleaved "
      "samples\n",
      pool.threads(), paths.c_str(), train::VectorPathName(chosen),
      long(bench::L2BytesPerCore() / 1024),
      long(bench::LlcBytes() / (1024 * 1024)), a.samples);
  for (VectorPath path : train::kVectorPaths) {
    if (!train::VectorPathSupported(path)) {
      std::printf("(%s: this CPU does not run it; not measured)\n",
                  train::VectorPathName(path));
    }
  }
  std::fflush(stdout);
  *j = {{"bytes_per_element", kBytesPerElement},
        {"threads", pool.threads()},
        {"chosen_path", train::VectorPathName(chosen)},
        {"samples", a.samples},
        {"l2_bytes_per_core", bench::L2BytesPerCore()},
        {"llc_bytes", bench::LlcBytes()}};
  for (VectorPath path : train::kVectorPaths) {
    (*j)["paths"][train::VectorPathName(path)] =
        train::VectorPathSupported(path);
  }
}

// Prints and records one size's timed cases next to its bound and the old
// kernel; updates the worst ratios of the targets' row.
void ReportSize(int64_t n, const std::vector<Case>& cases, int threads,
                Targets* t, nlohmann::json* j) {
  double bound_gbps = 0, old_eps = 0;
  for (const Case& c : cases) {
    if (c.stream) {
      bound_gbps = std::max(bound_gbps,
                            c.stream_bytes_per_element * n / c.median() / 1e9);
    } else if (c.name == "old") {
      old_eps = n / c.median();
    }
  }
  const double bound_eps = bound_gbps * 1e9 / kBytesPerElement;
  const std::string level = Level(16.0 * n, threads);
  nlohmann::json size = {{"elements", n},
                         {"footprint_bytes", 16 * n},
                         {"level", level},
                         {"bound_gbps", bound_gbps},
                         {"bound_elements_per_second", bound_eps}};
  for (const Case& c : cases) {
    const double bytes_per_element = c.stream_bytes_per_element > 0
                                         ? c.stream_bytes_per_element
                                         : kBytesPerElement;
    const double gbps = bytes_per_element * n / c.median() / 1e9;
    const int case_threads = c.name == "old" ? OldThreads(n) : c.threads;
    if (c.stream) {
      std::printf("%10lld %5s %-14s %3d %9s %8.2f\n", (long long)n,
                  level.c_str(), c.name.c_str(), case_threads, "", gbps);
      size["streams"][c.name + "_gbps"] = gbps;
      continue;
    }
    const double eps = n / c.median();
    // The case's own bound: the best stream over the bytes it touches.
    const double case_bound_eps = bound_gbps * 1e9 / bytes_per_element;
    std::printf("%10lld %5s %-14s %3d %9.3f %8.2f %8.3f %8.2f\n", (long long)n,
                level.c_str(), c.name.c_str(), case_threads, eps / 1e9, gbps,
                eps / case_bound_eps, eps / old_eps);
    size["cases"].push_back({{"name", c.name},
                             {"path", c.path},
                             {"precision", c.precision},
                             {"threads", case_threads},
                             {"bytes_per_element", bytes_per_element},
                             {"elements_per_second", eps},
                             {"gbps", gbps},
                             {"bound_elements_per_second", case_bound_eps},
                             {"ratio_to_bound", eps / case_bound_eps},
                             {"ratio_to_old", eps / old_eps}});
    if (c.name != t->row) continue;
    if (level == "DRAM") {
      t->dram_bound = std::min(t->dram_bound, eps / bound_eps);
    } else {
      t->cache_old = std::min(t->cache_old, eps / old_eps);
    }
  }
  std::printf("%10lld %5s %-14s %3d %9.3f %8.2f  (best stream / 28 B)\n",
              (long long)n, level.c_str(), "bound", threads, bound_eps / 1e9,
              bound_gbps);
  std::fflush(stdout);
  (*j)["sizes"].push_back(size);
}

// The divider's rate per path, and what it allows against the old kernel.
void RunDivider(const Args& a, const HostPool& pool, VectorPath chosen,
                nlohmann::json* j) {
  std::printf("\ndivider (1 sqrt + 1 divide per element, one thread):\n");
  double divider_chosen = 0, divider_baseline = 0;
  for (VectorPath path : SupportedPaths()) {
    const double r =
        bench::DividerElementsPerSecond(path, a.min_sample_seconds, a.samples);
    std::printf("%10s %9.3f Gelem/s per thread\n", train::VectorPathName(path),
                r / 1e9);
    (*j)["divider_elements_per_second"][train::VectorPathName(path)] = r;
    if (path == chosen) divider_chosen = r;
    if (path == VectorPath::kBaseline) divider_baseline = r;
  }
  if (divider_baseline <= 0) return;
  const double below = divider_chosen * pool.threads() / divider_baseline;
  const double above = below / OldThreads(int64_t{1} << 20);
  std::printf(
      "compute ceiling vs the old kernel (%s x %d threads over baseline x "
      "its threads): %.2fx below 1 Mi elements, %.2fx from 1 Mi\n",
      train::VectorPathName(chosen), pool.threads(), below, above);
  (*j)["ceiling_ratio_to_old_below_1mi"] = below;
  (*j)["ceiling_ratio_to_old_from_1mi"] = above;
}

// Where a split pays: the chosen path on one thread vs split over every
// thread, 4 Ki to 512 Ki elements.
void RunSplitSweep(const Args& a, State& st, HostPool& pool, VectorPath chosen,
                   nlohmann::json* j) {
  const AdamParams p = BenchParams();
  std::printf("\nsplit sweep (%s): one thread vs a forced split over %d\n",
              train::VectorPathName(chosen), pool.threads());
  std::printf("%10s %12s %12s %8s\n", "elements", "x1 Gelem/s", "split",
              "ratio");
  for (int64_t n = 4 << 10; n <= (512 << 10) && n <= a.max_elements; n *= 2) {
    st.Fill(n, uint64_t(n));
    float *w = st.w(), *m = st.m(), *v = st.v(), *g = st.g();
    std::vector<Case> cases;
    cases.push_back({"x1", "", 1, false, 0,
                     [=] { train::AdamRange(chosen, p, w, m, v, g, n); }});
    cases.push_back({"split", "", pool.threads(), false, 0, [=, &pool] {
                       pool.ParallelFor(n, 1, 16, [=](int64_t b, int64_t e) {
                         train::AdamRange(chosen, p, w + b, m + b, v + b, g + b,
                                          e - b);
                       });
                     }});
    TimeInterleaved(cases, a);
    const double one = n / cases[0].median(), all = n / cases[1].median();
    std::printf("%10lld %12.3f %12.3f %8.2f\n", (long long)n, one / 1e9,
                all / 1e9, all / one);
    (*j)["split_sweep"].push_back({{"elements", n},
                                   {"one_thread_elements_per_second", one},
                                   {"split_elements_per_second", all},
                                   {"ratio", all / one}});
  }
  std::printf("(AdamUpdateCpu splits at >= %lld elements per thread)\n",
              (long long)train::kAdamMinElementsPerThread);
}

}  // namespace
}  // namespace strata

int main(int argc, char** argv) {
  using namespace strata;
  const Args a = ParseArgs(argc, argv);
  HostPool pool(a.threads);
  const VectorPath chosen = train::ChosenVectorPath();
  nlohmann::json j;
  PrintHeader(a, pool, chosen, &j);
  State st(a.max_elements);
  std::printf("\n%10s %5s %-14s %3s %9s %8s %8s %8s\n", "elements", "in",
              "case", "thr", "Gelem/s", "GB/s", "x bound", "x old");
  Targets t{.row = std::string(train::VectorPathName(chosen)) + " pool"};
  for (int64_t n = a.min_elements; n <= a.max_elements; n *= 2) {
    st.Fill(n, uint64_t(n));
    std::vector<Case> cases = CasesFor(st, n, pool, BenchParams());
    TimeInterleaved(cases, a);
    ReportSize(n, cases, pool.threads(), &t, &j);
  }
  RunDivider(a, pool, chosen, &j);
  RunSplitSweep(a, st, pool, chosen, &j);

  const bool fp32_ok = VerifyBits((int64_t{4} << 20) + 13, pool);
  const bool mixed_ok = VerifyMixedBits((int64_t{1} << 20) + 13, pool);
  const bool ok = fp32_ok && mixed_ok;
  const double dram = t.dram_bound < 1e9 ? t.dram_bound : NAN;
  const double cache = t.cache_old < 1e9 ? t.cache_old : NAN;
  std::printf("\nbits: every path %s the old kernel's\n",
              fp32_ok ? "matches" : "DIFFERS FROM");
  std::printf("bits: every path's mixed pass %s the baseline path's\n",
              mixed_ok ? "matches" : "DIFFERS FROM");
  std::printf(
      "targets (%s): beyond the LLC >= 0.90x the bound: worst %.3f; "
      "cache-resident >= 4x the old kernel: worst %.2f\n",
      t.row.c_str(), dram, cache);
  j["bits_match"] = fp32_ok;
  j["mixed_bits_match"] = mixed_ok;
  j["worst_dram_ratio_to_bound"] = std::isnan(dram) ? 0.0 : dram;
  j["worst_cache_ratio_to_old"] = std::isnan(cache) ? 0.0 : cache;
  if (!a.json.empty()) {
    std::ofstream out(a.json);
    out << j.dump(2) << "\n";
    if (!out) {
      std::fprintf(stderr, "cpu_adam_bench: cannot write %s\n", a.json.c_str());
      return 1;
    }
  }
  return ok ? 0 : 1;
}
