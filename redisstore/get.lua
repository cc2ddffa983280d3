-- get.lua: reads the record without changing anything.
-- Returns {owner, token, ttl ms, transition ms}; a free mutex held back
-- has an empty owner and the time left of the hold.
local raw = redis.call('GET', KEYS[1])
if not raw then return {'', '0', 0, 0} end
local r = decode(raw, KEYS[1])
local l = left(r, KEYS[1])
if l > 0 then
  local rest = l - r.x
  if rest < 0 then rest = 0 end
  return {r.owner, r.tok, rest, l}
end
if r.hu > 0 then
  local now = clock()
  if r.hu > now then return {'', '0', 0, r.hu - now} end
end
return {'', '0', 0, 0}
