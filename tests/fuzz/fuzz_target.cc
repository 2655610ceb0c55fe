// fuzz_target.cc: the registry and helpers of the fuzz targets (see
// fuzz_target.h).
#include "tests/fuzz/fuzz_target.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/reflection.h"

namespace strata::fuzz {
namespace {

std::vector<Target>& Registry() {
  static auto* targets = new std::vector<Target>;
  return *targets;
}

}  // namespace

const std::vector<Target>& Targets() {
  std::vector<Target>& targets = Registry();
  std::sort(targets.begin(), targets.end(),
            [](const Target& a, const Target& b) { return a.name < b.name; });
  return targets;
}

bool Register(const char* name, TargetFn fn) {
  Registry().push_back({name, fn});
  return true;
}

void Fail(const char* what, const char* file, int line) {
  std::fprintf(stderr, "strata fuzz finding: %s (%s:%d)\n", what, file, line);
  std::abort();
}

void CheckRefusal(const absl::Status& status, const char* file, int line) {
  if (status.ok()) return;
  if (status.message().empty()) Fail("a refusal without a message", file, line);
  if (status.code() == absl::StatusCode::kInternal ||
      status.code() == absl::StatusCode::kUnknown) {
    std::fprintf(stderr, "strata fuzz: %s\n", status.ToString().c_str());
    Fail("bad input refused as Internal or Unknown", file, line);
  }
}

const std::string& FreshScratchDir() {
  namespace fs = std::filesystem;
  static const std::string dir = [] {
    const char* tmp = std::getenv("TMPDIR");
    const fs::path root = fs::is_directory("/dev/shm") ? fs::path("/dev/shm")
                          : tmp != nullptr             ? fs::path(tmp)
                                                       : fs::path("/tmp");
    return (root / ("strata-fuzz-" + std::to_string(::getpid()))).string();
  }();
  static const bool cleanup = [] {
    std::atexit([] {
      std::error_code ec;
      fs::remove_all(dir, ec);
    });
    return true;
  }();
  (void)cleanup;
  std::error_code ec;
  fs::remove_all(dir, ec);
  fs::create_directories(dir, ec);
  if (ec) Fail("cannot make the scratch directory", __FILE__, __LINE__);
  return dir;
}

void WriteFile(const std::string& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out.good()) Fail("cannot write a scratch file", __FILE__, __LINE__);
}

FlagRestorer::FlagRestorer() {
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    saved_.emplace_back(std::string(name), flag->CurrentValue());
  }
}

FlagRestorer::~FlagRestorer() {
  const auto flags = absl::GetAllFlags();
  for (const auto& [name, value] : saved_) {
    absl::CommandLineFlag* flag = flags.at(name);
    std::string error;
    if (flag->CurrentValue() != value && !flag->ParseFrom(value, &error)) {
      Fail("a flag's saved value does not parse back", __FILE__, __LINE__);
    }
  }
}

std::vector<std::string_view> SplitParts(std::string_view data, int parts) {
  std::vector<std::string_view> out;
  while (static_cast<int>(out.size()) + 1 < parts) {
    const size_t at = data.find(kPartSeparator);
    if (at == std::string_view::npos) break;
    out.push_back(data.substr(0, at));
    data.remove_prefix(at + kPartSeparator.size());
  }
  out.push_back(data);
  out.resize(parts);
  return out;
}

}  // namespace strata::fuzz
