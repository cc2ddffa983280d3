-- acquire.lua: KEYS = the record key, the epoch key of its slot; ARGV =
-- contender, ttl + transition ms (the grant's span), transition ms,
-- max(KEEP, span) ms (the record's expiry after a grant; see
-- acquirefast.lua) and the floor: the highest token the caller's process
-- has seen (see floor.go), which a new grant's token exceeds, so a record
-- that starts from a clock that stepped back cannot take the process's
-- tokens below those it saw. The Store prepends LIFE (the server life it
-- loaded this text into), START (the latest instant that life can have
-- begun, server ms), GUARD (whether to hold mutexes back after a possible
-- loss of data), FAST (acquirefast.lua's pattern) and its constants WIN,
-- PUB and KEEP (see lib.lua).
-- Returns {owner, token, ttl ms, transition ms}; owner "" when not granted
-- (acquirefast.lua returns only the token of its grants: decodeAcquire).
local c, span, tr = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local win, cmd, keep = WIN, PUB, KEEP
local ttl = span - tr

-- flushed returns until when a mutex without a record is held back for
-- grants a FLUSHALL, FLUSHDB or SWAPDB may have wiped (0: not at all). The
-- epoch key of the slot, which has no expiry, is gone only after one of
-- them (or when never written); INFO runs only then, once per slot.
local function flushed(now)
  local e = redis.call('GET', KEYS[2])
  if not e then
    local info = redis.call('INFO', 'commandstats')
    local n = 0
    for _, name in ipairs({'flushall', 'flushdb', 'swapdb'}) do
      n = n + tonumber(string.match(info, 'cmdstat_' .. name .. ':calls=(%d+)') or '0')
    end
    e = '0'
    if n > 0 then e = int(now + span) end
    redis.call('SET', KEYS[2], e)
  end
  local h = tonumber(e)
  if not h then bad(KEYS[2], 'epoch') end
  if h > now then return h end
  return 0
end

local raw = RAW -- read by the fast path
local r
if raw then r = decode(raw, KEYS[1]) end
local now, now_us
local dirty = false
if not r or r.life ~= LIFE then
  -- A record from an earlier life of the server (restored from a snapshot
  -- or an AOF), or none at all: grants made later may be lost. Adopt it:
  -- tokens continue above the server's clock, and while a lost grant may
  -- still be believed by its holder, the mutex is held back.
  now, now_us = clock()
  local hold = 0
  if GUARD then
    if now < START + span then
      hold = START + span
    elseif not r or r.life == '' then
      hold = flushed(now)
    end
  end
  r = r or stub()
  r.life = LIFE
  if r.n < now_us then r.n = now_us end
  if hold > 0 and (r.hc ~= '' or hold > r.hu) then
    r.hc, r.hu = '', math.max(hold, r.hu)
  end
  dirty = true
end

local l = left(r, KEYS[1])
if r.hu > 0 then
  if not now then now, now_us = clock() end
  if settle(r, now, win, cmd, l > 0) then dirty = true end
end

if l > 0 then
  local safety = r.hu > 0 and r.hc == ''
  if r.owner == c and not safety then -- a retried acquire: extend
    redis.call('PEXPIRE', gkey(r.tok, c), int(span))
    r.x = tr
    write(r, math.max(keep, span))
    return {c, r.tok, ttl, span}
  end
  if not now then now, now_us = clock() end
  watched(r, KEYS[1], l)
  if enqueue(r, c, now, now_us, span) then dirty = true end
  if dirty then rewrite(r) end
  if r.owner == c then return {'', '0', 0, math.max(l, r.hu - now)} end
  local rest = l - r.x
  if rest < 0 then rest = 0 end
  return {r.owner, r.tok, rest, l}
end

if r.hu > 0 then
  local wait = waiting(r, now, c)
  if wait > 0 then
    if enqueue(r, c, now, now_us, span) then dirty = true end
    if dirty then write(r, math.max(keep, r.hu - now)) end
    return {'', '0', 0, wait}
  end
end

-- Free: a new grant, above every earlier token and the floor.
local queued = r.q
local tok = math.max(r.n, tonumber(ARGV[5])) + 1
r.n, r.tok, r.owner, r.x, r.hc, r.hu = tok, int(tok), c, tr, '', 0
if queued then
  dequeue(c)
  if redis.call('EXISTS', QKEY) == 0 then r.q = false end
end
redis.call('SET', gkey(r.tok, c), '1', 'PX', int(span))
if queued or r.o then publish(r, cmd, 'g\0' .. r.tok .. '\0' .. c) end
write(r, math.max(keep, span))
return {c, r.tok, ttl, span}
