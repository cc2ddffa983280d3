-- renew.lua: renews one grant per key. KEYS = the lock keys; ARGV = four
-- per key: contender, token, ttl ms, transition ms. Returns five values per
-- key: 1 (renewed) or 0 (not held), owner, token, ttl ms, transition ms.
local out = {}
for i = 1, #KEYS do
  local c, tok = ARGV[4 * i - 3], ARGV[4 * i - 2]
  local ttl, tr = tonumber(ARGV[4 * i - 1]), tonumber(ARGV[4 * i])
  local v = redis.call('HMGET', KEYS[i], 'o', 't', 'x')
  local n = #out
  if (v[1] or v[2] or v[3]) and not (v[1] and v[1] ~= '' and v[2] and string.match(v[2], '^[1-9]%d*$')) then
    error({err = 'SIMBA unexpected lock record under ' .. KEYS[i]})
  end
  if v[1] == c and v[2] == tok then
    redis.call('HSET', KEYS[i], 'x', string.format('%d', tr))
    redis.call('PEXPIRE', KEYS[i], string.format('%d', ttl + tr))
    out[n + 1], out[n + 2], out[n + 3], out[n + 4], out[n + 5] = 1, c, tok, ttl, ttl + tr
  elseif v[1] and v[2] then
    local left = redis.call('PTTL', KEYS[i])
    if left < 0 then left = 0 end
    local rest = left - (tonumber(v[3]) or 0)
    if rest < 0 then rest = 0 end
    out[n + 1], out[n + 2], out[n + 3], out[n + 4], out[n + 5] = 0, v[1], v[2], rest, left
  else
    out[n + 1], out[n + 2], out[n + 3], out[n + 4], out[n + 5] = 0, '', '0', 0, 0
  end
end
return out
