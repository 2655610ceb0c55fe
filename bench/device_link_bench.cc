// device_link_bench: host<->device link bandwidth, raw and through the store.
//
// Raw: DeviceBackend::Copy between the pinned host arena and the device arena
// (cudaMemcpyAsync on the copy streams on a GPU; memcpy on copy threads on the
// simulated device). Store: Acquire(kDevice) of a host-homed tensor (H2D) and
// the write-back of a dirty device copy (D2H). Each case warms up once, takes
// the median of --samples timed copies, and verifies the bytes afterwards.
// GB/s are 1e9 bytes per second. Prints a table; --json FILE writes it.
//
//   device_link_bench [--size_mib N] [--samples N] [--json FILE]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "strata/store.h"
#include "tiers/device/device_backend.h"
#include "tiers/host/host_arena.h"

namespace strata {
namespace {

struct Args {
  uint64_t size_bytes = 256 * kMiB;
  int samples = 5;
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
    if (const char* v = value("--size_mib")) {
      a.size_bytes = std::strtoull(v, nullptr, 10) * kMiB;
    } else if (const char* v = value("--samples")) {
      a.samples = std::max(1, std::atoi(v));
    } else if (const char* v = value("--json")) {
      a.json = v;
    } else {
      std::fprintf(stderr,
                   "usage: device_link_bench [--size_mib N] [--samples N] "
                   "[--json FILE]\n");
      std::exit(s == "--help" ? 0 : 2);
    }
  }
  return a;
}

// Median seconds of `timed` over `samples` runs after one warm-up; `setup`
// runs untimed before each.
template <typename Setup, typename Fn>
double MedianSeconds(int samples, Setup setup, Fn timed) {
  setup();
  timed();  // warm-up
  std::vector<double> t;
  for (int i = 0; i < samples; ++i) {
    setup();
    auto start = std::chrono::steady_clock::now();
    timed();
    t.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

template <typename Fn>
double MedianSeconds(int samples, Fn timed) {
  return MedianSeconds(
      samples, [] {}, timed);
}

void Check(const absl::Status& s, const char* what) {
  if (s.ok()) return;
  std::fprintf(stderr, "device_link_bench: %s: %s\n", what,
               s.ToString().c_str());
  std::exit(1);
}

struct Row {
  std::string name;
  double gbps;
};

// Raw backend copies between a pinned arena and the device arena.
std::vector<Row> RawCopies(const Args& a, std::string* device_name) {
  DeviceOptions o;
  o.budget_bytes = a.size_bytes;
  std::string why;
  auto device = OpenDeviceBackend(o, &why);
  Check(device.status(), "open device");
  *device_name = (*device)->name();
  auto dev = (*device)->ReserveArena(a.size_bytes);
  Check(dev.status(), "reserve device arena");
  auto host = HostArena::Create(a.size_bytes, true, device->get());
  Check(host.status(), "host arena");
  std::byte* h = (*host)->base();
  for (uint64_t i = 0; i < a.size_bytes; ++i) h[i] = std::byte(i * 131 % 251);
  const double h2d = MedianSeconds(a.samples, [&] {
    Check((*device)->Copy(CopyKind::kH2D, *dev, h, a.size_bytes), "h2d");
  });
  std::memset(h, 0, a.size_bytes);
  const double d2h = MedianSeconds(a.samples, [&] {
    Check((*device)->Copy(CopyKind::kD2H, h, *dev, a.size_bytes), "d2h");
  });
  for (uint64_t i = 0; i < a.size_bytes; i += 4093) {
    if (h[i] != std::byte(i * 131 % 251))
      Check(absl::DataLossError("raw copy bytes differ"), "verify");
  }
  return {{"raw_h2d", a.size_bytes / h2d / 1e9},
          {"raw_d2h", a.size_bytes / d2h / 1e9}};
}

// The same transfers through the store's residency machinery.
std::vector<Row> StoreCopies(const Args& a) {
  StoreOptions o;
  o.device.budget_bytes = a.size_bytes + kMiB;
  o.host.budget_bytes = a.size_bytes + kMiB;
  auto store = Store::Open(o);
  Check(store.status(), "open store");
  Store& s = **store;
  auto id = s.Create(
      {.name = "link", .size_bytes = a.size_bytes, .home = Tier::kHost});
  Check(id.status(), "create");
  std::vector<unsigned char> pattern(a.size_bytes);
  for (uint64_t i = 0; i < a.size_bytes; ++i)
    pattern[i] = static_cast<unsigned char>(i * 7 % 253);
  Check(s.Write(*id, pattern.data(), a.size_bytes), "write");
  const double h2d = MedianSeconds(a.samples, [&] {
    auto lease = s.Acquire(*id, Tier::kDevice, Access::kRead);  // H2D
    Check(lease.status(), "acquire device");
    Check(lease->Release(), "release");
    Check(s.Evict(*id, Tier::kHost), "drop device copy");  // clean: no copy
  });
  const double d2h = MedianSeconds(
      a.samples,
      [&] {  // untimed: a dirty device copy (H2D load, then a write lease)
        auto lease = s.Acquire(*id, Tier::kDevice, Access::kWrite);
        Check(lease.status(), "acquire device for write");
      },
      [&] { Check(s.Evict(*id, Tier::kHost), "write back"); });  // D2H
  std::vector<unsigned char> out(a.size_bytes);
  Check(s.Read(*id, out.data(), a.size_bytes), "read back");
  if (out != pattern)
    Check(absl::DataLossError("store bytes differ"), "verify");
  return {{"store_h2d", a.size_bytes / h2d / 1e9},
          {"store_d2h", a.size_bytes / d2h / 1e9}};
}

}  // namespace
}  // namespace strata

int main(int argc, char** argv) {
  using namespace strata;
  const Args args = ParseArgs(argc, argv);
  std::string device;
  std::vector<Row> raw = RawCopies(args, &device);
  std::vector<Row> store = StoreCopies(args);
  std::printf("device_link_bench on %s, %llu MiB, median of %d\n",
              device.c_str(), (unsigned long long)(args.size_bytes / kMiB),
              args.samples);
  std::printf("%-10s %12s %12s %8s\n", "direction", "raw GB/s", "store GB/s",
              "ratio");
  nlohmann::json j = {{"device", device},
                      {"size_bytes", args.size_bytes},
                      {"samples", args.samples}};
  for (int i = 0; i < 2; ++i) {
    const char* dir = i == 0 ? "h2d" : "d2h";
    const double ratio = store[i].gbps / raw[i].gbps;
    std::printf("%-10s %12.2f %12.2f %8.3f\n", dir, raw[i].gbps, store[i].gbps,
                ratio);
    j[dir] = {{"raw_gbps", raw[i].gbps},
              {"store_gbps", store[i].gbps},
              {"ratio", ratio}};
  }
  if (!args.json.empty()) std::ofstream(args.json) << j.dump(2) << "\n";
  return 0;
}
