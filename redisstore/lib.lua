-- lib.lua: helpers shared by the scripts of redisstore; prepended to each.
--
-- Keys of one mutex (all under one hash tag, so one cluster slot):
--   KEYS[1] lock     hash o=owner t=token x=transition ms; PX = ttl + transition
--   KEYS[2] counter  string: the highest token granted; PX = retention
--   KEYS[3] queue    zset contender -> first arrival (µs): FIFO order
--   KEYS[4] expiry   hash contender -> "expiresAt ms:span ms"
--   KEYS[5] hold     hash c=reserved waiter u=window end (ms); a hand-off
--   KEYS[6] channel  the pub/sub channel (not a key; declared for cluster)
-- Integers go to Redis as "%d" strings, tokens as decimal strings, so no
-- number is ever rounded by Lua's doubles on the way.

if redis.replicate_commands then redis.replicate_commands() end

local function int(x) return string.format('%d', x) end

-- clock returns the server's time in ms and in µs.
local function clock()
  local t = redis.call('TIME')
  local s, us = tonumber(t[1]), tonumber(t[2])
  return s * 1000 + math.floor(us / 1000), s * 1000000 + us
end

-- record returns {owner, token, ttl ms, transition ms} of the live grant,
-- or nil when the mutex is free.
-- A lock hash the Store did not write is an error, never a free mutex.
local function record()
  local v = redis.call('HMGET', KEYS[1], 'o', 't', 'x')
  if not v[1] and not v[2] and not v[3] then return nil end
  if not v[1] or v[1] == '' or not v[2] or not string.match(v[2], '^[1-9]%d*$') then
    error({err = 'SIMBA unexpected lock record under ' .. KEYS[1]})
  end
  local left = redis.call('PTTL', KEYS[1])
  if left < 0 then left = 0 end
  local ttl = left - (tonumber(v[3]) or 0)
  if ttl < 0 then ttl = 0 end
  return {v[1], v[2], ttl, left}
end

-- extend runs the current grant for ttl, then transition, from now.
local function extend(ttl, tr)
  redis.call('HSET', KEYS[1], 'x', int(tr))
  redis.call('PEXPIRE', KEYS[1], int(ttl + tr))
end

-- next_token returns a token above every earlier one: the counter plus one,
-- or the server's time in µs when that is larger (a counter lost to a
-- restart or an expiry starts again above every token of the past).
local function next_token(now_us, keep)
  local n = redis.call('INCR', KEYS[2])
  if n <= now_us then
    n = now_us
    redis.call('SET', KEYS[2], int(n))
  end
  redis.call('PEXPIRE', KEYS[2], keep)
  return int(n)
end

local function dequeue(c)
  redis.call('ZREM', KEYS[3], c)
  redis.call('HDEL', KEYS[4], c)
end

-- enqueue adds c at the tail, or refreshes its expiry keeping its place.
local function enqueue(c, now, now_us, span)
  local exp = now + 2 * span
  redis.call('ZADD', KEYS[3], 'NX', int(now_us), c)
  redis.call('HSET', KEYS[4], c, int(exp) .. ':' .. int(span))
  for i = 3, 4 do
    if redis.call('PTTL', KEYS[i]) < 2 * span then
      redis.call('PEXPIRE', KEYS[i], int(2 * span))
    end
  end
end

-- head drops expired entries at the front of the queue and returns the
-- longest live waiter and its span (ttl + transition), or nil.
local function head(now)
  for _ = 1, 64 do
    local h = redis.call('ZRANGE', KEYS[3], 0, 0)[1]
    if not h then return nil end
    local v = redis.call('HGET', KEYS[4], h)
    local e, s
    if v then e, s = string.match(v, '^(%d+):(%d+)$') end
    if e and tonumber(e) > now then return h, tonumber(s) end
    dequeue(h)
  end
  return nil
end

local function publish(cmd, msg) redis.call(cmd, KEYS[6], msg) end

-- handoff reserves the free mutex for the head of the queue for one
-- window (at most its span) and returns the head, or nil.
local function handoff(now, win)
  redis.call('DEL', KEYS[5])
  local h, span = head(now)
  if not h then return nil end
  if win > 0 then
    if span < win then win = span end
    redis.call('HSET', KEYS[5], 'c', h, 'u', int(now + win))
    redis.call('PEXPIRE', KEYS[5], int(win + span))
  end
  return h
end

-- settle ends a reservation whose window passed or whose waiter left the
-- queue, and reserves the mutex for the next live waiter, waking it.
local function settle(now, win, cmd)
  local r = redis.call('HMGET', KEYS[5], 'c', 'u')
  if not r[1] then return end
  if redis.call('EXISTS', KEYS[1]) == 1 then
    redis.call('DEL', KEYS[5])
    return
  end
  head(now)
  local queued = redis.call('ZSCORE', KEYS[3], r[1])
  if queued and now < (tonumber(r[2]) or 0) then return end
  if queued then dequeue(r[1]) end
  local next = handoff(now, win)
  if next then publish(cmd, 'w|' .. next) end
end

-- held returns what is left of the reservation for someone other than c
-- (ms), or 0.
local function held(now, c)
  local r = redis.call('HMGET', KEYS[5], 'c', 'u')
  if not r[1] or r[1] == c then return 0 end
  local left = (tonumber(r[2]) or 0) - now
  if left < 0 then return 0 end
  return left
end
