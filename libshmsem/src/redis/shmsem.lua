#!lua name=shmsem
-- shmsem's Redis backend: the server side, one Redis Functions library
-- (Redis 7.0: FUNCTION LOAD, FCALL). Every transition of a pool is one
-- function call, so it runs atomically on the server; every time is the
-- server's own (TIME inside the function: Redis 7 replicates a function's
-- effects, not its script, so TIME is allowed), never a client's clock.
-- docs/REDIS.md states the state machine and the argument for FIFO,
-- exactly-once release and fencing; the client is libshmsem/src/redis/.
--
-- The library is versioned (shmsem_version): a client loads it when the
-- server has none, replaces an older one, and refuses a newer one
-- (-EPROTO). Bump LIBRARY_VERSION with every change of a function's
-- contract; the client's kLibraryVersion (redis/conn.h) is the same
-- number.
--
-- Keys: KEYS[1] is the pool's base key "shmsem:{POOL}"; every other key of
-- the pool is that base and a suffix, so all of them share the hash tag
-- {POOL} and live on one Redis Cluster shard:
--   base          hash: config, counters, closed, seq, ticket, held,
--                 the rate limit (rate burst period_ns interval_ns tat_us
--                 tat_ns rate_told)
--   base:q        zset: queued tickets (score = ticket): FIFO order
--   base:wn       hash: ticket -> permits asked
--   base:wi       hash: ticket -> "since_ms pid"
--   base:wexp     zset: ticket -> keep-alive expiry (ms)
--   base:mb:ID:T  list: waiter T's mailbox ("G idx gen seq n", "S", "X",
--                 "R us": the head's token is due in us microseconds); ID
--                 the pool's identity: tickets start at 1 again in a pool
--                 created anew under the name, and a waiter of the old
--                 pool still blocked on its mailbox must not pop a grant
--                 of the new one
--   base:free     zset: free resource indices (score = index)
--   base:gen      hash: index -> generation (only grows; never deleted)
--   base:l        hash: first index -> "gen seq n since_ms pid declared i..."
--   base:lexp     zset: first index -> lease expiry (ms)
--   base:lost     zset: "index:gen" of leases that expired (score = when)
-- Replies are arrays whose first element is a status word; the client
-- (redis/conn.h, Reply) checks every element before use.
local LIBRARY_VERSION = 3
local LOST_KEEP = 4096   -- expired leases remembered for -EKEYEXPIRED
local REAP_BATCH = 256   -- expired leases and waiters reaped per call

-- The server's clock in microseconds (16 digits: exact in Lua's doubles,
-- which are exact to 2^53) and in milliseconds (13 digits, which Lua's
-- %.14g prints whole; microseconds would print as 1.7e+15, so replies
-- carry them through string.format).
local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

local function now_ms() return math.floor(now_us() / 1000) end

-- A whole number as its digits (tostring would print 1.7e+15).
local function digits(x) return string.format('%d', x) end

-- The pool's keys; `id` (the pool's identity) names its mailboxes.
local function keys_of(base, id)
  return {
    base = base, q = base .. ':q', wn = base .. ':wn', wi = base .. ':wi',
    wexp = base .. ':wexp', free = base .. ':free', gen = base .. ':gen',
    l = base .. ':l', lexp = base .. ':lexp', lost = base .. ':lost',
    mb = base .. ':mb:' .. (id or '') .. ':'
  }
end

local function num(k, field)
  return tonumber(redis.call('HGET', k.base, field) or '0') or 0
end

local function incr(k, field, by)
  return redis.call('HINCRBY', k.base, field, by)
end

-- The numbers of a lease record: gen, seq, n, since, pid, declared, then
-- the n indices it holds.
local function parse_lease(rec)
  local v = {}
  for x in string.gmatch(rec, '%d+') do v[#v + 1] = tonumber(x) end
  return v
end

local function avail(k)
  local a = num(k, 'permits') - num(k, 'held')
  if a < 0 then return 0 end
  return a
end

-- A lease ends: its indices go back to the free set. `expired`: it was
-- not kept alive; remember it so its holder hears -EKEYEXPIRED.
local function drop_lease(k, idx, expired, now)
  local rec = redis.call('HGET', k.l, idx)
  redis.call('HDEL', k.l, idx)
  redis.call('ZREM', k.lexp, idx)
  if not rec then return 0 end
  local v = parse_lease(rec)
  local n = v[3]
  for i = 7, #v do redis.call('ZADD', k.free, v[i], v[i]) end
  incr(k, 'held', -n)
  if expired then
    redis.call('ZADD', k.lost, now, idx .. ':' .. v[1])
    redis.call('ZREMRANGEBYRANK', k.lost, 0, -(LOST_KEEP + 1))
    incr(k, 'reclaimed_holders', n)
  else
    incr(k, 'hold_sum_ms', now - v[4])
    incr(k, 'released', 1)
  end
  return n
end

local function remove_waiter(k, t)
  redis.call('ZREM', k.q, t)
  redis.call('HDEL', k.wn, t)
  redis.call('HDEL', k.wi, t)
  redis.call('ZREM', k.wexp, t)
end

-- Tell waiter t's blocking pop how its wait ended; the mailbox outlives
-- the message only as long as a lease would (nobody may ever pop it).
local function post(k, t, msg)
  local mb = k.mb .. t
  redis.call('RPUSH', mb, msg)
  redis.call('PEXPIRE', mb, num(k, 'ttl_ms'))
end

-- The rate limit: GCRA as the local backend's (core/rate.h, DESIGN
-- section 13), on the server's clock. One acquisition per interval T ns,
-- up to `burst` at once: an acquisition at `now` conforms when
-- tat - tau <= now (tau = (burst - 1) * T), and moves tat to
-- max(tat, now) + T; one token per acquisition whatever its weight,
-- taken only in grant(), so in queue order. A time is a pair: whole
-- microseconds of TIME and a remainder in ns (0..999), so an interval
-- that is no whole number of microseconds does not drift, and every
-- number stays exact in Lua's doubles (T <= a day, tau + T <= 2^62 ns).
local MAX_INTERVAL_NS = 86400000000000
local MAX_BURST = 1048576

local function tadd(aus, ans, bus, bns)
  local us, ns = aus + bus, ans + bns
  if ns >= 1000 then return us + 1, ns - 1000 end
  return us, ns
end

local function tsub(aus, ans, bus, bns)
  local us, ns = aus - bus, ans - bns
  if ns < 0 then return us - 1, ns + 1000 end
  return us, ns
end

local function tless(aus, ans, bus, bns)
  return aus < bus or (aus == bus and ans < bns)
end

local RATE_WORDS = {'interval_ns', 'burst', 'tat_us', 'tat_ns'}

-- The bucket from v (RATE_WORDS' values) at k.us, each word clamped to
-- its range, and `max_us/max_ns` = now + tau + T, past which no grant
-- ever sets tat. nil: no rate limit.
local function rate_words(k, v)
  local t = math.floor(tonumber(v[1] or '0') or 0)
  if t < 1 then return nil end
  t = math.min(t, MAX_INTERVAL_NS)
  local b = math.floor(tonumber(v[2] or '1') or 1)
  b = math.max(1, math.min(b, MAX_BURST)) - 1
  local r = {t_us = math.floor(t / 1000), t_ns = t % 1000}
  r.w_us = b * r.t_us + math.floor(b * r.t_ns / 1000)
  r.w_ns = (b * r.t_ns) % 1000
  r.tat_us = math.floor(tonumber(v[3] or '0') or 0)
  r.tat_ns = math.floor(tonumber(v[4] or '0') or 0)
  if r.tat_ns < 0 or r.tat_ns > 999 then r.tat_ns = 0 end
  r.max_us, r.max_ns = tadd(k.us, 0, r.w_us, r.w_ns)
  r.max_us, r.max_ns = tadd(r.max_us, r.max_ns, r.t_us, r.t_ns)
  return r
end

-- The bucket now, as rate_clamp does locally: a tat beyond max (a server
-- restarted from its AOF with its clock behind) is stored back at max,
-- so it stops the pool for at most a burst's refill from the first time
-- it is met, not for ever. A pool without a rate pays one HMGET a call.
local function rate_read(k)
  if k.no_rate then return nil end
  local r = rate_words(k, redis.call('HMGET', k.base, unpack(RATE_WORDS)))
  if not r then
    k.no_rate = true
    return nil
  end
  if tless(r.max_us, r.max_ns, r.tat_us, r.tat_ns) then
    r.tat_us, r.tat_ns = r.max_us, r.max_ns
    redis.call('HSET', k.base, 'tat_us', digits(r.tat_us), 'tat_ns', r.tat_ns)
  end
  return r
end

-- Microseconds until an acquisition conforms (rounded up): 0 now.
local function rate_wait(k)
  local r = rate_read(k)
  if not r then return 0 end
  local sus, sns = tsub(r.tat_us, r.tat_ns, r.w_us, r.w_ns)
  if sns > 0 then sus = sus + 1 end
  if sus <= k.us then return 0 end
  return sus - k.us
end

-- Take a token (after rate_wait said 0).
local function rate_take(k)
  local r = rate_read(k)
  if not r then return end
  local us, ns = r.tat_us, r.tat_ns
  if tless(us, ns, k.us, 0) then us, ns = k.us, 0 end
  us, ns = tadd(us, ns, r.t_us, r.t_ns)
  redis.call('HSET', k.base, 'tat_us', digits(us), 'tat_ns', ns)
end

-- The head t has its permits but no token: tell it once ("R us") when
-- its token is due, so it sleeps on its own clock for that long and then
-- asks again (shmsem_wait_renew); nobody else wakes for a start time.
local function tell_rate(k, t, wait)
  if redis.call('HGET', k.base, 'rate_told') == t then return end
  redis.call('HSET', k.base, 'rate_told', t)
  post(k, t, 'R ' .. digits(wait))
end

-- Grant n permits: the n lowest free indices, each index's generation
-- bumped, the global grant sequence bumped once. Returns the lease's
-- first index, generation and sequence.
local function grant(k, n, pid, now)
  local popped = redis.call('ZPOPMIN', k.free, n)
  local idx = {}
  for i = 1, #popped, 2 do idx[#idx + 1] = popped[i] end
  local first = idx[1]
  local gen = redis.call('HINCRBY', k.gen, first, 1)
  for i = 2, #idx do redis.call('HINCRBY', k.gen, idx[i], 1) end
  local seq = incr(k, 'seq', 1)
  rate_take(k)
  redis.call('HSET', k.l, first, table.concat(
    {gen, seq, n, now, pid, 0, table.concat(idx, ' ')}, ' '))
  redis.call('ZADD', k.lexp, now + num(k, 'ttl_ms'), first)
  incr(k, 'held', n)
  incr(k, 'acquisitions', 1)
  return tonumber(first), gen, seq
end

-- Hand permits to the head of the queue while it can be served in full
-- and the rate allows: weighted head-of-line, nobody overtakes the head.
local function pump(k, now)
  if num(k, 'closed') ~= 0 then return end
  while true do
    local h = redis.call('ZRANGE', k.q, 0, 0)
    if #h == 0 then return end
    local t = h[1]
    local n = tonumber(redis.call('HGET', k.wn, t) or '1')
    if avail(k) < n then return end
    local wait = rate_wait(k)
    if wait > 0 then return tell_rate(k, t, wait) end
    local info = redis.call('HGET', k.wi, t) or '0 0'
    local since, pid = string.match(info, '(%d+) (%d+)')
    local first, gen, seq = grant(k, n, pid or 0, now)
    incr(k, 'wait_sum_ms', now - (tonumber(since) or now))
    remove_waiter(k, t)
    post(k, t, 'G ' .. first .. ' ' .. gen .. ' ' .. seq .. ' ' .. n)
  end
end

-- Leases not kept alive and waiters not kept alive: gone, their permits
-- and places passed on. Runs first in every function that changes state.
local function reap(k, now)
  local count = 0
  local dead = redis.call('ZRANGEBYSCORE', k.lexp, '-inf', now, 'LIMIT', 0,
                          REAP_BATCH)
  for _, idx in ipairs(dead) do count = count + drop_lease(k, idx, true, now) end
  local gone = redis.call('ZRANGEBYSCORE', k.wexp, '-inf', now, 'LIMIT', 0,
                          REAP_BATCH)
  for _, t in ipairs(gone) do
    remove_waiter(k, t)
    post(k, t, 'X')
    incr(k, 'reclaimed_waiters', 1)
    count = count + 1
  end
  pump(k, now)
  return count
end

-- The server's time, once per call: k.us (rate) and the ms it returns.
local function clock(k)
  k.us = now_us()
  return math.floor(k.us / 1000)
end

-- The pool KEYS[1] with identity `id`, reaped, and the time; nil when it
-- is gone (unlinked, or another pool created under the name since).
local function enter(keys, id)
  local k = keys_of(keys[1], id)
  local have = redis.call('HGET', k.base, 'id')
  if not have or have ~= id then return nil end
  local now = clock(k)
  reap(k, now)
  return k, now
end

local CONFIG = {'permits', 'max_permits', 'max_waiters', 'ttl_ms',
                'wttl_ms'}

local function config_reply(k)
  local r = {'ok', redis.call('HGET', k.base, 'id')}
  for _, f in ipairs(CONFIG) do r[#r + 1] = num(k, f) end
  r[#r + 1] = num(k, 'created_permits')
  return r
end

-- What an open compares with the stored configuration, by argument:
-- each exactly, as the client spelled it after its defaults (the permits
-- as created, the rate period in ns as digits), except max_waiters when
-- the opener leaves it 0. A pool of library version 1 has no rate words:
-- they read as 0.
local COMPARED = {[2] = 'created_permits', [3] = 'max_permits',
                  [4] = 'max_waiters', [5] = 'ttl_ms', [6] = 'wttl_ms',
                  [8] = 'rate', [9] = 'burst', [10] = 'period_ns'}

local function mismatch(k, args)
  for i, f in pairs(COMPARED) do
    local have = redis.call('HGET', k.base, f) or '0'
    if not (f == 'max_waiters' and args[i] == '0') and args[i] ~= have then
      return true
    end
  end
  return false
end

-- create: args id permits max_permits max_waiters ttl_ms wttl_ms excl
-- rate burst period_ns interval_ns (the client checked them: redis/open.cc;
-- permits 0 with a rate: no concurrency limit below max_permits). The
-- configuration is stored once; an open with another one is 'mismatch'
-- (-EEXIST, as for a local semaphore).
local function f_create(keys, args)
  local k = keys_of(keys[1])
  if redis.call('EXISTS', k.base) == 1 then
    if args[7] == '1' then return {'exists'} end
    if mismatch(k, args) then return {'mismatch'} end
    return config_reply(k)
  end
  local maxp = tonumber(args[3])
  local maxw = tonumber(args[4])
  if maxw == 0 then maxw = 1024 end
  local cap = args[2]
  if cap == '0' then cap = args[3] end
  -- The hash alone may have gone (a DEL, an eviction): an old pool's
  -- queue and leases must not haunt the new one (its tickets start at 1
  -- again). Generations stay: they only grow.
  redis.call('DEL', k.q, k.wn, k.wi, k.wexp, k.free, k.l, k.lexp, k.lost)
  redis.call('HSET', k.base, 'id', args[1], 'permits', cap,
             'created_permits', args[2], 'max_permits', maxp,
             'max_waiters', maxw, 'ttl_ms', args[5], 'wttl_ms', args[6],
             'closed', 0, 'seq', 0, 'ticket', 0, 'held', 0,
             'created_ms', now_ms(), 'rate', args[8], 'burst', args[9],
             'period_ns', args[10], 'interval_ns', args[11], 'tat_us', 0,
             'tat_ns', 0)
  for i = 0, maxp - 1 do redis.call('ZADD', k.free, i, i) end
  return config_reply(k)
end

local function f_open(keys, args)
  local k = keys_of(keys[1])
  if redis.call('EXISTS', k.base) == 0 then return {'noent'} end
  return config_reply(k)
end

local function f_unlink(keys, args)
  local k = keys_of(keys[1], redis.call('HGET', keys[1], 'id') or '')
  if redis.call('EXISTS', k.base) == 0 then return {'noent'} end
  for _, t in ipairs(redis.call('ZRANGE', k.q, 0, -1)) do
    redis.call('DEL', k.mb .. t)
  end
  redis.call('DEL', k.base, k.q, k.wn, k.wi, k.wexp, k.free, k.gen, k.l,
             k.lexp, k.lost)
  return {'ok'}
end

-- acquire: args id n mode pid. mode 0: try (grant now or 'again');
-- 1: grant now or queue with a ticket. Grants at once only when nobody
-- queues and the rate allows: no barging past the head. A waiter that
-- queues first with its permits free but no token hears "R us".
local function f_acquire(keys, args)
  local k, now = enter(keys, args[1])
  if not k then return {'gone'} end
  local n = tonumber(args[2]) or 0
  if n < 1 or n > num(k, 'max_permits') then return {'inval'} end
  if num(k, 'closed') ~= 0 then return {'shutdown'} end
  if redis.call('ZCARD', k.q) == 0 and avail(k) >= n and
     rate_wait(k) == 0 then
    local first, gen, seq = grant(k, n, tonumber(args[4]) or 0, now)
    return {'granted', first, gen, seq, n}
  end
  if args[3] == '0' then return {'again'} end
  if redis.call('ZCARD', k.q) >= num(k, 'max_waiters') then
    incr(k, 'queue_full', 1)
    return {'busy'}
  end
  local t = incr(k, 'ticket', 1)
  redis.call('DEL', k.mb .. t)
  redis.call('ZADD', k.q, t, t)
  redis.call('HSET', k.wn, t, n)
  redis.call('HSET', k.wi, t, now .. ' ' .. (tonumber(args[4]) or 0))
  redis.call('ZADD', k.wexp, now + num(k, 'wttl_ms'), t)
  pump(k, now)  -- a new head with its permits but no token hears "R us"
  return {'queued', t}
end

-- A waiter's keep-alive, and the grant to a head whose token time has
-- come: args id ticket due. 'queued' (renewed) or 'done' (its mailbox has
-- the outcome, or it was reaped). enter() has granted the head if it can
-- be; a head told "R us" that asks when it is due ('1') but is still
-- early (its clock ran fast) is told again. A plain renewal tells nothing:
-- the head knows its time already, and a second R would only delay it.
local function f_wait_renew(keys, args)
  local k, now = enter(keys, args[1])
  if not k then return {'gone'} end
  local t = args[2]
  if not redis.call('ZSCORE', k.q, t) then return {'done'} end
  redis.call('ZADD', k.wexp, now + num(k, 'wttl_ms'), t)
  if args[3] == '1' and redis.call('HGET', k.base, 'rate_told') == t then
    redis.call('HDEL', k.base, 'rate_told')
    pump(k, now)
  end
  return {'queued'}
end

-- The end of a wait that the waiter decides (deadline, cancel): args id
-- ticket reason ('timeout' or 'cancel'). One transition against the
-- grant: still queued, the waiter leaves owning nothing; already granted,
-- the grant won and its lease is returned.
local function f_cancel(keys, args)
  local k, now = enter(keys, args[1])
  if not k then return {'gone'} end
  local t = args[2]
  if redis.call('ZSCORE', k.q, t) then
    remove_waiter(k, t)
    redis.call('DEL', k.mb .. t)
    if args[3] == 'timeout' then
      incr(k, 'timeouts', 1)
    else
      incr(k, 'cancellations', 1)
    end
    pump(k, now)  -- the head may have changed
    return {args[3] == 'timeout' and 'timedout' or 'canceled'}
  end
  -- "R us" told the head when its token was due: not an outcome.
  local msg = redis.call('LPOP', k.mb .. t)
  while msg and string.sub(msg, 1, 2) == 'R ' do
    msg = redis.call('LPOP', k.mb .. t)
  end
  redis.call('DEL', k.mb .. t)
  if not msg then return {'expired'} end
  if msg == 'S' then return {'shutdown'} end
  if msg == 'X' then return {'expired'} end
  local first, gen, seq, n = string.match(msg, '^G (%d+) (%d+) (%d+) (%d+)$')
  if not first then return {'expired'} end
  return {'granted', tonumber(first), tonumber(gen), tonumber(seq),
          tonumber(n)}
end

-- The state of lease (idx, gen): 'held' (with its record), or why not.
local function lease_state(k, idx, gen)
  if not idx then return 'inval' end
  local g = tonumber(redis.call('HGET', k.gen, idx) or '0')
  if gen < 1 or gen > g then return 'inval' end
  local rec = redis.call('HGET', k.l, idx)
  if rec then
    local v = parse_lease(rec)
    if v[1] == gen then return 'held', v end
  end
  if redis.call('ZSCORE', k.lost, idx .. ':' .. gen) then return 'expired' end
  return 'already'
end

-- release: args id idx gen. Exactly once: 'ok' the first time, 'already'
-- after, 'expired' for a lease that was not kept alive.
local function f_release(keys, args)
  local k, now = enter(keys, args[1])
  if not k then return {'gone'} end
  local idx = tonumber(args[2])
  local st = lease_state(k, idx, tonumber(args[3]) or 0)
  if st ~= 'held' then return {st} end
  drop_lease(k, idx, false, now)
  pump(k, now)
  return {'ok'}
end

-- renew: args id then pairs idx gen. Each lease still held gets a new
-- expiry; the reply has one word per pair (its lease_state), then the
-- lease TTL in ms. A lease of n permits has one record, so one pair.
local function f_renew(keys, args)
  local k, now = enter(keys, args[1])
  if not k then return {'gone'} end
  local ttl = num(k, 'ttl_ms')
  local r = {'ok'}
  for i = 2, #args - 1, 2 do
    local idx = tonumber(args[i])
    local st = lease_state(k, idx, tonumber(args[i + 1]) or 0)
    if st == 'held' then redis.call('ZADD', k.lexp, now + ttl, idx) end
    r[#r + 1] = st
  end
  r[#r + 1] = ttl
  return r
end

-- The fencing numbers of a lease: args id idx gen -> state and seq.
local function f_lease(keys, args)
  local k, now = enter(keys, args[1])
  if not k then return {'gone'} end
  local st, v = lease_state(k, tonumber(args[2]), tonumber(args[3]) or 0)
  if st ~= 'held' then return {st} end
  return {'held', v[2]}
end

-- declare: args id idx gen hold_ms (reporting only).
local function f_declare(keys, args)
  local k, now = enter(keys, args[1])
  if not k then return {'gone'} end
  local idx = tonumber(args[2])
  local st, v = lease_state(k, idx, tonumber(args[3]) or 0)
  if st ~= 'held' then return {st} end
  v[6] = tonumber(args[4]) or 0
  redis.call('HSET', k.l, idx, table.concat(v, ' '))
  return {'ok'}
end

local function f_set_permits(keys, args)
  local k, now = enter(keys, args[1])
  if not k then return {'gone'} end
  local p = tonumber(args[2])
  if not p or p < 0 or p > num(k, 'max_permits') then return {'inval'} end
  redis.call('HSET', k.base, 'permits', p)
  pump(k, now)
  return {'ok'}
end

-- shutdown: every queued waiter hears 'S' in its mailbox; acquires are
-- refused from now on; held leases stay valid.
local function f_shutdown(keys, args)
  local k, now = enter(keys, args[1])
  if not k then return {'gone'} end
  redis.call('HSET', k.base, 'closed', 1)
  local q = redis.call('ZRANGE', k.q, 0, -1)
  for _, t in ipairs(q) do
    remove_waiter(k, t)
    post(k, t, 'S')
  end
  incr(k, 'shutdown_failures', #q)
  return {'ok', #q}
end

-- recover: the reaping pass every function runs, counted.
local function f_recover(keys, args)
  local k = keys_of(keys[1], args[1])
  local have = redis.call('HGET', k.base, 'id')
  if not have or have ~= args[1] then return {'gone'} end
  return {'ok', reap(k, clock(k))}
end

local STAT = {'permits', 'max_waiters', 'held', 'closed', 'max_permits',
              'acquisitions', 'timeouts', 'cancellations', 'queue_full',
              'shutdown_failures', 'reclaimed_holders', 'reclaimed_waiters',
              'wait_sum_ms', 'hold_sum_ms', 'created_ms', 'created_permits',
              'seq', 'ttl_ms'}

-- stat and inspect: args id max_holders max_waiters. The counters (STAT's
-- order), the queue length, the time (ms), the rate limit (rate burst
-- period_ns interval_ns tat_us tat_ns, the time in us), then up to
-- max_holders leases ("idx gen seq n since pid declared", by index) and
-- max_waiters waiters ("ticket n since pid", in queue order), each list
-- after its length. max_waiters 0 reads no queue: stat stays cheap.
local function f_inspect(keys, args)
  local k, now = enter(keys, args[1])
  if not k then return {'gone'} end
  local r = {'ok'}
  for _, f in ipairs(STAT) do r[#r + 1] = num(k, f) end
  r[#r + 1] = redis.call('ZCARD', k.q)
  r[#r + 1] = now
  local v = redis.call('HMGET', k.base, 'rate', 'burst', 'period_ns',
                       'interval_ns', 'tat_us', 'tat_ns')
  for i = 1, 6 do r[#r + 1] = v[i] or '0' end
  r[#r + 1] = digits(k.us)
  local mh, mw = tonumber(args[2]) or 0, tonumber(args[3]) or 0
  local ls = redis.call('HGETALL', k.l)
  r[#r + 1] = #ls / 2
  for i = 1, math.min(#ls, mh * 2), 2 do
    local v = parse_lease(ls[i + 1])
    r[#r + 1] = table.concat({ls[i], v[1], v[2], v[3], v[4], v[5], v[6]}, ' ')
  end
  local q = {}
  if mw > 0 then q = redis.call('ZRANGE', k.q, 0, mw - 1) end
  r[#r + 1] = #q
  for _, t in ipairs(q) do
    r[#r + 1] = t .. ' ' .. (redis.call('HGET', k.wn, t) or '0') .. ' ' ..
                (redis.call('HGET', k.wi, t) or '0 0')
  end
  return r
end

-- REDIS-RATE: the rate words are in range (an interval of 1 ns to a day,
-- a burst of 1 to 2^20, a remainder of 0..999 ns; none without a rate)
-- and the bucket is never further ahead than a burst: tat <= now + tau + T.
-- `raw`: tat as stored before enter() could clamp it.
local function rate_in_range(k, raw)
  local rate, t, b = num(k, 'rate'), num(k, 'interval_ns'), num(k, 'burst')
  if rate == 0 then return t == 0 and (raw[3] or '0') == '0' end
  if t < 1 or t > MAX_INTERVAL_NS or b < 1 or b > MAX_BURST then
    return false
  end
  local us, ns = tonumber(raw[3] or '0'), tonumber(raw[4] or '0')
  if not us or not ns or us < 0 or ns < 0 or ns > 999 then return false end
  local r = rate_words(k, raw)
  return not tless(r.max_us, r.max_ns, us, ns)
end

-- check: the pool's invariants, as numbers recounted from the records:
-- REDIS-INDICES (free + held indices = max_permits), REDIS-HELD (the held
-- counter is the sum of the leases' weights), REDIS-QUEUE (every queued
-- ticket has its weight and keep-alive), REDIS-RATE (above).
local function f_check(keys, args)
  local raw = redis.call('HMGET', keys[1], unpack(RATE_WORDS))
  local k, now = enter(keys, args[1])
  if not k then return {'gone'} end
  local bad_rate = not rate_in_range(k, raw)
  local held = 0
  local ls = redis.call('HVALS', k.l)
  for _, rec in ipairs(ls) do held = held + parse_lease(rec)[3] end
  local bad = {}
  if bad_rate then bad[#bad + 1] = 'REDIS-RATE' end
  if held ~= num(k, 'held') then bad[#bad + 1] = 'REDIS-HELD' end
  if redis.call('ZCARD', k.free) + held ~= num(k, 'max_permits') then
    bad[#bad + 1] = 'REDIS-INDICES'
  end
  local q = redis.call('ZCARD', k.q)
  if redis.call('HLEN', k.wn) ~= q or redis.call('ZCARD', k.wexp) ~= q then
    bad[#bad + 1] = 'REDIS-QUEUE'
  end
  if #bad > 0 then return {'broken', table.concat(bad, ' ')} end
  return {'ok'}
end

-- list: args prefix cursor -> the next cursor and the pool names found
-- under "shmsem:{", one SCAN step (the client loops).
local function f_list(keys, args)
  local r = redis.call('SCAN', args[1], 'MATCH', 'shmsem:{*}', 'COUNT', 256,
                      'TYPE', 'hash')
  local out = {'ok', r[1]}
  for _, key in ipairs(r[2]) do
    local name = string.match(key, '^shmsem:{(.+)}$')
    if name then out[#out + 1] = name end
  end
  return out
end

local function f_version(keys, args) return LIBRARY_VERSION end

local function reg(name, fn, ro)
  local flags = {}
  if ro then flags = {'no-writes'} end
  redis.register_function{function_name = name, callback = fn, flags = flags}
end

reg('shmsem_version', f_version, true)
reg('shmsem_create', f_create)
reg('shmsem_open', f_open, true)
reg('shmsem_unlink', f_unlink)
reg('shmsem_acquire', f_acquire)
reg('shmsem_wait_renew', f_wait_renew)
reg('shmsem_cancel', f_cancel)
reg('shmsem_release', f_release)
reg('shmsem_renew', f_renew)
reg('shmsem_lease', f_lease)
reg('shmsem_declare', f_declare)
reg('shmsem_set_permits', f_set_permits)
reg('shmsem_shutdown', f_shutdown)
reg('shmsem_recover', f_recover)
reg('shmsem_inspect', f_inspect)
reg('shmsem_check', f_check)
reg('shmsem_list', f_list, true)
