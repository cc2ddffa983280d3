-- renew.lua: renews one grant per key; the slow path of RenewMany (a plain
-- PEXPIRE of the grant key is the fast one). KEYS = the record keys; ARGV =
-- the retention ms, then four per key: contender, token, ttl ms,
-- transition ms. Returns five values per key: 1 (renewed) or 0 (not
-- held), owner, token, ttl ms, transition ms. Besides the grant it extends
-- the record, which must outlive the grant, and notes a new transition.
local keep = tonumber(ARGV[1])
local out = {}
for i = 1, #KEYS do
  local key = KEYS[i]
  local c, tok = ARGV[4 * i - 2], ARGV[4 * i - 1]
  local ttl, tr = tonumber(ARGV[4 * i]), tonumber(ARGV[4 * i + 1])
  local raw = redis.call('GET', key)
  local r
  if raw then r = decode(raw, key) end
  local n = #out
  if r and r.owner == c and r.tok == tok and redis.call('PEXPIRE', gkeyOf(key, tok, c), int(ttl + tr)) == 1 then
    r.x = tr
    redis.call('SET', key, encode(r), 'PX', int(math.max(keep, ttl + tr)))
    out[n + 1], out[n + 2], out[n + 3], out[n + 4], out[n + 5] = 1, c, tok, ttl, ttl + tr
  else
    local l = 0
    if r then l = left(r, key) end
    if l > 0 then
      local rest = l - r.x
      if rest < 0 then rest = 0 end
      out[n + 1], out[n + 2], out[n + 3], out[n + 4], out[n + 5] = 0, r.owner, r.tok, rest, l
    else
      out[n + 1], out[n + 2], out[n + 3], out[n + 4], out[n + 5] = 0, '', '0', 0, 0
    end
  end
end
return out
