#include "src/timeline.h"

#include <cerrno>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace strata {

Timeline::Timeline() : origin_(absl::Now()) {}

void Timeline::Record(std::string name, std::string track, absl::Time start,
                      absl::Time end) {
  Span span{std::move(name), std::move(track),
            absl::ToDoubleMicroseconds(start - origin_),
            absl::ToDoubleMicroseconds(end - start)};
  MutexLock lock(&mu_);
  spans_.push_back(std::move(span));
}

size_t Timeline::size() const {
  MutexLock lock(&mu_);
  return spans_.size();
}

absl::Status Timeline::WriteChromeTrace(const std::string& path) const {
  nlohmann::json events = nlohmann::json::array();
  std::map<std::string, int> tids;  // track -> thread id, in first-seen order
  {
    MutexLock lock(&mu_);
    for (const Span& s : spans_) {
      auto [it, added] =
          tids.emplace(s.track, static_cast<int>(tids.size()) + 1);
      if (added) {
        events.push_back({{"name", "thread_name"},
                          {"ph", "M"},
                          {"pid", 1},
                          {"tid", it->second},
                          {"args", {{"name", s.track}}}});
      }
      events.push_back({{"name", s.name},
                        {"cat", s.track},
                        {"ph", "X"},
                        {"pid", 1},
                        {"tid", it->second},
                        {"ts", s.start_us},
                        {"dur", s.duration_us}});
    }
  }
  std::ofstream out(path);
  out << nlohmann::json{{"traceEvents", events}, {"displayTimeUnit", "ms"}}
             .dump()
      << "\n";
  out.close();
  if (!out) {
    return absl::ErrnoToStatus(errno,
                               absl::StrCat("cannot write timeline ", path));
  }
  return absl::OkStatus();
}

}  // namespace strata
