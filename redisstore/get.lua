-- get.lua: reads the record without changing anything.
-- Returns {owner, token, ttl ms, transition ms}.
local now = clock()
local rec = record()
if rec then return rec end
return {'', '0', 0, held(now, '')}
