// compaction.cc: PlanCompaction.
#include "src/compaction.h"

#include <algorithm>
#include <limits>

namespace strata {
namespace {

enum class Kind : uint8_t { kFree, kMovable, kPinned };

struct Segment {
  uint64_t offset = 0;
  uint64_t bytes = 0;
  Kind kind = Kind::kPinned;
  Placement placement = Placement::kBestFit;  // a movable one's
};

// The arena in offset order: its free ranges, the movable extents (sorted),
// and the allocated bytes between them that stay.
std::vector<Segment> Segments(const ExtentAllocator& arena,
                              const std::vector<MovableExtent>& movable) {
  std::vector<Segment> out;
  const std::map<uint64_t, uint64_t>& free = arena.free_ranges();
  auto f = free.begin();
  size_t m = 0;
  uint64_t at = 0;
  while (at < arena.capacity()) {
    const uint64_t next_free = f != free.end() ? f->first : arena.capacity();
    const uint64_t next_move =
        m < movable.size() ? movable[m].extent.offset : arena.capacity();
    const uint64_t next = std::min(next_free, next_move);
    if (next > at) {
      out.push_back({at, next - at, Kind::kPinned});
      at = next;
    } else if (next_free == at) {
      out.push_back({at, f->second, Kind::kFree});
      at += f->second;
      ++f;
    } else {
      out.push_back(
          {at, movable[m].extent.bytes, Kind::kMovable, movable[m].placement});
      at += movable[m].extent.bytes;
      ++m;
    }
  }
  return out;
}

// [first, last) of `segments`: the window from segments[first] that covers
// `want` bytes with the fewest movable bytes in it; first == last if none.
std::pair<size_t, size_t> CheapestWindow(const std::vector<Segment>& segments,
                                         uint64_t want) {
  std::pair<size_t, size_t> best{0, 0};
  uint64_t best_cost = std::numeric_limits<uint64_t>::max();
  size_t j = 0;
  uint64_t length = 0, cost = 0;  // of segments [i, j)
  for (size_t i = 0; i < segments.size(); ++i) {
    if (segments[i].kind == Kind::kPinned || j <= i) {
      j = i + (segments[i].kind == Kind::kPinned ? 1 : 0);
      length = cost = 0;
      if (segments[i].kind == Kind::kPinned) continue;
    }
    while (length < want && j < segments.size() &&
           segments[j].kind != Kind::kPinned) {
      length += segments[j].bytes;
      if (segments[j].kind == Kind::kMovable) cost += segments[j].bytes;
      ++j;
    }
    if (length >= want && cost < best_cost) {
      best_cost = cost;
      best = {i, j};
    }
    length -= segments[i].bytes;
    if (segments[i].kind == Kind::kMovable) cost -= segments[i].bytes;
  }
  return best;
}

}  // namespace

std::optional<Compaction> PlanCompaction(const ExtentAllocator& arena,
                                         std::vector<MovableExtent> movable,
                                         uint64_t bytes) {
  const uint64_t want = arena.RoundUp(bytes);
  if (want == 0 || arena.largest_free_bytes() >= want ||
      arena.capacity() - arena.used_bytes() < want) {
    return std::nullopt;
  }
  std::sort(movable.begin(), movable.end(),
            [](const MovableExtent& a, const MovableExtent& b) {
              return a.extent.offset < b.extent.offset;
            });
  const std::vector<Segment> segments = Segments(arena, movable);
  const auto [first, last] = CheapestWindow(segments, want);
  if (first == last) return std::nullopt;
  // The window's free bytes are taken first so that no move lands there.
  const uint64_t window_end = segments[first].offset + want;
  ExtentAllocator trial = arena;
  std::vector<Segment> out;
  for (size_t s = first; s < last; ++s) {
    const Segment& seg = segments[s];
    if (seg.kind == Kind::kMovable) {
      out.push_back(seg);
    } else if (const uint64_t end =
                   std::min(seg.offset + seg.bytes, window_end);
               !trial.AllocateAt({seg.offset, end - seg.offset})) {
      return std::nullopt;
    }
  }
  std::sort(out.begin(), out.end(), [](const Segment& a, const Segment& b) {
    return a.bytes > b.bytes;
  });
  Compaction plan{.window = {segments[first].offset, want}};
  for (const Segment& from : out) {
    std::optional<Extent> to = trial.Allocate(from.bytes, from.placement);
    if (!to.has_value()) return std::nullopt;
    plan.moves.push_back({{from.offset, from.bytes}, *to});
    plan.moved_bytes += from.bytes;
  }
  return plan;
}

}  // namespace strata
