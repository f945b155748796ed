// The one chain walker (chain.h): every lease chain is read here, once.
#include "chain.h"

#include <algorithm>

#include "inuse.h"
#include "tables.h"

namespace shmsem::detail {

void Chain::insert(uint32_t at, const Chain &c) {
  if (c.empty()) return;
  std::vector<uint32_t> all;
  all.reserve(n_ + c.n_);
  for (uint32_t i = 0; i < n_; i++) all.push_back((*this)[i]);
  std::vector<uint32_t> ins;
  for (uint32_t i = 0; i < c.n_; i++) ins.push_back(c[i]);
  all.insert(all.begin() + std::min(at, n_), ins.begin(), ins.end());
  n_ = 0;
  more_.clear();
  for (uint32_t l : all) push_back(l);
  // seen_ is stale now: rebuilt on the next contains().
  seen_.clear();
}

void Chain::truncate(uint32_t k) {
  if (k >= n_) return;
  n_ = k;
  more_.resize(k > kInline ? k - kInline : 0);
  seen_.clear();
}

bool Chain::contains(uint32_t l, uint32_t permits) {
  if (n_ <= kInline) {
    for (uint32_t i = 0; i < n_; i++)
      if (inline_[i] == l) return true;
    return false;
  }
  if (seen_.size() != permits) {
    seen_.assign(permits, false);
    for (uint32_t i = 0; i < n_; i++) seen_[(*this)[i]] = true;
  }
  return seen_[l];
}

namespace {

// Whether record `x` (checked) belongs to the chain, from one read of
// each field.
bool member(const shmsem_t *s, uint32_t x, const ChainOf &of) {
  if (of.taken && (*of.taken)[x]) return false;
  const LeaseRecord &r = s->leases[x];
  const uint32_t state = lease_state(r);
  const uint32_t slot = __atomic_load_n(&r.slot, __ATOMIC_RELAXED);
  if (of.kind == ChainOf::kReservation)
    return state == kLeaseReserved && slot == of.slot;
  if (state != kLeaseHeld || slot != kMember) return false;
  const Owner o = read_owner(r.owner);
  return memcmp(&o, &of.owner, sizeof o) == 0;
}

}  // namespace

ChainEnd walk_chain(const shmsem_t *s, uint32_t first, const ChainOf &of,
                    uint32_t max, Chain *out) {
  for (uint32_t x = first; x != kNone;) {
    if (!lease_ok(s, x)) return ChainEnd::kOutOfRange;
    if (out->contains(x, s->permits)) return ChainEnd::kRevisit;
    if (!member(s, x, of)) return ChainEnd::kNotMember;
    if (out->size() >= max) return ChainEnd::kTooLong;
    out->push_back(x);
    x = __atomic_load_n(&s->leases[x].link, __ATOMIC_RELAXED);  // once
  }
  return ChainEnd::kEnd;
}

ChainEnd walk_reservation(const shmsem_t *s, uint32_t w, Chain *out,
                          const std::vector<char> *taken) {
  const uint32_t first = __atomic_load_n(&s->slots[w].lease, __ATOMIC_RELAXED);
  return walk_chain(s, first, reservation_of(w, taken), s->permits, out);
}

ChainEnd walk_lease(const shmsem_t *s, uint32_t l, Chain *out,
                    const std::vector<char> *taken) {
  const LeaseRecord &r = s->leases[l];
  const Owner o = read_owner(r.owner);
  out->push_back(l);
  const uint32_t next = __atomic_load_n(&r.link, __ATOMIC_RELAXED);
  return walk_chain(s, next, weighted_of(o, taken), s->permits, out);
}

}  // namespace shmsem::detail
