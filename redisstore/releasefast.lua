-- releasefast.lua: the fast path of release.lua, run before lib.lua's
-- helpers are made. A record with no flag (queue, observer) and no hold
-- needs none of them: the grant ends (1) or is not the caller's (0). The
-- pattern matches only such a record (empty flags, hold end 0, no
-- reserved waiter) and captures the last token and its owner. Anything
-- else, a record that does not parse included, goes on to the full script.
if redis.replicate_commands then redis.replicate_commands() end
local RAW = redis.call('GET', KEYS[1]) -- the full script's reading too
do
  local raw = RAW
  if not raw then return 0 end
  local tok, owner = string.match(raw, '^s1%z%d+%z[^%z]*%z(%d+)%z([^%z]*)%z%d+%z%z0%z$')
  if tok and (owner == '' or tok ~= '0') then
    local c, t = ARGV[1], ARGV[2]
    if t ~= '0' and owner == c and tok == t and
      redis.call('DEL', string.sub(KEYS[1], 1, -3) .. ':g:' .. t .. ':' .. c) == 1 then
      return 1
    end
    return 0
  end
end
