#!lua
-- lease-fence: the fence gate inside Redis. The fence check, the raise of
-- the floor, the refusal log and the caller's write run as this one script,
-- so nothing can come between them. Go's gates/redisfence and JavaScript's
-- lease-fence/redis send this same text (a test checks they are equal).
--
-- KEYS: 1 the floor (a hash: fence, holder, rejections), 2 the rejection
-- log (a list, five elements per refusal), 3 this commit's marker, then the
-- keys the caller's commands declare. All are in one hash slot.
-- ARGV: 1 holder, 2 fence (decimal), 3 max rejections kept, 4 marker time
-- to live (ms), 5 number of commands, then each command as its number of
-- strings followed by the strings.
--
-- Replies: {'ok'}; {'stale', seq, admittedFence, admittedHolder};
-- {'invalid', command, reason} (nothing changed); {'failed', command,
-- error} (the floor was raised, the commands before this one ran, it and
-- those after it did not); {'replay', marker} (this commit already ran:
-- the marker says how it ended); {'corrupt', key, reason} (one of the
-- gate's own keys holds what the gate did not write: nothing changed).
local floorKey, logKey, markKey = KEYS[1], KEYS[2], KEYS[3]
local seen = redis.call('GET', markKey)
if seen then return {'replay', seen} end

local holder, fence, maxRej, ttl, n = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4], tonumber(ARGV[5])

-- Every command is checked before anything changes: it must exist, be
-- allowed in a script, name at least one key, and only declared keys.
-- Commands that exist and are allowed in scripts in every Redis from 7.0
-- on skip the question to COMMAND INFO, whose long answer was the largest
-- part of a commit's work on the server.
local scriptSafe = ' APPEND DECR DECRBY DEL EXPIRE EXPIREAT GETDEL GETEX GETSET HDEL HINCRBY HINCRBYFLOAT HMSET HSET HSETNX ' ..
  'INCR INCRBY INCRBYFLOAT LINSERT LMOVE LPOP LPUSH LPUSHX LREM LSET LTRIM MSET MSETNX PERSIST PEXPIRE PEXPIREAT PSETEX ' ..
  'RPOP RPUSH RPUSHX SADD SET SETEX SETNX SETRANGE SMOVE SREM UNLINK XADD XDEL XTRIM ZADD ZINCRBY ZREM ZREMRANGEBYRANK ZREMRANGEBYSCORE '
local declared = {}
for i = 4, #KEYS do declared[KEYS[i]] = true end
local cmds, at = {}, 6
for c = 1, n do
  local argc = tonumber(ARGV[at])
  local cmd = {}
  for j = 1, argc do cmd[j] = ARGV[at + j] end
  at = at + argc + 1
  if not string.find(scriptSafe, ' ' .. string.upper(cmd[1]) .. ' ', 1, true) then
    local info = redis.call('COMMAND', 'INFO', cmd[1])[1]
    if not info then return {'invalid', c, 'is not a command this server knows'} end
    for _, flag in ipairs(info[3]) do
      if flag == 'noscript' or (type(flag) == 'table' and flag.ok == 'noscript') then
        return {'invalid', c, 'is not allowed in a script'}
      end
    end
  end
  local keys = redis.pcall('COMMAND', 'GETKEYS', unpack(cmd))
  if keys.err then return {'invalid', c, keys.err} end
  for _, k in ipairs(keys) do
    if not declared[k] then return {'invalid', c, 'touches a key the write did not declare: ' .. k} end
  end
  cmds[c] = cmd
end

-- The gate's own keys are checked before anything changes too: the floor
-- must be a hash whose fence and refusal count are decimal numbers, and
-- the log (written only by a refusal) a list of whole entries.
local cur = redis.pcall('HMGET', floorKey, 'fence', 'holder', 'rejections')
if cur.err then return {'corrupt', floorKey, cur.err} end
local floor, floorHolder = cur[1] or '0', cur[2] or ''
if not string.match(floor, '^%d+$') or (cur[3] and not string.match(cur[3], '^%d+$')) then
  return {'corrupt', floorKey, 'its fence or rejections field is not a decimal number'}
end
if tonumber(fence) < tonumber(floor) then
  local n = redis.pcall('LLEN', logKey)
  if type(n) ~= 'number' then return {'corrupt', logKey, n.err} end
  if n % 5 ~= 0 then return {'corrupt', logKey, 'is not a list of whole refusals'} end
  local seq = redis.call('HINCRBY', floorKey, 'rejections', 1)
  redis.call('RPUSH', logKey, seq, holder, fence, floorHolder, floor)
  redis.call('LTRIM', logKey, -5 * maxRej, -1)
  redis.call('SET', markKey, 'stale:' .. seq .. ':' .. floor .. ':' .. floorHolder, 'PX', ttl)
  return {'stale', seq, floor, floorHolder}
end
if tonumber(fence) > tonumber(floor) or floorHolder == '' then
  redis.call('HSET', floorKey, 'fence', fence, 'holder', holder)
end
for c = 1, n do
  local r = redis.pcall(unpack(cmds[c]))
  if type(r) == 'table' and r.err then
    redis.call('SET', markKey, 'failed:' .. c .. ':' .. r.err, 'PX', ttl)
    return {'failed', c, r.err}
  end
end
redis.call('SET', markKey, 'ok', 'PX', ttl)
return {'ok'}
