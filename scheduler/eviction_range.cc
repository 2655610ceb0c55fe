// eviction_range.cc: PickVictimRange, a sliding window over the arena.
#include "scheduler/eviction_range.h"

#include <algorithm>
#include <limits>
#include <tuple>

namespace strata {
namespace {

// One piece of the arena in offset order: a free range or a copy.
struct Piece {
  uint64_t offset = 0;
  uint64_t bytes = 0;
  std::optional<size_t> copy;  // nullopt: free
  bool evictable = true;
};

std::vector<Piece> Pieces(absl::Span<const CopyView> copies,
                          absl::Span<const FreeRange> free,
                          const EvictionQuery& query) {
  std::vector<Piece> pieces;
  pieces.reserve(copies.size() + free.size());
  for (const FreeRange& f : free) pieces.push_back({f.offset, f.bytes, {}});
  for (size_t i = 0; i < copies.size(); ++i) {
    if (copies[i].tier != query.tier || copies[i].bytes == 0) continue;
    pieces.push_back(
        {copies[i].offset, copies[i].bytes, i, IsEvictable(copies[i], query)});
  }
  std::sort(pieces.begin(), pieces.end(),
            [](const Piece& a, const Piece& b) { return a.offset < b.offset; });
  return pieces;
}

// Smaller is a better window.
using WindowKey = std::tuple<uint64_t, uint64_t, uint64_t, uint64_t>;

WindowKey KeyOf(absl::Span<const CopyView> copies,
                absl::Span<const Piece> window, const EvictionQuery& query) {
  uint64_t soonest = std::numeric_limits<uint64_t>::max();
  uint64_t newest = 0, dirty = 0, evicted = 0;
  for (const Piece& p : window) {
    if (!p.copy.has_value()) continue;
    const CopyView& c = copies[*p.copy];
    soonest = std::min(soonest, c.next_use);
    newest = std::max(newest, c.last_use);
    if (c.dirty) dirty += c.bytes;
    evicted += c.bytes;
  }
  const uint64_t recency =
      query.policy == EvictionPolicy::kBelady ? ~soonest : newest;
  return {recency, dirty, evicted, window.front().offset};
}

}  // namespace

std::optional<std::vector<size_t>> PickVictimRange(
    absl::Span<const CopyView> copies, absl::Span<const FreeRange> free,
    uint64_t want, const EvictionQuery& query) {
  for (const FreeRange& f : free) {
    if (f.bytes >= want) return std::vector<size_t>{};
  }
  const std::vector<Piece> pieces = Pieces(copies, free, query);
  std::optional<WindowKey> best_key;
  size_t best_begin = 0, best_end = 0;
  for (size_t begin = 0; begin < pieces.size(); ++begin) {
    uint64_t covered = 0;
    size_t end = begin;
    // Grow while the pieces touch and may all be freed.
    while (end < pieces.size() && covered < want && pieces[end].evictable &&
           (end == begin || pieces[end].offset == pieces[end - 1].offset +
                                                      pieces[end - 1].bytes)) {
      covered += pieces[end].bytes;
      ++end;
    }
    if (covered < want) continue;
    const WindowKey key = KeyOf(
        copies, absl::MakeConstSpan(pieces).subspan(begin, end - begin), query);
    if (!best_key.has_value() || key < *best_key) {
      best_key = key;
      best_begin = begin;
      best_end = end;
    }
  }
  if (!best_key.has_value()) return std::nullopt;
  std::vector<size_t> victims;
  for (size_t i = best_begin; i < best_end; ++i) {
    if (pieces[i].copy.has_value()) victims.push_back(*pieces[i].copy);
  }
  return victims;
}

}  // namespace strata
