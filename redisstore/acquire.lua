-- acquire.lua: ARGV = contender, ttl ms, transition ms, hand-off window ms,
-- publish command, counter retention ms.
-- Returns {owner, token, ttl ms, transition ms}; owner "" when free.
local c, ttl, tr = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local win, cmd, keep = tonumber(ARGV[4]), ARGV[5], ARGV[6]
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
local tok = next_token(now_us, keep)
redis.call('DEL', KEYS[5])
redis.call('HSET', KEYS[1], 'o', c, 't', tok)
extend(ttl, tr)
dequeue(c)
publish(cmd, 'g|' .. tok .. '|' .. c)
return {c, tok, ttl, ttl + tr}
