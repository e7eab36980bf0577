// Occupancy of a resource that serves one request at a time, booked out of time order.
//
// Why: the model times each Gemmini command when the host issues it, queue by queue, so the
// requests reaching a shared resource (the LLC's state machine, a memory-bus channel, an L2
// MSHR, the DMA's read-data path) are booked in program order, not time order. A move-out
// waiting for a long computation books the L2 for cycle t + 5000 before the move-ins issued
// after it book cycle t. A single "free at" time per resource would make those move-ins wait
// for the later move-out; the hardware serves whichever request arrives first. A Timeline keeps
// the booked intervals, so each request gets the first gap at or after its own time.
#pragma once

#include <cstdint>
#include <iterator>
#include <map>

namespace autocomp_gemmini {

class Timeline {
 public:
  // The first time at or after `t` with `len` free cycles, without booking them.
  uint64_t earliest(uint64_t t, uint64_t len) const {
    if (t >= latest_) return t;  // after everything booked: most requests come in time order
    auto it = busy_.upper_bound(t);
    if (it != busy_.begin()) {
      auto prev = std::prev(it);
      if (prev->second > t) t = prev->second;
    }
    while (len > 0 && it != busy_.end() && it->first < t + len) {
      if (it->second > t) t = it->second;
      ++it;
    }
    return t;
  }

  // Books `len` cycles at the first gap at or after `t` that fits them; returns their start.
  uint64_t reserve(uint64_t t, uint64_t len) {
    const uint64_t start = earliest(t, len);
    book(start, start + len);
    return start;
  }

  // Books [start, end) whatever it overlaps: for an occupancy known only once the request is
  // done (an MSHR held until its refill returns), merged with the intervals it touches.
  void book(uint64_t start, uint64_t end) {
    if (end <= start) return;
    if (!busy_.empty() && start >= latest_) {  // in time order: extend or append the last one
      auto last = std::prev(busy_.end());
      if (last->second == start) last->second = end;
      else busy_.emplace_hint(busy_.end(), start, end);
      latest_ = end;
      prune();
      return;
    }
    auto it = busy_.lower_bound(start);
    if (it != busy_.begin() && std::prev(it)->second >= start) {
      --it;
      start = it->first;
    }
    while (it != busy_.end() && it->first <= end) {
      if (it->second > end) end = it->second;
      it = busy_.erase(it);
    }
    busy_.emplace(start, end);
    if (end > latest_) latest_ = end;
    prune();
  }

  size_t intervals() const { return busy_.size(); }

 private:
  // Requests arrive at most a few thousand cycles out of order; intervals far behind the
  // latest booking can no longer be reached and are dropped to keep lookups short.
  void prune() {
    while (busy_.size() > kKeep && busy_.begin()->second + kHorizon < latest_) busy_.erase(busy_.begin());
  }

  static constexpr size_t kKeep = 64;
  static constexpr uint64_t kHorizon = 100000;
  std::map<uint64_t, uint64_t> busy_;  // start -> end, disjoint and not touching
  uint64_t latest_ = 0;
};

}  // namespace autocomp_gemmini
