#!lua flags=no-writes
-- lease-fence: a page of a resource's rejection log, read in one step so
-- that a refusal trimming the log meanwhile cannot shift the page. Go's
-- gates/redisfence and JavaScript's lease-fence/redis send this same text,
-- this file (see fence.lua).
--
-- KEYS: 1 the rejection log (a list, five elements per refusal, their
-- sequence numbers consecutive). ARGV: 1 after (a sequence number), 2 limit.
-- Reply: the elements of at most limit refusals whose sequence number is
-- above after, oldest first.
local first = redis.call('LINDEX', KEYS[1], 0)
if not first then return {} end
local skip = tonumber(ARGV[1]) + 1 - tonumber(first)
if skip < 0 then skip = 0 end
return redis.call('LRANGE', KEYS[1], skip * 5, (skip + tonumber(ARGV[2])) * 5 - 1)
