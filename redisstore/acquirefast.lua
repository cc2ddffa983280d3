-- acquirefast.lua: the fast path of acquire.lua, run before lib.lua's
-- helpers are made (making them costs more than this path's work). A
-- mutex whose record this life of the server wrote, with no flag (queue,
-- observer), no hold and no live grant, or a mutex without a record that
-- nothing holds back, gets its new grant here; anything else, a record
-- that does not parse included, goes on to the full script, which
-- decides it as it always did. FAST (made with LIFE, see life.go) matches
-- only a record of this life whose flags, hold end and reserved waiter
-- are empty, 0 and empty, so the pattern itself sorts records out and
-- captures only the counter, the last token and its owner.
-- A grant here returns only its token (a string; the caller knows the
-- rest), which costs the server less than the full script's array, and
-- the record is one concatenation, without a table. The caller sends the
-- grant's and the record's expiries ready-made (ARGV[2], ARGV[4]), so this
-- path converts no duration between string and number: tonumber and
-- string.format cost the server more than the rest of its Lua does. A
-- grant's token is one above the larger of the counter and the floor
-- (ARGV[5], see acquire.lua), as in the full script. Not MGET for the
-- record and the epoch key at once: MGET reads a value of another type as
-- none, where GET fails (TestGarbageUnderOurKeys).
if redis.replicate_commands then redis.replicate_commands() end
local RAW = redis.call('GET', KEYS[1]) -- the full script's reading too
do
  local raw = RAW
  if raw then
    local n, tok, owner = string.match(raw, FAST)
    if n and (owner == '' or tok ~= '0') then
      local base = string.sub(KEYS[1], 1, -3)
      if owner == '' or redis.call('PTTL', base .. ':g:' .. tok .. ':' .. owner) == -2 then
        local c = ARGV[1]
        local t = string.format('%d', math.max(tonumber(n), tonumber(ARGV[5])) + 1)
        redis.call('SET', base .. ':g:' .. t .. ':' .. c, '1', 'PX', ARGV[2])
        redis.call('SET', KEYS[1], 's1\0' .. t .. '\0' .. LIFE .. '\0' .. t .. '\0' .. c .. '\0' .. ARGV[3] .. '\0\0' .. '0\0',
          'PX', ARGV[4])
        return t
      end
    end
  else
    -- No record: a new one starts its tokens above the server's clock in
    -- µs (and the floor). Unless the server is younger than a grant
    -- (START) or the epoch key is not there to say that no flush wiped
    -- grants since its writing (the full script's flushed), nothing holds
    -- the mutex back.
    local c, span = ARGV[1], tonumber(ARGV[2])
    local clk = redis.call('TIME')
    local now = tonumber(clk[1]) * 1000 + math.floor(tonumber(clk[2]) / 1000)
    local free = not GUARD
    if GUARD and now >= START + span then
      local e = redis.call('GET', KEYS[2])
      free = e and string.match(e, '^%d+$') and tonumber(e) <= now
    end
    if free then
      local t = string.format('%d', math.max(tonumber(clk[1]) * 1000000 + tonumber(clk[2]), tonumber(ARGV[5])) + 1)
      redis.call('SET', string.sub(KEYS[1], 1, -3) .. ':g:' .. t .. ':' .. c, '1', 'PX', ARGV[2])
      redis.call('SET', KEYS[1], 's1\0' .. t .. '\0' .. LIFE .. '\0' .. t .. '\0' .. c .. '\0' .. ARGV[3] .. '\0\0' .. '0\0',
        'PX', ARGV[4])
      return t
    end
  end
end
