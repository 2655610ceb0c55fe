// profile.cc: MachineProfile as JSON (see include/strata/profile.h).
#include "strata/profile.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "absl/strings/str_format.h"
#include "base/json_nesting.h"
#include "base/json_numbers.h"
#include "strata/status.h"
#include "tiers/nvme/request_shape.h"

namespace strata {
namespace {

constexpr int kFormatVersion = 1;

nlohmann::json PointsJson(const std::vector<LinkPoint>& points) {
  nlohmann::json j = nlohmann::json::array();
  for (const LinkPoint& p : points) {
    j.push_back({{"bytes", p.bytes}, {"gbps", p.gbps}});
  }
  return j;
}

absl::StatusOr<std::vector<LinkPoint>> PointsFrom(const nlohmann::json& j,
                                                  const char* field) {
  std::vector<LinkPoint> points;
  if (!j.contains(field)) return points;
  for (const nlohmann::json& p : j.at(field)) {
    const std::optional<uint64_t> bytes = JsonInteger<uint64_t>(p.at("bytes"));
    LinkPoint point{.bytes = bytes.value_or(0),
                    .gbps = p.at("gbps").get<double>()};
    if (point.bytes == 0 || !(point.gbps >= 0)) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: a point with %s bytes at %g GB/s", field,
                          p.at("bytes").dump(), point.gbps));
    }
    points.push_back(point);
  }
  return points;
}

absl::Status CheckNvme(const MachineProfile& p) {
  if (p.nvme_block_size_bytes == 0 && p.nvme_queue_depth == 0) {
    return absl::OkStatus();  // not measured
  }
  STRATA_RETURN_IF_ERROR(
      CheckNvmeRequestShape(p.nvme_block_size_bytes, p.nvme_queue_depth,
                            "nvme.block_size_bytes", "nvme.queue_depth"));
  if (!(p.nvme_read_gbps >= 0) || !(p.nvme_write_gbps >= 0)) {
    return absl::InvalidArgumentError("nvme bandwidth must be >= 0");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status SaveMachineProfile(const MachineProfile& p,
                                const std::string& path) {
  const nlohmann::json j = {
      {"strata_machine_profile", kFormatVersion},
      {"device", p.device},
      {"link", {{"h2d", PointsJson(p.h2d)}, {"d2h", PointsJson(p.d2h)}}},
      {"nvme",
       {{"block_size_bytes", p.nvme_block_size_bytes},
        {"queue_depth", p.nvme_queue_depth},
        {"read_gbps", p.nvme_read_gbps},
        {"write_gbps", p.nvme_write_gbps},
        {"directory", p.nvme_directory}}},
  };
  std::ofstream out(path);
  out << j.dump(2) << "\n";
  out.close();
  if (!out) {
    return absl::ErrnoToStatus(
        errno, absl::StrFormat("cannot write the profile to %s", path));
  }
  return absl::OkStatus();
}

absl::StatusOr<MachineProfile> LoadMachineProfile(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return absl::ErrnoToStatus(
        errno, absl::StrFormat("cannot read the profile %s", path));
  }
  std::stringstream text;
  text << in.rdbuf();
  if (JsonNestingDepth(text.str()) > kMaxJsonNesting) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s is not a strata machine profile: it nests deeper than %d levels",
        path, kMaxJsonNesting));
  }
  MachineProfile p;
  try {
    const nlohmann::json j = nlohmann::json::parse(text.str());
    if (!j.is_object() || !j.contains("strata_machine_profile") ||
        JsonInteger<int>(j["strata_machine_profile"]) != kFormatVersion) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s is not a strata machine profile (format %d); write one with "
          "`strata bench --profile=%s`",
          path, kFormatVersion, path));
    }
    p.device = j.value("device", "");
    if (j.contains("link")) {
      absl::StatusOr<std::vector<LinkPoint>> h2d = PointsFrom(j["link"], "h2d");
      if (!h2d.ok()) return h2d.status();
      absl::StatusOr<std::vector<LinkPoint>> d2h = PointsFrom(j["link"], "d2h");
      if (!d2h.ok()) return d2h.status();
      p.h2d = *std::move(h2d);
      p.d2h = *std::move(d2h);
    }
    if (j.contains("nvme")) {
      const nlohmann::json& n = j["nvme"];
      for (const char* field : {"block_size_bytes", "queue_depth"}) {
        // uint32 for both: a queue depth past it would wrap, and no block
        // size is 4 GiB.
        if (n.contains(field) && !JsonInteger<uint32_t>(n[field])) {
          return absl::InvalidArgumentError(absl::StrFormat(
              "profile %s: nvme.%s=%s: must be a whole number in [0, 2^32)",
              path, field, n[field].dump()));
        }
      }
      p.nvme_block_size_bytes = n.value("block_size_bytes", uint64_t{0});
      p.nvme_queue_depth = n.value("queue_depth", uint32_t{0});
      p.nvme_read_gbps = n.value("read_gbps", 0.0);
      p.nvme_write_gbps = n.value("write_gbps", 0.0);
      p.nvme_directory = n.value("directory", "");
    }
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrFormat("profile %s: %s", path, e.what()));
  }
  if (absl::Status s = CheckNvme(p); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("profile %s: %s", path, s.message()));
  }
  return p;
}

void ApplyMachineProfile(const MachineProfile& p, StoreOptions* options) {
  if (p.nvme_block_size_bytes > 0) {
    options->nvme.block_size_bytes = p.nvme_block_size_bytes;
  }
  if (p.nvme_queue_depth > 0) options->nvme.queue_depth = p.nvme_queue_depth;
}

}  // namespace strata
