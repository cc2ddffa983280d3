-- observe.lua: ARGV = retention ms. Flags the record so that grants and
-- releases publish for observers (the flag clears itself when a message
-- finds nobody listening), and makes a live grant's key a hash, so that
-- its release runs the release script (see lib.lua's watched). A mutex
-- without a record gets a stub, which an acquire treats as no record at
-- all.
local raw = redis.call('GET', KEYS[1])
if raw then
  local r = decode(raw, KEYS[1])
  watched(r, KEYS[1], left(r, KEYS[1]))
  if not r.o then
    r.o = true
    redis.call('SET', KEYS[1], encode(r), 'KEEPTTL')
  end
  return 1
end
local r = stub()
r.o = true
write(r, tonumber(ARGV[1]))
return 1
