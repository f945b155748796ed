// The rate limit of a Redis pool on the client's side (rate.h).
#include "rate.h"

#include <errno.h>
#include <time.h>

#include "clock.h"
#include "conn.h"
#include "layout.h"

namespace shmsem::detail {
namespace {

constexpr uint64_t kMs = 1000000;
// How late a BLPOP's timeout may fire (the server's 1000/hz ms at hz 10,
// and some): a head wakes from BLPOP at least this long before its token
// and sleeps the rest here.
constexpr uint64_t kBlockLateMs = 110;

// 1 to 20 decimal digits, at most UINT64_MAX.
bool parse_u64(const std::string &s, uint64_t *out) {
  if (s.empty() || s.size() > 20) return false;
  unsigned __int128 x = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    x = x * 10 + unsigned(c - '0');
  }
  if (x > UINT64_MAX) return false;
  *out = uint64_t(x);
  return true;
}

}  // namespace

// The same rules as a local semaphore's (api/create.cc, build_of).
int rate_config(const shmsem_config *cfg, RateConfig *out) {
  *out = RateConfig{};
  if (!cfg->rate) return cfg->burst || cfg->rate_period_ns ? -EINVAL : 0;
  out->rate = cfg->rate;
  out->burst = cfg->burst ? cfg->burst : 1;
  out->period_ns = cfg->rate_period_ns ? cfg->rate_period_ns : kNsPerSec;
  out->interval_ns = out->period_ns / cfg->rate;
  if (out->burst > SHMSEM_MAX_BURST || out->interval_ns < 1 ||
      out->interval_ns > kMaxRateIntervalNs ||
      (unsigned __int128)out->burst * out->interval_ns > kMaxRateWindowNs)
    return -EINVAL;
  return 0;
}

// As the local stat (observe/stat.cc): tokens now, and when the next one
// is there (now if there is one). In 128 bits: tat is ns since the epoch.
int rate_stat(const RateWords &w, uint64_t mono, struct shmsem_stat *st) {
  uint64_t period;
  if (!parse_u64(w.period, &period)) return kBadReply;
  if (w.rate > UINT32_MAX || w.burst > SHMSEM_MAX_BURST ||
      w.interval_ns > int64_t(kMaxRateIntervalNs) || w.tat_ns > 999 ||
      (w.rate == 0) != (w.interval_ns == 0))
    return kBadReply;
  st->rate = uint32_t(w.rate);
  st->burst = uint32_t(w.burst);
  st->rate_period_ns = period;
  if (!w.rate) return 0;
  using u128 = unsigned __int128;
  const u128 t = u128(w.interval_ns);
  const u128 b = w.burst > 0 ? u128(w.burst) : 1;
  const u128 window = (b - 1) * t, now = u128(w.now_us) * 1000;
  const u128 tat = u128(w.tat_us) * 1000 + u128(w.tat_ns);
  u128 ahead = tat > now ? tat - now : 0;
  if (ahead > window + t) ahead = window + t;  // as rate_read clamps
  st->rate_tokens = uint32_t((window + t - ahead) / t);
  const u128 wait = ahead > window ? ahead - window : 0;
  st->rate_next_ns = st->rate_tokens ? mono : mono + uint64_t(wait);
  return 0;
}

bool rate_message(const std::string &m, uint64_t *token_at) {
  uint64_t us;
  if (m.compare(0, 2, "R ") != 0 || !parse_numbers(m.substr(2), &us, 1))
    return false;
  // At most a burst's refill (2^62 ns) away: saturate past that.
  constexpr uint64_t kMaxUs = kMaxRateWindowNs / 1000;
  const uint64_t now = mono_ns();
  *token_at = now + (us < kMaxUs ? us : kMaxUs) * 1000;
  return true;
}

bool rate_step(uint64_t token_at, uint64_t *block_ms) {
  uint64_t now = mono_ns();
  if (now >= token_at) return true;
  const uint64_t left_ms = (token_at - now) / kMs;
  if (left_ms > kBlockLateMs) {
    if (*block_ms > left_ms - kBlockLateMs) *block_ms = left_ms - kBlockLateMs;
    return false;
  }
  // Near: a timer of this process, exact to the kernel's slack.
  const uint64_t bound = now + *block_ms * kMs;
  const uint64_t until = token_at < bound ? token_at : bound;
  const timespec ts = ns_to_ts(deadline_wake_at(until));
  clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr);
  *block_ms = 0;
  return mono_ns() >= token_at;
}

}  // namespace shmsem::detail
