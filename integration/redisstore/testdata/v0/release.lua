-- release.lua: ARGV = contender, token ("0" only withdraws), hand-off
-- window ms, publish command, retention ms. Returns 1 when the grant
-- ended, else 0.
local c, tok, win, cmd, keep = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4], tonumber(ARGV[5])
local raw = RAW -- read by the fast path
if not raw then return 0 end
local r = decode(raw, KEYS[1])
if r.q then dequeue(c) end
local done = tok ~= '0' and r.owner == c and r.tok == tok and redis.call('DEL', gkey(tok, c)) == 1
if done then
  -- The record keeps naming the owner of a grant that is gone, unless
  -- someone waits or observes.
  if not (r.q or r.o) then return 1 end
  r.owner, r.hc, r.hu = '', '', 0
  local now = clock()
  local h, nxt, w
  if r.q then h, nxt, w = handoff(r, now, win) end
  publish(r, cmd, wake('r', h or '', nxt, w or 0))
  write(r, math.max(keep, r.hu - now))
  return 1
end
if r.hu == 0 then return 0 end
local now = clock()
local l = left(r, KEYS[1])
if settle(r, now, win, cmd, l > 0) then
  if l > 0 then rewrite(r) else write(r, math.max(keep, r.hu - now)) end
end
return 0
