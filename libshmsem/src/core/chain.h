// Chains of lease records, read once. The only code that follows a lease's
// `link` in the segment (docs/DESIGN.md §7a, "Read once").
//
// A chain (a slot's reservation, a weighted lease's records) is linked
// through LeaseRecord::link, in shared memory, where another process may
// rewrite a link between two reads of it. So a chain is walked once into
// private memory: each link is read once, checked against the geometry,
// and each record is taken at most once; the walk stops at the first record
// that is not a member. Every later step acts on that copy, and commits
// with a store or CAS on a state word of a record the copy names; nothing
// follows a link again. A chain the walk found broken is the caller's to
// report (mark_corrupt: the repair at unlock rebuilds what is left).
#ifndef SHMSEM_SRC_CHAIN_H
#define SHMSEM_SRC_CHAIN_H

#include <string.h>

#include <vector>

#include "handle.h"

namespace shmsem::detail {

// Lease indices in private memory, in order: a small buffer inline (most
// chains are a single record), the rest on the heap. Each index is below
// the geometry's `permits` and appears once.
class Chain {
 public:
  uint32_t size() const { return n_; }
  bool empty() const { return n_ == 0; }
  uint32_t operator[](uint32_t i) const {
    return i < kInline ? inline_[i] : more_[i - kInline];
  }
  uint32_t back() const { return (*this)[n_ - 1]; }
  void push_back(uint32_t l) {
    if (n_ < kInline)
      inline_[n_] = l;
    else
      more_.push_back(l);
    if (!seen_.empty()) seen_[l] = true;  // kept current once built
    n_++;
  }
  // Puts `c`'s records at position `at` (records from `at` on follow them).
  void insert(uint32_t at, const Chain &c);
  // Keeps the first `k` records.
  void truncate(uint32_t k);
  // Whether `l` is in the chain (a linear scan up to kInline records, then
  // a bitmap over `permits` built on first use).
  bool contains(uint32_t l, uint32_t permits);

 private:
  static constexpr uint32_t kInline = 8;
  uint32_t n_ = 0;
  uint32_t inline_[kInline] = {};
  std::vector<uint32_t> more_;
  std::vector<bool> seen_;  // over `permits`, once n_ > kInline
};

// Why a walk stopped.
enum class ChainEnd {
  kEnd,         // a link of kNone: the chain is whole
  kOutOfRange,  // a link past the table
  kRevisit,     // a link back to a record already in the chain (a loop)
  kNotMember,   // a record that does not belong (another state or owner)
  kTooLong,     // more records than the caller allows
};

// Which records belong to a chain.
struct ChainOf {
  enum Kind { kReservation, kWeighted } kind;
  uint32_t slot;  // kReservation: RESERVED for this slot
  Owner owner;    // kWeighted: HELD by this owner, marked kMember
  // Records another chain already took (a reader that shows each record
  // once: inspect.cc, check.cc), which are not members; or nullptr.
  const std::vector<char> *taken;
};
inline ChainOf reservation_of(uint32_t w,
                              const std::vector<char> *taken = nullptr) {
  return ChainOf{ChainOf::kReservation, w, Owner{}, taken};
}
inline ChainOf weighted_of(const Owner &o,
                           const std::vector<char> *taken = nullptr) {
  return ChainOf{ChainOf::kWeighted, kNone, o, taken};
}

// Walks from `first` (which must itself be a member, unless kNone) through
// at most `max` records, appending each to `out`. A weighted lease's chain
// starts at the record its token names (HELD, not kMember): the walk
// starts at that record's link; `out` holds the first record already.
ChainEnd walk_chain(const shmsem_t *s, uint32_t first, const ChainOf &of,
                    uint32_t max, Chain *out);

// The records reserved for slot `w`, from ws.lease (read once), at most
// `permits`, none of `taken` (n entries, or nullptr).
ChainEnd walk_reservation(const shmsem_t *s, uint32_t w, Chain *out,
                          const std::vector<char> *taken = nullptr);

// A HELD lease `l` (not kMember) and the others of its weighted lease: `l`
// first, then the HELD kMember records of the same owner linked from it,
// none of `taken`.
ChainEnd walk_lease(const shmsem_t *s, uint32_t l, Chain *out,
                    const std::vector<char> *taken = nullptr);

}  // namespace shmsem::detail

#endif  // SHMSEM_SRC_CHAIN_H
