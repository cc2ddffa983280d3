-- release.lua: ARGV = contender, token ("0" only withdraws), hand-off
-- window ms, publish command. Returns 1 when the grant ended, else 0.
local c, tok, win, cmd = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4]
local now = clock()
dequeue(c)
local v = redis.call('HMGET', KEYS[1], 'o', 't')
if tok ~= '0' and v[1] == c and v[2] == tok then
  redis.call('DEL', KEYS[1])
  local next = handoff(now, win)
  publish(cmd, 'r|' .. (next or ''))
  return 1
end
settle(now, win, cmd)
return 0
