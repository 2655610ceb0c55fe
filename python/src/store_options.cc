// store_options.cc: Store(...)'s keyword arguments as StoreOptions. The
// names are the CLI's flags with underscores (--device-budget:
// device_budget), so docs/cli.md describes both.
#include <nanobind/stl/string.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/byte_size.h"
#include "python/src/errors.h"
#include "python/src/py_store.h"
#include "strata/option_names.h"
#include "strata/profile.h"

namespace nb = nanobind;

namespace strata::python {
namespace {

[[noreturn]] void Bad(const std::string& key, const std::string& why) {
  throw StatusError(absl::InvalidArgumentError(absl::StrCat(key, ": ", why)));
}

// A size: an int of bytes or a string such as "4GiB".
uint64_t Size(const std::string& key, nb::handle value) {
  if (nb::isinstance<nb::str>(value)) {
    absl::StatusOr<uint64_t> bytes =
        ParseByteSize(nb::cast<std::string>(value));
    if (!bytes.ok()) Bad(key, std::string(bytes.status().message()));
    return *bytes;
  }
  if (nb::isinstance<nb::int_>(value) && !nb::isinstance<nb::bool_>(value)) {
    int64_t bytes = 0;
    if (!nb::try_cast<int64_t>(value, bytes)) Bad(key, "too large a size");
    if (bytes < 0) Bad(key, "a size cannot be negative");
    return static_cast<uint64_t>(bytes);
  }
  Bad(key, "a size is an int of bytes or a string such as \"4GiB\"");
}

bool Bool(const std::string& key, nb::handle value) {
  if (!nb::isinstance<nb::bool_>(value)) Bad(key, "expected True or False");
  return nb::cast<bool>(value);
}

std::string Text(const std::string& key, nb::handle value) {
  if (!nb::isinstance<nb::str>(value)) Bad(key, "expected a string");
  return nb::cast<std::string>(value);
}

double Number(const std::string& key, nb::handle value) {
  if (nb::isinstance<nb::bool_>(value) ||
      !(nb::isinstance<nb::int_>(value) || nb::isinstance<nb::float_>(value))) {
    Bad(key, "expected a number");
  }
  const double x = nb::cast<double>(value);
  if (!(x >= 0) || !std::isfinite(x)) Bad(key, "expected a finite number >= 0");
  return x;
}

int64_t Int(const std::string& key, nb::handle value, int64_t lo, int64_t hi) {
  if (nb::isinstance<nb::bool_>(value) || !nb::isinstance<nb::int_>(value)) {
    Bad(key, "expected an int");
  }
  int64_t x = 0;
  if (!nb::try_cast<int64_t>(value, x) || x < lo || x > hi) {
    Bad(key, absl::StrCat("expected ", lo, " to ", hi));
  }
  return x;
}

template <typename T>
T Parsed(absl::StatusOr<T> value) {
  return ValueOrThrow(std::move(value));
}

std::vector<std::string> Directories(const std::string& key, nb::handle value) {
  if (nb::isinstance<nb::str>(value)) return {nb::cast<std::string>(value)};
  std::vector<std::string> dirs;
  try {
    for (nb::handle d : value) dirs.push_back(Text(key, d));
  } catch (const nb::python_error&) {
    Bad(key, "expected a directory or a list of directories");
  }
  return dirs;
}

using Setter =
    std::function<void(const std::string&, nb::handle, StoreOptions&)>;

const std::map<std::string, Setter>& Setters() {
  static const auto* setters = new std::map<std::string, Setter>{
      {"device_budget",
       [](auto& k, nb::handle v, StoreOptions& o) {
         o.device.budget_bytes = Size(k, v);
       }},
      {"host_budget",
       [](auto& k, nb::handle v, StoreOptions& o) {
         o.host.budget_bytes = Size(k, v);
       }},
      {"nvme_dirs",
       [](auto& k, nb::handle v, StoreOptions& o) {
         o.nvme.directories = Directories(k, v);
       }},
      {"nvme_budget",
       [](auto& k, nb::handle v, StoreOptions& o) {
         o.nvme.budget_bytes = Size(k, v);
       }},
      {"device",
       [](auto& k, nb::handle v, StoreOptions& o) {
         o.device.backend = Parsed(ParseDeviceBackend(Text(k, v), k));
       }},
      {"cuda_device",
       [](auto& k, nb::handle v, StoreOptions& o) {
         o.device.cuda_device = static_cast<int>(Int(k, v, 0, 1023));
       }},
      {"memory",
       [](auto& k, nb::handle v, StoreOptions& o) {
         o.device.memory = Parsed(ParseDeviceMemory(Text(k, v), k));
       }},
      {"unified_hints",
       [](auto& k, nb::handle v, StoreOptions& o) {
         o.device.unified_hints = Bool(k, v);
       }},
      {"sim_link_gbps",
       [](auto& k, nb::handle v, StoreOptions& o) {
         o.device.sim_link_gbps = Number(k, v);
       }},
      {"sim_latency_us",
       [](auto& k, nb::handle v, StoreOptions& o) {
         o.device.sim_latency_seconds = Number(k, v) * 1e-6;
       }},
      {"sim_memory",
       [](auto& k, nb::handle v, StoreOptions& o) {
         o.device.sim_memory_bytes = Size(k, v);
       }},
      {"queue_depth",
       [](auto& k, nb::handle v, StoreOptions& o) {
         o.nvme.queue_depth = static_cast<uint32_t>(Int(k, v, 1, 4096));
       }},
      {"block_size",
       [](auto& k, nb::handle v, StoreOptions& o) {
         o.nvme.block_size_bytes = Size(k, v);
       }},
      {"io_engine",
       [](auto& k, nb::handle v, StoreOptions& o) {
         o.nvme.engine = Parsed(ParseIoEngine(Text(k, v), k));
       }},
      {"prefetch", [](auto& k, nb::handle v,
                      StoreOptions& o) { o.scheduler.prefetch = Bool(k, v); }},
      {"scheduler",
       [](auto& k, nb::handle v, StoreOptions& o) {
         const std::string s = Text(k, v);
         if (s != "planned" && s != "reactive") {
           Bad(k, absl::StrCat("\"", s, "\": use \"planned\" or \"reactive\""));
         }
         o.scheduler.planned = s == "planned";
       }},
      {"eviction",
       [](auto& k, nb::handle v, StoreOptions& o) {
         o.scheduler.eviction = Parsed(ParseEvictionPolicy(Text(k, v), k));
       }},
      {"timeline",
       [](auto& k, nb::handle v, StoreOptions& o) { o.timeline = Bool(k, v); }},
  };
  return *setters;
}

std::string Names() {
  std::vector<std::string> names;
  for (const auto& [name, setter] : Setters()) names.push_back(name);
  names.push_back("machine_profile");
  return absl::StrJoin(names, ", ");
}

}  // namespace

StoreOptions OptionsFromKwargs(const nb::kwargs& kwargs) {
  StoreOptions options;
  // The profile first: the keywords override what it sets.
  if (kwargs.contains("machine_profile")) {
    const std::string path = Text("machine_profile", kwargs["machine_profile"]);
    ApplyMachineProfile(ValueOrThrow(LoadMachineProfile(path)), &options);
  }
  bool nvme_budget_given = false;
  for (auto [key, value] : kwargs) {
    const std::string name = nb::cast<std::string>(key);
    if (name == "machine_profile") continue;
    auto it = Setters().find(name);
    if (it == Setters().end()) {
      Bad(name, absl::StrCat("unknown option; the options are ", Names()));
    }
    it->second(name, value, options);
    nvme_budget_given |= name == "nvme_budget";
  }
  // As `strata train`: 1 GiB of NVMe unless told otherwise.
  if (!options.nvme.directories.empty() && !nvme_budget_given) {
    options.nvme.budget_bytes = 1 * kGiB;
  }
  return options;
}

}  // namespace strata::python
