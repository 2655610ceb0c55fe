// nvme_floor.cc: NvmeFloorBytes — the bytes held above NVMe in any
// schedule, the gaps and versions a schedule may evict, and the sweep that
// covers each position's shortfall over unrolled copies of the step.
#include "scheduler/nvme_floor.h"

#include <algorithm>
#include <bit>
#include <utility>
#include <vector>

#include "scheduler/plan_model.h"

namespace strata {
namespace {

// Copies of the step the sweep runs over: as many as fit in kSweepPositions,
// at least kMinCycles (more positions than that past 2^14 accesses). The floor
// found is short of the cyclic optimum by at most the bytes of the gaps
// crossing the cut over the copies, and the sweep costs O(copies * accesses).
constexpr uint64_t kSweepPositions = uint64_t{1} << 17;
constexpr uint64_t kMinCycles = 8;
constexpr uint64_t kMaxCycles = 4096;

uint64_t Cycles(uint64_t n) {
  return std::clamp(kSweepPositions / n, kMinCycles, kMaxCycles);
}

bool IsUpper(Tier tier) { return tier != Tier::kNvme; }

// Positions of one stretch of a gap: [begin, begin + length), cyclic.
struct Piece {
  uint32_t begin = 0;
  uint32_t length = 0;
};

// What a schedule may keep on NVMe at a cost of up to `bytes`: one gap (for
// reads), or the gaps of one version (for writes), in cyclic order.
struct Group {
  uint64_t bytes = 0;
  std::vector<Piece> pieces;
};

// Per access position, the end of the union of its tensor's leases that
// contains it (the first position where no lease of the tensor started at or
// before it is still held). `upper_only`: leases on the device or host tier
// that its home does not already reserve; other positions get their own.
std::vector<uint32_t> LeaseUnionEnds(const PlanModel& model, bool upper_only) {
  const PlanInput& in = model.input();
  const auto n = static_cast<uint32_t>(in.accesses.size());
  std::vector<uint32_t> ends(n);
  std::vector<uint32_t> open(in.tensors.size(), 0);  // held to, so far
  std::vector<std::vector<uint32_t>> members(in.tensors.size());
  const auto close = [&](uint32_t t) {
    for (uint32_t p : members[t]) ends[p] = open[t];
    members[t].clear();
  };
  for (uint32_t p = 0; p < n; ++p) {
    const PlanAccess& a = in.accesses[p];
    ends[p] = p;
    const Tier home = in.tensors[a.tensor].home;
    if (upper_only && (!IsUpper(a.tier) || a.tier == home)) continue;
    if (members[a.tensor].empty() || p >= open[a.tensor]) {
      close(a.tensor);
      open[a.tensor] = a.hold_end;
    } else {
      open[a.tensor] = std::max(open[a.tensor], a.hold_end);
    }
    members[a.tensor].push_back(p);
  }
  for (uint32_t t = 0; t < members.size(); ++t) close(t);
  return ends;
}

// Bytes above NVMe at each position in every schedule: homes on the device
// or host, and leases there (each tensor's once, however many overlap).
std::vector<int64_t> FixedBytes(const PlanModel& model) {
  const PlanInput& in = model.input();
  const size_t n = in.accesses.size();
  std::vector<int64_t> delta(n + 1, 0);
  int64_t homes = 0;
  for (const PlanTensor& t : in.tensors) {
    if (IsUpper(t.home)) homes += static_cast<int64_t>(t.bytes);
  }
  const std::vector<uint32_t> ends = LeaseUnionEnds(model, true);
  std::vector<uint32_t> held_to(in.tensors.size(), 0);
  for (uint32_t p = 0; p < n; ++p) {
    const PlanAccess& a = in.accesses[p];
    // Count a union once, from its first lease (held_to is past the others).
    if (ends[p] <= p || p < held_to[a.tensor]) continue;
    held_to[a.tensor] = ends[p];
    const auto bytes = static_cast<int64_t>(in.tensors[a.tensor].bytes);
    delta[p] += bytes;
    delta[ends[p]] -= bytes;
  }
  std::vector<int64_t> fixed(n);
  int64_t running = homes;
  for (size_t p = 0; p < n; ++p) fixed[p] = running += delta[p];
  return fixed;
}

// The stretch of `g` its contents wait over: from the end of every lease of
// its tensor that is held at its first use, to its end. Empty for a held
// gap, or where NVMe may not hold it.
Piece Waiting(const PlanModel& model, const PlanGap& g,
              const std::vector<uint32_t>& lease_ends) {
  if (g.held || (g.allowed & PlacementBit(GapPlacement::kNvme)) == 0) return {};
  const auto n = static_cast<uint32_t>(model.positions());
  const uint32_t start = model.input().accesses[g.from_access].hold_end;
  const uint32_t end = start + g.length;
  const uint32_t from = std::max(start, lease_ends[g.from_access]);
  if (end <= from) return {};
  return {.begin = from % n, .length = end - from};
}

// Covers the shortfall of `groups` over `fixed` above `above` bytes; see
// the header. Returns the larger of the fullest position's shortfall and
// the sweep's optimum over Cycles(n) copies, per copy.
uint64_t Cover(const std::vector<int64_t>& fixed,
               const std::vector<Group>& groups, int64_t above);

}  // namespace

NvmeFloors NvmeFloorBytes(const PlanInput& input) {
  if (input.accesses.empty()) return {};
  return NvmeFloorBytes(PlanModel(input));
}

NvmeFloors NvmeFloorBytes(const PlanModel& model) {
  if (model.positions() == 0) return {};
  const std::vector<int64_t> fixed = FixedBytes(model);
  const std::vector<uint32_t> lease_ends = LeaseUnionEnds(model, false);
  // Pooled, saturating: budgets past INT64_MAX bytes hold everything.
  uint64_t pooled = 0;
  if (__builtin_add_overflow(model.capacity(Tier::kDevice),
                             model.capacity(Tier::kHost), &pooled) ||
      pooled > INT64_MAX) {
    pooled = INT64_MAX;
  }
  const auto above = static_cast<int64_t>(pooled);
  // Reads: each live gap evicts on its own (one whose next use reads on
  // the NVMe tier reads nothing over a link).
  std::vector<Group> reads;
  for (const PlanGap& g : model.gaps()) {
    if (!g.live || g.to_tier == Tier::kNvme) continue;
    const Piece piece = Waiting(model, g, lease_ends);
    if (piece.length > 0) reads.push_back({model.tensor(g).bytes, {piece}});
  }
  // Writes: the gaps of each dirty version (live, or kept until a discard)
  // evict together for one write; clean contents evict for free, and a
  // version read on the NVMe tier is written whatever the schedule.
  std::vector<Group> writes(model.versions().size());
  uint64_t forced = 0;
  for (size_t v = 0; v < model.versions().size(); ++v) {
    const PlanVersion& version = model.versions()[v];
    if (version.dirty && version.nvme_access) {
      forced += model.input().tensors[version.tensor].bytes;
    }
  }
  for (const PlanGap& g : model.gaps()) {
    const PlanVersion& version = model.versions()[g.version];
    if (!version.dirty || version.nvme_access || !(g.live || g.kept)) continue;
    const Piece piece = Waiting(model, g, lease_ends);
    if (piece.length == 0) continue;
    writes[g.version].bytes = model.tensor(g).bytes;
    writes[g.version].pieces.push_back(piece);
  }
  std::erase_if(writes, [](const Group& w) { return w.pieces.empty(); });
  return {.read_bytes = Cover(fixed, reads, above),
          .write_bytes = forced + Cover(fixed, writes, above)};
}

namespace {

// A set of positions that knows its largest: a bitmap, a summary bitmap of
// its nonzero words to find the next largest when the largest leaves.
class Ends {
 public:
  static constexpr uint64_t kNone = UINT64_MAX;
  explicit Ends(uint64_t size)
      : words_((size + 63) / 64, 0), summary_((words_.size() + 63) / 64, 0) {}
  void Set(uint64_t i) {
    words_[i / 64] |= uint64_t{1} << (i % 64);
    summary_[i / 4096] |= uint64_t{1} << (i / 64 % 64);
    if (last_ == kNone || i > last_) last_ = i;
  }
  void Clear(uint64_t i) {
    words_[i / 64] &= ~(uint64_t{1} << (i % 64));
    if (words_[i / 64] == 0) {
      summary_[i / 4096] &= ~(uint64_t{1} << (i / 64 % 64));
    }
    if (i == last_) last_ = Below(i);
  }
  uint64_t Last() const { return last_; }

 private:
  // The largest in the set below i, or kNone.
  uint64_t Below(uint64_t i) const {
    const uint64_t w = i / 64;
    if (const uint64_t low = words_[w] & ((uint64_t{1} << (i % 64)) - 1)) {
      return w * 64 + 63 - std::countl_zero(low);
    }
    const uint64_t s = w / 64;
    uint64_t in_summary = summary_[s] & ((uint64_t{1} << (w % 64)) - 1);
    for (uint64_t k = s + 1; k-- > 0;) {
      if (k < s) in_summary = summary_[k];
      if (in_summary == 0) continue;
      const uint64_t word = k * 64 + 63 - std::countl_zero(in_summary);
      return word * 64 + 63 - std::countl_zero(words_[word]);
    }
    return kNone;
  }

  std::vector<uint64_t> words_;
  std::vector<uint64_t> summary_;
  uint64_t last_ = kNone;
};

// One copy of a group in the unrolled steps: it covers [start, end).
struct Item {
  uint64_t start = 0;
  uint64_t end = 0;
  int64_t room = 0;  // bytes it may still cover
};

// Where each piece of `g` starts, from the group's first, cyclically in
// order; and the group's whole span.
std::vector<uint64_t> Offsets(const Group& g, uint32_t n, uint64_t* span) {
  std::vector<uint64_t> at(g.pieces.size(), 0);
  *span = g.pieces[0].length;
  for (size_t i = 1; i < g.pieces.size(); ++i) {
    const uint32_t step = (g.pieces[i].begin + n - g.pieces[i - 1].begin) % n;
    at[i] = at[i - 1] + step;
    *span = std::max(*span, at[i] + g.pieces[i].length);
  }
  return at;
}

// The position to cut the cycle at: where the fewest group bytes cross.
uint32_t Cut(const std::vector<Group>& groups, uint32_t n) {
  std::vector<int64_t> delta(n + 1, 0);
  for (const Group& g : groups) {
    uint64_t span = 0;
    Offsets(g, n, &span);
    // The cut at p splits g where g holds both p - 1 and p.
    const uint64_t first = g.pieces[0].begin + 1;
    const uint64_t last = g.pieces[0].begin + span;  // exclusive
    for (uint64_t from = first; from < last; from += n) {
      const uint64_t to = std::min(last, (from / n + 1) * n);
      delta[from % n] += static_cast<int64_t>(g.bytes);
      delta[(to - 1) % n + 1] -= static_cast<int64_t>(g.bytes);
    }
  }
  uint32_t best = 0;
  int64_t crossing = 0, fewest = INT64_MAX;
  for (uint32_t p = 0; p < n; ++p) {
    crossing += delta[p];
    if (crossing < fewest) fewest = crossing, best = p;
  }
  return best;
}

// Of `evictable` bytes beside `fixed` ones, those that cannot stay within
// `above`: where the leases and homes alone pass the budgets (the plan
// reports that overflow), all of them, and no more.
int64_t Shortfall(int64_t fixed, int64_t evictable, int64_t above) {
  return evictable - std::max<int64_t>(0, above - fixed);
}

// The fullest position's shortfall: bytes that cannot all stay above NVMe.
int64_t Peak(const std::vector<int64_t>& fixed,
             const std::vector<Group>& groups, int64_t above) {
  const auto n = static_cast<uint32_t>(fixed.size());
  std::vector<int64_t> delta(n + 1, 0);
  for (const Group& g : groups) {
    const auto bytes = static_cast<int64_t>(g.bytes);
    for (const Piece& piece : g.pieces) {
      const uint32_t end = piece.begin + std::min(piece.length, n);
      delta[piece.begin] += bytes;
      if (end <= n) {
        delta[end] -= bytes;
      } else {  // wraps past the step's end
        delta[n] -= bytes;
        delta[0] += bytes;
        delta[end - n] -= bytes;
      }
    }
  }
  int64_t load = 0, peak = 0;
  for (uint32_t p = 0; p < n; ++p) {
    load += delta[p];
    peak = std::max(peak, Shortfall(fixed[p], load, above));
  }
  return peak;
}

uint64_t Cover(const std::vector<int64_t>& fixed,
               const std::vector<Group>& groups, int64_t above) {
  const auto n = static_cast<uint32_t>(fixed.size());
  const int64_t peak = Peak(fixed, groups, above);
  if (peak <= 0) return 0;
  const uint32_t cut = Cut(groups, n);
  const uint64_t cycles = Cycles(n);
  const uint64_t length = cycles * n;
  // The copies that fit within the unrolled steps, and what they hold; in
  // order of start (the groups sorted by start in the first copy).
  struct Unrolled {
    uint64_t first = 0;  // start in the first copy
    uint64_t span = 0;
    std::vector<uint64_t> at;
    const Group* group = nullptr;
  };
  std::vector<Unrolled> order;
  order.reserve(groups.size());
  for (const Group& g : groups) {
    Unrolled u{.first = (g.pieces[0].begin + n - cut) % n, .group = &g};
    u.at = Offsets(g, n, &u.span);
    order.push_back(std::move(u));
  }
  std::sort(
      order.begin(), order.end(),
      [](const Unrolled& a, const Unrolled& b) { return a.first < b.first; });
  std::vector<Item> items;
  items.reserve(order.size() * cycles);
  std::vector<int64_t> load(length + 1, 0);
  for (uint64_t c = 0; c < cycles; ++c) {
    for (const Unrolled& u : order) {
      const uint64_t start = u.first + c * n;
      if (start + u.span > length) continue;
      const auto bytes = static_cast<int64_t>(u.group->bytes);
      items.push_back({start, start + u.span, bytes});
      for (size_t i = 0; i < u.at.size(); ++i) {
        load[start + u.at[i]] += bytes;
        load[start + u.at[i] + u.group->pieces[i].length] -= bytes;
      }
    }
  }
  // Room of the items started so far, by end: items that end together are
  // interchangeable. The largest end with room is the one to take from;
  // an end at or before q is an item gone.
  std::vector<int64_t> room(length + 1, 0);
  Ends ends(length + 1);
  std::vector<int64_t> expiring(length + 1, 0);  // cover that ends at q
  int64_t held = 0, covered = 0, total = 0;
  size_t next = 0;
  for (uint64_t q = 0, p = cut; q < length; ++q, p = p + 1 == n ? 0 : p + 1) {
    held += load[q];
    covered += expiring[q];
    for (; next < items.size() && items[next].start == q; ++next) {
      room[items[next].end] += items[next].room;
      ends.Set(items[next].end);
    }
    int64_t shortfall = Shortfall(fixed[p], held, above) - covered;
    while (shortfall > 0) {
      const uint64_t end = ends.Last();
      if (end == Ends::kNone || end <= q) break;
      const int64_t take = std::min(room[end], shortfall);
      room[end] -= take;
      if (room[end] == 0) ends.Clear(end);
      covered += take;
      expiring[end] -= take;
      total += take;
      shortfall -= take;
    }
  }
  return static_cast<uint64_t>(
      std::max(peak, total / static_cast<int64_t>(cycles)));
}

}  // namespace
}  // namespace strata
