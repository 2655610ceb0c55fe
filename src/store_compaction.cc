// store_compaction.cc: StoreCore::Compact, the executor of
// src/compaction.h.
#include "absl/container/flat_hash_map.h"
#include "src/compaction.h"
#include "src/store_core.h"

namespace strata {
namespace {

// An idle copy: valid, not leased or waited for, in no transfer, no device
// work still reading it, and not its tensor's home (reserved for life).
bool Relocatable(const TensorRecord& rec, Tier tier) {
  const TierCopy& c = rec.copy(tier);
  return c.state() == CopyState::kValid && c.extent.has_value() &&
         !rec.is_home(tier) && !c.leased() && !c.busy() &&
         c.acquires_waiting == 0 && !rec.exclusive_pending &&
         c.queued_load == nullptr && c.load_error.ok() &&
         (c.release_event == nullptr || c.release_event->Done());
}

}  // namespace

bool StoreCore::Compact(Tier tier, uint64_t bytes) {
  if (unified() || tier == Tier::kNvme) return false;
  ExtentAllocator& arena = alloc(tier);
  const uint64_t want = arena.RoundUp(bytes);
  if (arena.largest_free_bytes() >= want ||
      arena.capacity() - arena.used_bytes() < want) {
    return false;
  }
  std::vector<MovableExtent> movable;
  absl::flat_hash_map<uint64_t, TensorRecord*> owner;  // by extent offset
  for (auto& [id, rec] : tensors_) {
    if (!Relocatable(*rec, tier)) continue;
    movable.push_back({*rec->copy(tier).extent,
                       PlacementFor(tier, rec->spec, arena.capacity())});
    owner[rec->copy(tier).extent->offset] = rec.get();
  }
  std::optional<Compaction> plan =
      PlanCompaction(arena, std::move(movable), bytes);
  if (!plan.has_value()) return false;
  for (const ExtentMove& m : plan->moves) {
    TensorRecord& rec = *owner.at(m.from.offset);
    if (!arena.AllocateAt(m.to)) return false;  // planned on this arena
    const absl::Status moved = mover_->Relocate(
        tier, m.from, m.to, rec.spec.size_bytes, rec.spec.name);
    if (!moved.ok()) {  // the copy stays where it was, intact
      arena.Free(m.to);
      return false;
    }
    rec.copy(tier).extent = m.to;
    arena.Free(m.from);
    relocated_bytes_[static_cast<int>(tier)] += m.from.bytes;
  }
  ++compactions_[static_cast<int>(tier)];
  return arena.largest_free_bytes() >= want;
}

}  // namespace strata
