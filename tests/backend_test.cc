// The backend seam (libshmsem/src/api/backend.h, docs/BACKENDS.md): a name
// chooses its backend, and a name with a URL scheme that no backend of this
// build serves ("etcd://...") is -EPROTONOSUPPORT from every call that
// takes a name; a second backend plugs in by its scheme, and every call on
// its handles and waiters reaches its table and nothing of the
// shared-memory backend; "/pool" names and their handles stay the
// shared-memory backend's.
#include <errno.h>
#include <gtest/gtest.h>
#include <shmsem/inspect.h>
#include <shmsem/shmsem.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <iterator>
#include <string>
#include <vector>

#include "backend.h"
#include "support/segment.h"

namespace shmsem::test {
namespace {

namespace d = shmsem::detail;

// --- a fake second backend, for the scheme "fake" ----------------------------

enum Entry {
  kCreate,
  kOpen,
  kUnlink,
  kDetach,
  kAcquire,
  kTryAcquire,
  kRelease,
  kSetPermits,
  kShutdown,
  kRecover,
  kCheck,
  kStat,
  kInspect,
  kDeclareHold,
  kWaiterStart,
  kWaiterFutex,
  kWaiterWakeBy,
  kWaiterPoll,
  kWaiterCancel,
};

// What each call of the fake's table saw: the entry, the handle or waiter
// (or name), the permits asked for, and whether a deadline came.
struct Call {
  Entry entry;
  const void *object;
  uint32_t n;
  bool deadline;
};
std::vector<Call> g_calls;

// Every entry answers this, which no shmsem call returns: a result that
// reaches the caller came from the fake.
int answer(Entry e) { return -1000 - int(e); }

int record(Entry e, const void *object, uint32_t n = 0, bool deadline = false) {
  g_calls.push_back(Call{e, object, n, deadline});
  return answer(e);
}

// A fake handle is its backend pointer alone, the last word of a page
// followed by one that cannot be read: if anything of the shared-memory
// backend took it for one of its handles (and read a field past the
// first), the test would die of SIGSEGV.
struct FakeHandle {
  const d::Backend *backend;
};

class GuardedHandle {
 public:
  explicit GuardedHandle(const d::Backend *b) {
    const size_t page = size_t(sysconf(_SC_PAGESIZE));
    void *m = mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return;
    base_ = static_cast<char *>(m);
    size_ = 2 * page;
    if (mprotect(base_ + page, page, PROT_NONE) != 0) return;
    auto *h = reinterpret_cast<FakeHandle *>(base_ + page - sizeof(FakeHandle));
    h->backend = b;
    handle_ = reinterpret_cast<shmsem_t *>(h);
  }
  ~GuardedHandle() {
    if (base_) munmap(base_, size_);
  }
  GuardedHandle(const GuardedHandle &) = delete;
  GuardedHandle &operator=(const GuardedHandle &) = delete;
  shmsem_t *get() const { return handle_; }

 private:
  char *base_ = nullptr;
  size_t size_ = 0;
  shmsem_t *handle_ = nullptr;
};

GuardedHandle *g_handle;  // what the fake's create and open return

// A waiter the fake queued: this in its first word (not a pointer any
// process could have: the high bits are not canonical).
constexpr uint64_t kFakeWaiter = 0xfa6ef00dfa6ef00dull;

int fake_create(const char *name, const shmsem_config *, int, shmsem_t **out) {
  *out = g_handle->get();
  record(kCreate, name);
  return 0;
}
int fake_open(const char *name, int, shmsem_t **out) {
  *out = g_handle->get();
  record(kOpen, name);
  return 0;
}
int fake_unlink(const char *name) { return record(kUnlink, name); }
void fake_detach(shmsem_t *s) { record(kDetach, s); }
int fake_acquire(shmsem_t *s, uint32_t n, const timespec *deadline,
                 shmsem_cancel_t *, unsigned, shmsem_lease_t *) {
  return record(kAcquire, s, n, deadline != nullptr);
}
int fake_try_acquire(shmsem_t *s, uint32_t n, shmsem_lease_t *) {
  return record(kTryAcquire, s, n);
}
int fake_release(shmsem_t *s, shmsem_lease_t *) { return record(kRelease, s); }
int fake_set_permits(shmsem_t *s, uint32_t permits) {
  return record(kSetPermits, s, permits);
}
int fake_shutdown(shmsem_t *s) { return record(kShutdown, s); }
int fake_recover(shmsem_t *s) { return record(kRecover, s); }
int fake_check(shmsem_t *s) { return record(kCheck, s); }
int fake_stat(shmsem_t *s, struct shmsem_stat *) { return record(kStat, s); }
int fake_inspect(shmsem_t *s, struct shmsem_inspection *,
                 struct shmsem_holder *, uint32_t, struct shmsem_waiter_info *,
                 uint32_t) {
  return record(kInspect, s);
}
int fake_declare_hold(shmsem_t *s, const shmsem_lease_t *, uint64_t) {
  return record(kDeclareHold, s);
}
int fake_waiter_start(shmsem_t *s, shmsem_waiter_t *w, uint32_t n,
                      const timespec *deadline, shmsem_lease_t *) {
  w->__opaque[0] = kFakeWaiter;
  record(kWaiterStart, s, n, deadline != nullptr);
  return SHMSEM_QUEUED;
}
bool fake_owns_waiter(const shmsem_waiter_t *w) {
  return w->__opaque[0] == kFakeWaiter;
}
int fake_waiter_futex(const shmsem_waiter_t *w, uint32_t **, uint32_t *) {
  return record(kWaiterFutex, w);
}
int fake_waiter_wake_by(const shmsem_waiter_t *w, timespec *) {
  return record(kWaiterWakeBy, w);
}
int fake_waiter_poll(shmsem_waiter_t *w, shmsem_lease_t *) {
  return record(kWaiterPoll, w);
}
int fake_waiter_cancel(shmsem_waiter_t *w, shmsem_lease_t *) {
  return record(kWaiterCancel, w);
}

const char *const kFakeSchemes[] = {"fake", nullptr};

d::Backend fake_backend() {
  d::Backend b{};
  b.name = "fake";
  b.schemes = kFakeSchemes;
  b.create = fake_create;
  b.open = fake_open;
  b.unlink = fake_unlink;
  b.detach = fake_detach;
  b.acquire = fake_acquire;
  b.try_acquire = fake_try_acquire;
  b.release = fake_release;
  b.set_permits = fake_set_permits;
  b.shutdown = fake_shutdown;
  b.recover = fake_recover;
  b.check = fake_check;
  b.stat = fake_stat;
  b.inspect = fake_inspect;
  b.declare_hold = fake_declare_hold;
  b.waiter_start = fake_waiter_start;
  b.owns_waiter = fake_owns_waiter;
  b.waiter_futex = fake_waiter_futex;
  b.waiter_wake_by = fake_waiter_wake_by;
  b.waiter_poll = fake_waiter_poll;
  b.waiter_cancel = fake_waiter_cancel;
  return b;
}
const d::Backend kFake = fake_backend();

// Installs the fake for one test (the tests' build asks it after the
// built-in backends) and takes it away again.
class FakeBackend : public ::testing::Test {
 protected:
  void SetUp() override {
    g_calls.clear();
    g_handle = &handle_;
    ASSERT_NE(handle_.get(), nullptr);
    d::g_test_backend.store(&kFake, std::memory_order_release);
  }
  void TearDown() override {
    d::g_test_backend.store(nullptr, std::memory_order_release);
    g_handle = nullptr;
  }
  // The one call the fake saw since the last look.
  Call only_call() {
    EXPECT_EQ(g_calls.size(), 1u);
    Call c = g_calls.empty() ? Call{kCreate, nullptr, 0, false} : g_calls[0];
    g_calls.clear();
    return c;
  }
  GuardedHandle handle_{&kFake};
};

shmsem_config config(uint32_t permits) {
  shmsem_config c{};
  c.permits = permits;
  return c;
}

// --- names -------------------------------------------------------------------

TEST(Backend, NamesWithASchemeNoBackendServesAreNotSupported) {
  const shmsem_config cfg = config(1);
  for (const char *name :
       {"rediss://h:6380/p", "etcd://h/p", "consul://h/p", "ETCD://h/p"}) {
    static int before;  // *out is not NULL before the call
    shmsem_t *s = reinterpret_cast<shmsem_t *>(&before);
    EXPECT_EQ(shmsem_create(name, &cfg, 0, &s), -EPROTONOSUPPORT) << name;
    EXPECT_EQ(s, nullptr) << name;
    s = reinterpret_cast<shmsem_t *>(&before);
    EXPECT_EQ(shmsem_open(name, 0, &s), -EPROTONOSUPPORT) << name;
    EXPECT_EQ(s, nullptr) << name;
    EXPECT_EQ(shmsem_unlink(name), -EPROTONOSUPPORT) << name;
    EXPECT_EQ(d::backend_for_name(name), nullptr) << name;
  }
  // Nowhere to put the handle is still -EINVAL, as for every name.
  EXPECT_EQ(shmsem_create("redis://h/p", &cfg, 0, nullptr), -EINVAL);
  EXPECT_EQ(shmsem_open("redis://h/p", 0, nullptr), -EINVAL);
}

// redis:// and redis+unix:// names are the Redis backend's (in any case)
// when the library has it (SHMSEM_REDIS), else served by none.
TEST(Backend, RedisNamesChooseTheRedisBackend) {
  for (const char *name :
       {"redis://localhost:6379/pool", "REDIS://h/p", "redis:///p",
        "redis+unix:///run/redis.sock?pool=p"}) {
#ifdef SHMSEM_HAVE_REDIS
    EXPECT_EQ(d::backend_for_name(name), &d::kRedisBackend) << name;
#else
    EXPECT_EQ(d::backend_for_name(name), nullptr) << name;
#endif
  }
}

TEST(Backend, NamesWithoutASchemeAreTheSharedMemoryBackends) {
  // Not a scheme followed by "://": the shm backend's, which refuses them
  // as bad names, as it always did.
  const shmsem_config cfg = config(1);
  shmsem_t *s = nullptr;
  for (const char *name : {"redis:/p", "redis//p", "redis:p", "1redis://p",
                           "://p", "re dis://p", "_x://p", "", "pool"}) {
    EXPECT_EQ(d::backend_for_name(name), &d::kShmBackend) << name;
    EXPECT_EQ(shmsem_create(name, &cfg, 0, &s), -EINVAL) << name;
    EXPECT_EQ(shmsem_open(name, 0, &s), -EINVAL) << name;
    EXPECT_EQ(shmsem_unlink(name), -EINVAL) << name;
  }
  EXPECT_EQ(d::backend_for_name(nullptr), &d::kShmBackend);
  EXPECT_EQ(shmsem_create(nullptr, &cfg, 0, &s), -EINVAL);
  EXPECT_EQ(d::backend_for_name("/pool"), &d::kShmBackend);
}

TEST(Backend, HandlesOfCreateAndOpenAreSharedMemoryHandles) {
  Segment seg(2);
  EXPECT_EQ(d::backend_of(seg.get()), &d::kShmBackend);
  EXPECT_TRUE(d::is_shm(seg.get()));
  for (int flags : {0, int(SHMSEM_RDONLY), int(SHMSEM_SNAPSHOT)}) {
    shmsem_t *s = nullptr;
    ASSERT_EQ(shmsem_open(seg.name().c_str(), flags, &s), 0) << flags;
    EXPECT_EQ(d::backend_of(s), &d::kShmBackend) << flags;
    EXPECT_TRUE(d::is_shm(s)) << flags;
    shmsem_detach(s);
  }
  EXPECT_EQ(d::backend_of(nullptr), &d::kShmBackend);
  EXPECT_EQ(std::string(d::kShmBackend.name), "shm");
}

TEST(Backend, TheMissingBackendHasItsOwnText) {
  EXPECT_STREQ(shmsem_strerror(-EPROTONOSUPPORT),
               "no backend for this kind of name");
}

// --- a second backend --------------------------------------------------------

TEST_F(FakeBackend, IsChosenByItsSchemeInAnyCase) {
  const shmsem_config cfg = config(1);
  shmsem_t *s = nullptr;
  ASSERT_EQ(shmsem_create("fake://host:1/pool", &cfg, 0, &s), 0);
  EXPECT_EQ(s, handle_.get());
  EXPECT_EQ(only_call().entry, kCreate);
  s = nullptr;
  ASSERT_EQ(shmsem_open("FaKe://host/pool", 0, &s), 0);
  EXPECT_EQ(s, handle_.get());
  EXPECT_EQ(only_call().entry, kOpen);
  EXPECT_EQ(shmsem_unlink("fake://host/pool"), answer(kUnlink));
  Call c = only_call();
  EXPECT_EQ(c.entry, kUnlink);
  EXPECT_STREQ(static_cast<const char *>(c.object), "fake://host/pool");
  // Other schemes are still not served.
  EXPECT_EQ(shmsem_unlink("etcd://h/p"), -EPROTONOSUPPORT);
  EXPECT_TRUE(g_calls.empty());
}

TEST_F(FakeBackend, LeavesSharedMemoryNamesAndHandlesAlone) {
  Segment seg(1);
  shmsem_lease_t l;
  ASSERT_EQ(shmsem_acquire(seg.get(), &l), 0);
  EXPECT_EQ(shmsem_try_acquire(seg.get(), &l), -EAGAIN);
  shmsem_t *s = nullptr;
  ASSERT_EQ(shmsem_open(seg.name().c_str(), 0, &s), 0);
  EXPECT_EQ(shmsem_release(s, &l), 0);
  shmsem_detach(s);
  EXPECT_TRUE(g_calls.empty());
  EXPECT_EQ(invariant_violation(seg.get()), "");
}

TEST_F(FakeBackend, EveryAcquireGoesThroughItsTable) {
  shmsem_t *s = handle_.get();
  shmsem_lease_t l;
  memset(&l, 0, sizeof l);
  const timespec at{1, 0};
  shmsem_cancel_t c;
  shmsem_cancel_init(&c);
  struct Expect {
    int got;
    Entry entry;
    uint32_t n;
    bool deadline;
  };
  const Expect cases[] = {
      {shmsem_acquire(s, &l), kAcquire, 1, false},
      {shmsem_acquire_n(s, 1, &l), kAcquire, 1, false},
      {shmsem_acquire_n(s, 3, &l), kAcquire, 3, false},
      {shmsem_try_acquire(s, &l), kTryAcquire, 1, false},
      {shmsem_try_acquire_n(s, 2, &l), kTryAcquire, 2, false},
      {shmsem_acquire_until(s, &at, &l), kAcquire, 1, true},
      {shmsem_acquire_until_n(s, 2, &at, &l), kAcquire, 2, true},
      {shmsem_acquire_for(s, 1000, &l), kAcquire, 1, true},
      {shmsem_acquire_for_n(s, 4, UINT64_MAX, &l), kAcquire, 4, false},
      {shmsem_acquire_ex(s, nullptr, &c, 0, &l), kAcquire, 1, false},
      {shmsem_acquire_ex_n(s, 5, &at, &c, 0, &l), kAcquire, 5, true},
  };
  ASSERT_EQ(g_calls.size(), std::size(cases));
  for (size_t i = 0; i < std::size(cases); i++) {
    SCOPED_TRACE(i);
    EXPECT_EQ(cases[i].got, answer(cases[i].entry));
    EXPECT_EQ(g_calls[i].entry, cases[i].entry);
    EXPECT_EQ(g_calls[i].object, s);
    EXPECT_EQ(g_calls[i].n, cases[i].n);
    EXPECT_EQ(g_calls[i].deadline, cases[i].deadline);
  }
  g_calls.clear();
  // The argument checks every backend shares stay at the boundary.
  EXPECT_EQ(shmsem_acquire_until(s, nullptr, &l), -EINVAL);
  EXPECT_EQ(shmsem_try_acquire(s, nullptr), -EINVAL);
  EXPECT_TRUE(g_calls.empty());
}

TEST_F(FakeBackend, EveryOtherCallOnAHandleGoesThroughItsTable) {
  shmsem_t *s = handle_.get();
  shmsem_lease_t l;
  memset(&l, 0, sizeof l);
  struct shmsem_stat st;
  struct shmsem_inspection in;
  EXPECT_EQ(shmsem_release(s, &l), answer(kRelease));
  EXPECT_EQ(only_call().entry, kRelease);
  EXPECT_EQ(shmsem_set_permits(s, 7), answer(kSetPermits));
  EXPECT_EQ(only_call().n, 7u);
  EXPECT_EQ(shmsem_declare_hold(s, &l, 1), answer(kDeclareHold));
  EXPECT_EQ(only_call().entry, kDeclareHold);
  EXPECT_EQ(shmsem_shutdown(s), answer(kShutdown));
  EXPECT_EQ(only_call().entry, kShutdown);
  EXPECT_EQ(shmsem_recover(s), answer(kRecover));
  EXPECT_EQ(only_call().entry, kRecover);
  EXPECT_EQ(shmsem_check(s), answer(kCheck));
  EXPECT_EQ(only_call().entry, kCheck);
  EXPECT_EQ(shmsem_stat(s, &st), answer(kStat));
  EXPECT_EQ(only_call().entry, kStat);
  EXPECT_EQ(shmsem_inspect(s, &in, nullptr, 0, nullptr, 0), answer(kInspect));
  EXPECT_EQ(only_call().entry, kInspect);
  shmsem_detach(s);
  Call c = only_call();
  EXPECT_EQ(c.entry, kDetach);
  EXPECT_EQ(c.object, s);
}

TEST_F(FakeBackend, DrivesTheWaitersItQueued) {
  shmsem_t *s = handle_.get();
  shmsem_waiter_t w;
  memset(&w, 0, sizeof w);
  shmsem_lease_t l;
  const timespec at{1, 0};
  ASSERT_EQ(shmsem_waiter_start_n(s, &w, 3, &at, &l), SHMSEM_QUEUED);
  Call c = only_call();
  EXPECT_EQ(c.entry, kWaiterStart);
  EXPECT_EQ(c.n, 3u);
  EXPECT_TRUE(c.deadline);
  uint32_t *word;
  uint32_t value;
  timespec by;
  EXPECT_EQ(shmsem_waiter_futex(&w, &word, &value), answer(kWaiterFutex));
  EXPECT_EQ(only_call().object, &w);
  EXPECT_EQ(shmsem_waiter_wake_by(&w, &by), answer(kWaiterWakeBy));
  EXPECT_EQ(only_call().object, &w);
  EXPECT_EQ(shmsem_waiter_poll(&w, &l), answer(kWaiterPoll));
  EXPECT_EQ(only_call().object, &w);
  EXPECT_EQ(shmsem_waiter_cancel(&w, &l), answer(kWaiterCancel));
  EXPECT_EQ(only_call().object, &w);
  // A waiter the fake does not claim is the shared-memory backend's, which
  // did not queue it.
  shmsem_waiter_t unused;
  memset(&unused, 0, sizeof unused);
  EXPECT_EQ(shmsem_waiter_poll(&unused, &l), -EINVAL);
  EXPECT_EQ(shmsem_waiter_cancel(&unused, &l), -EINVAL);
  EXPECT_EQ(shmsem_waiter_futex(&unused, &word, &value), -EINVAL);
  EXPECT_EQ(shmsem_waiter_wake_by(&unused, &by), -EINVAL);
  EXPECT_EQ(shmsem_waiter_poll(nullptr, &l), -EINVAL);
  EXPECT_TRUE(g_calls.empty());
}

TEST_F(FakeBackend, LeavesSharedMemoryWaitersAlone) {
  Segment seg(1);
  shmsem_lease_t held, l;
  ASSERT_EQ(shmsem_acquire(seg.get(), &held), 0);
  shmsem_waiter_t w;
  memset(&w, 0, sizeof w);
  ASSERT_EQ(shmsem_waiter_start(seg.get(), &w, nullptr, &l), SHMSEM_QUEUED);
  EXPECT_EQ(shmsem_waiter_poll(&w, &l), -EINPROGRESS);
  EXPECT_EQ(shmsem_waiter_cancel(&w, &l), -ECANCELED);
  EXPECT_EQ(shmsem_release(seg.get(), &held), 0);
  EXPECT_TRUE(g_calls.empty());
  EXPECT_EQ(invariant_violation(seg.get()), "");
}

}  // namespace
}  // namespace shmsem::test
