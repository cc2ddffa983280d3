-- lib.lua: helpers shared by the scripts of redisstore; prepended to each.
--
-- Keys of one mutex, all under its hash tag (one cluster slot). Scripts
-- get the record key alone (acquire.lua the slot's epoch key too, KEYS[2]:
-- see flushed); the others are named from it, as keys.go names them, so
-- they share its tag and slot:
--   KEYS[1]      <base>:r  record   string, see decode; PX at least the grant's end
--   QKEY         <base>:q  queue    zset contender -> first arrival (µs): FIFO order
--   QEKEY        <base>:qe qexp     hash contender -> "expiresAt ms:span ms"
--   CHANNEL      <base>:ev the pub/sub channel
--   <base>:g:<token>:<owner>  the live grant, named by its token and owner;
--                             PX = the grant's end; a string, or a hash
--                             once a waiter or an observer came (watched)
-- acquire.lua and release.lua run with the Store's constants before them:
-- WIN (the hand-off window, ms), PUB (PUBLISH, or SPUBLISH on Redis
-- Cluster) and KEEP (the retention, ms); see consts in scripts.go.
-- Integers go to Redis as "%d" strings, tokens as decimal strings, so no
-- number is ever rounded by Lua's doubles on the way.

if redis.replicate_commands then redis.replicate_commands() end

local function int(x) return string.format('%d', x) end

local BASE = string.sub(KEYS[1], 1, -3)
local QKEY, QEKEY, CHANNEL = BASE .. ':q', BASE .. ':qe', BASE .. ':ev'

-- gkeyOf names the grant key of the record key rkey ("<base>:r").
local function gkeyOf(rkey, tok, owner)
  return string.sub(rkey, 1, -3) .. ':g:' .. tok .. ':' .. owner
end

local function gkey(tok, owner) return gkeyOf(KEYS[1], tok, owner) end

-- clock returns the server's time in ms and in µs.
local function clock()
  local t = redis.call('TIME')
  local s, us = tonumber(t[1]), tonumber(t[2])
  return s * 1000 + math.floor(us / 1000), s * 1000000 + us
end

local function bad(key, why)
  error({err = 'SIMBA unexpected record under ' .. key .. ': ' .. why})
end

-- decode reads a record: nine fields separated by NUL (no id contains one):
--   s1 | n: the highest token issued (the next is n + 1) | life: the server
--   life that last adopted it ("" for a stub an observer made) | tok: the
--   last grant's token | owner: its contender ("" once known free) | x: its
--   transition ms | flags: q (the queue may be non-empty), o (observers may
--   listen) | hu: end of a hold (ms, 0 for none) | hc: the waiter it is
--   reserved for ("" for a safety hold-back that keeps everyone out).
-- A value the Store did not write is an error, never a free mutex.
local function decode(v, key)
  local f, i = {}, 1
  while true do
    local j = string.find(v, '\0', i, true)
    if not j then
      f[#f + 1] = string.sub(v, i)
      break
    end
    f[#f + 1] = string.sub(v, i, j - 1)
    i = j + 1
    if #f > 9 then break end
  end
  if #f ~= 9 or f[1] ~= 's1' then bad(key, 'format') end
  for _, k in ipairs({2, 4, 6, 8}) do
    if not string.match(f[k], '^%d+$') then bad(key, 'field ' .. k) end
  end
  if f[5] ~= '' and f[4] == '0' then bad(key, 'owner without token') end
  return {n = tonumber(f[2]), life = f[3], tok = f[4], owner = f[5], x = tonumber(f[6]),
    q = string.find(f[7], 'q', 1, true) ~= nil, o = string.find(f[7], 'o', 1, true) ~= nil,
    hu = tonumber(f[8]), hc = f[9]}
end

local function encode(r)
  local flags = (r.q and 'q' or '') .. (r.o and 'o' or '')
  return table.concat({'s1', int(r.n), r.life, r.tok, r.owner, int(r.x), flags, int(r.hu), r.hc}, '\0')
end

-- stub is the record of a mutex the server has nothing of.
local function stub()
  return {n = 0, life = '', tok = '0', owner = '', x = 0, q = false, o = false, hu = 0, hc = ''}
end

-- write stores r under KEYS[1] for px ms (at least the grant's end).
local function write(r, px)
  redis.call('SET', KEYS[1], encode(r), 'PX', int(px))
end

-- rewrite stores r under KEYS[1] keeping its expiry: while a grant is
-- live, its holder's Store counts on the expiry it set (see grants.go),
-- which a Store with a shorter retention must not cut.
local function rewrite(r)
  redis.call('SET', KEYS[1], encode(r), 'KEEPTTL')
end

-- left returns the ms left of r's grant (0 when none is live).
local function left(r, rkey)
  if r.owner == '' then return 0 end
  local l = redis.call('PTTL', gkeyOf(rkey, r.tok, r.owner))
  if l == -1 then bad(rkey, 'grant without expiry') end
  if l < 0 then return 0 end
  return l
end

-- watched makes the live grant of r, of l ms left, a hash (keeping its
-- expiry) once a waiter or an observer comes: its holder's Store releases
-- a grant its acquire's fast path made by one GETDEL of the grant key
-- (ops.go), which then fails with WRONGTYPE, and runs the release script,
-- which wakes them. The value of a grant key is never read.
-- The key keeps its absolute expiry (PEXPIRETIME, PEXPIREAT): the
-- server's clock runs on while a script runs, so giving it back l ms from
-- now would extend the grant by the time since l was read (measured: a
-- script held up 44 ms between the two moved the expiry 44 ms; TCK
-- TakeoverAfterAbandon saw a grant's time left shrink 4.5 ms less than
-- the time that passed, on a loaded machine).
local function watched(r, rkey, l)
  if l <= 0 then return end
  local g = gkeyOf(rkey, r.tok, r.owner)
  if redis.call('TYPE', g).ok ~= 'string' then return end
  local at = redis.call('PEXPIRETIME', g)
  if at < 0 then bad(rkey, 'grant without expiry') end
  redis.call('DEL', g)
  redis.call('HSET', g, 'w', '1')
  redis.call('PEXPIREAT', g, at)
end

local function dequeue(c)
  redis.call('ZREM', QKEY, c)
  redis.call('HDEL', QEKEY, c)
end

-- enqueue adds c at the tail, or refreshes its expiry keeping its place,
-- and flags the queue in r. It reports whether r changed.
local function enqueue(r, c, now, now_us, span)
  redis.call('ZADD', QKEY, 'NX', int(now_us), c)
  redis.call('HSET', QEKEY, c, int(now + 2 * span) .. ':' .. int(span))
  for _, k in ipairs({QKEY, QEKEY}) do
    if redis.call('PTTL', k) < 2 * span then
      redis.call('PEXPIRE', k, int(2 * span))
    end
  end
  if r.q then return false end
  r.q = true
  return true
end

-- live returns the waiter at rank i (0 or 1) once the expired ones before
-- it are dropped, and its span, or nil.
local function live(now, i)
  for _ = 1, 64 do
    local h = redis.call('ZRANGE', QKEY, i, i)[1]
    if not h then return nil end
    local v = redis.call('HGET', QEKEY, h)
    local e, s
    if v then e, s = string.match(v, '^(%d+):(%d+)$') end
    if e and tonumber(e) > now then return h, tonumber(s) end
    dequeue(h)
  end
  return nil
end

-- publish sends msg on the mutex's channel; when nobody listens, the
-- observers have left.
local function publish(r, cmd, msg)
  if redis.call(cmd, CHANNEL, msg) == 0 then r.o = false end
end

-- wake is the message that names the waiter whose turn it is, the one
-- after it (woken when the window ends without a grant) and the window.
local function wake(kind, h, nxt, win)
  return table.concat({kind, h, nxt or '', int(win)}, '\0')
end

-- handoff reserves the free mutex for the longest live waiter for one
-- window (at most its span) and returns it, the waiter after it and the
-- window; nil when nobody waits (the queue flag is cleared).
local function handoff(r, now, win)
  r.hc, r.hu = '', 0
  local h, span = live(now, 0)
  if not h then
    r.q = false
    return nil
  end
  if win > 0 then
    if span < win then win = span end
    r.hc, r.hu = h, now + win
  end
  return h, live(now, 1), win
end

-- settle ends a hold that is over: a safety hold-back whose time has
-- passed, or a reservation whose window passed or whose waiter left the
-- queue (a grant ends any reservation). A free mutex then goes to the next
-- live waiter, which is woken. It reports whether r changed.
local function settle(r, now, win, cmd, held)
  if r.hu == 0 then return false end
  if r.hc == '' then
    if now < r.hu then return false end
  elseif not held then
    local queued = redis.call('ZSCORE', QKEY, r.hc)
    if queued and now < r.hu then return false end
    if queued then dequeue(r.hc) end
  end
  r.hc, r.hu = '', 0
  if held or not r.q then return true end
  local h, nxt, w = handoff(r, now, win)
  if h then publish(r, cmd, wake('w', h, nxt, w)) end
  return true
end

-- waiting returns what is left of a hold that keeps c out (ms), or 0.
local function waiting(r, now, c)
  if r.hu == 0 or (r.hc ~= '' and r.hc == c) then return 0 end
  local l = r.hu - now
  if l < 0 then return 0 end
  return l
end
