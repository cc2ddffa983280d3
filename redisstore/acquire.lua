-- acquire.lua: ARGV = contender, ttl ms, transition ms, hand-off window ms,
-- publish command, counter retention ms, restart guard ("1" or "0").
-- Returns {owner, token, ttl ms, transition ms}; owner "" when free.
local c, ttl, tr = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local win, cmd, keep, guard = tonumber(ARGV[4]), ARGV[5], ARGV[6], ARGV[7] == '1'
local now, now_us = clock()
settle(now, win, cmd)
local rec = record()
if rec then
  if rec[1] == c then
    extend(ttl, tr)
    return {c, rec[2], ttl, ttl + tr}
  end
  enqueue(c, now, now_us, ttl + tr)
  return rec
end
local wait = held(now, c)
if wait > 0 then
  enqueue(c, now, now_us, ttl + tr)
  return {'', '0', 0, wait}
end
-- No counter: the mutex is new, or this server lost its data (a restart
-- without persistence) together with a grant that may still be live.
-- While the server is younger than one grant, hold the mutex back.
if guard and redis.call('EXISTS', KEYS[2]) == 0 then
  local up = tonumber(string.match(redis.call('INFO', 'server'), 'uptime_in_seconds:(%d+)') or '0')
  local young = ttl + tr - (up - 1) * 1000 -- uptime is whole seconds, maybe rounded up
  if young > 0 then
    enqueue(c, now, now_us, ttl + tr)
    return {'', '0', 0, young}
  end
end
local tok = next_token(now_us, keep)
redis.call('DEL', KEYS[5])
redis.call('HSET', KEYS[1], 'o', c, 't', tok)
extend(ttl, tr)
dequeue(c)
publish(cmd, 'g|' .. tok .. '|' .. c)
return {c, tok, ttl, ttl + tr}
