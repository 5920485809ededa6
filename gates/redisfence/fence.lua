#!lua
-- lease-fence: the fence gate inside Redis. The fence check, the raise of
-- the floor, the refusal log and the caller's write run as this one script,
-- so nothing can come between them. Go's gates/redisfence embeds this file
-- and JavaScript's lease-fence/redis sends it from wasm/js/gate-texts.mjs,
-- generated from it: the same text (test/gates/texts.test.mjs).
--
-- KEYS: 1 the floor (a hash: fence, holder, rejections), 2 the rejection
-- log (a list, five elements per refusal), 3 this commit's marker when it
-- has one, then the keys the caller's commands declare. All are in one
-- hash slot.
-- ARGV: 1 holder, 2 fence (decimal), 3 max rejections kept, 4 marker time
-- to live (ms; 0: no marker, KEYS[3] is the first of the caller's keys),
-- 5 number of commands, then each command as its number of strings
-- followed by the strings.
--
-- The marker (at most once, asked for by the caller) says how the commit
-- ended, for a retry of the same script or a caller whose reply was lost;
-- without it the script writes nothing but the floor, the log and the
-- caller's commands.
--
-- Replies: {'ok'}; {'stale', seq, admittedFence, admittedHolderId};
-- {'invalid', command, reason} (nothing changed); {'failed', command,
-- error} (the floor was raised, the commands before this one ran, it and
-- those after it did not); {'replay', marker} (this commit already ran:
-- the marker says how it ended); {'corrupt', key, reason} (one of the
-- gate's own keys holds what the gate did not write: nothing changed).
local floorKey, logKey = KEYS[1], KEYS[2]
local holder, fence, maxRej, ttl, n = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4], tonumber(ARGV[5])
local markKey, firstKey = nil, 3
if ttl ~= '0' then
  markKey, firstKey = KEYS[3], 4
  local seen = redis.call('GET', markKey)
  if seen then return {'replay', seen} end
end
local function mark(v)
  if markKey then redis.call('SET', markKey, v, 'PX', ttl) end
end

-- Every command is checked before anything changes: it must exist, be
-- allowed in a script, have the right number of arguments, name at least
-- one key, and only declared keys. For 51 core commands that exist and are
-- allowed in scripts in every Redis from 7.0 on, their arity and where
-- their keys are (COMMAND INFO's arity, first key, last key, step; a test
-- checks these against the server's) are written here, so the script does
-- not ask the server: COMMAND INFO's long answer and COMMAND GETKEYS were
-- most of a commit's work on the server. Any other command is asked about.
-- The list is one string constant (a concatenation of literals would be
-- built again on every call: a third of the script's CPU); each entry
-- follows a space and precedes a space or a line's end.
local known = [[
 APPEND:3:1:1:1 DECR:2:1:1:1 DECRBY:3:1:1:1 DEL:-2:1:-1:1 EXPIRE:-3:1:1:1 EXPIREAT:-3:1:1:1
 GETDEL:2:1:1:1 GETEX:-2:1:1:1 GETSET:3:1:1:1 HDEL:-3:1:1:1 HINCRBY:4:1:1:1 HINCRBYFLOAT:4:1:1:1
 HMSET:-4:1:1:1 HSET:-4:1:1:1 HSETNX:4:1:1:1 INCR:2:1:1:1 INCRBY:3:1:1:1 INCRBYFLOAT:3:1:1:1
 LINSERT:5:1:1:1 LMOVE:5:1:2:1 LPOP:-2:1:1:1 LPUSH:-3:1:1:1 LPUSHX:-3:1:1:1 LREM:4:1:1:1
 LSET:4:1:1:1 LTRIM:4:1:1:1 MSET:-3:1:-1:2 MSETNX:-3:1:-1:2 PERSIST:2:1:1:1 PEXPIRE:-3:1:1:1
 PEXPIREAT:-3:1:1:1 PSETEX:4:1:1:1 RPOP:-2:1:1:1 RPUSH:-3:1:1:1 RPUSHX:-3:1:1:1 SADD:-3:1:1:1
 SET:-3:1:1:1 SETEX:4:1:1:1 SETNX:3:1:1:1 SETRANGE:4:1:1:1 SMOVE:4:1:2:1 SREM:-3:1:1:1
 UNLINK:-2:1:-1:1 XADD:-5:1:1:1 XDEL:-3:1:1:1 XTRIM:-4:1:1:1 ZADD:-4:1:1:1 ZINCRBY:4:1:1:1
 ZREM:-3:1:1:1 ZREMRANGEBYRANK:4:1:1:1 ZREMRANGEBYSCORE:4:1:1:1
]]
local declared = {}
for i = firstKey, #KEYS do declared[KEYS[i]] = true end
local cmds, at = {}, 6
for c = 1, n do
  local argc = tonumber(ARGV[at])
  local cmd = {}
  for j = 1, argc do cmd[j] = ARGV[at + j] end
  at = at + argc + 1
  local arity, first, last, step
  if string.match(cmd[1], '^%a+$') then
    local name = ' ' .. string.upper(cmd[1]) .. ':'
    local i = string.find(known, name, 1, true)
    if i then arity, first, last, step = string.match(known, '^(%-?%d+):(%d+):(%-?%d+):(%d+)%s', i + #name) end
  end
  local keys
  if arity then
    arity, first, last, step = tonumber(arity), tonumber(first), tonumber(last), tonumber(step)
    if (arity > 0 and argc ~= arity) or (arity < 0 and argc < -arity) or (step > 1 and (argc - first) % step ~= 0) then
      return {'invalid', c, 'has the wrong number of arguments'}
    end
    if last < 0 then last = argc + last end
    keys = {}
    for i = first, last, step do keys[#keys + 1] = cmd[i + 1] end
  else
    local info = redis.call('COMMAND', 'INFO', cmd[1])[1]
    if not info then return {'invalid', c, 'is not a command this server knows'} end
    for _, flag in ipairs(info[3]) do
      if flag == 'noscript' or (type(flag) == 'table' and flag.ok == 'noscript') then
        return {'invalid', c, 'is not allowed in a script'}
      end
    end
    keys = redis.pcall('COMMAND', 'GETKEYS', unpack(cmd))
    if keys.err then return {'invalid', c, keys.err} end
  end
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
  mark('stale:' .. seq .. ':' .. floor .. ':' .. floorHolder)
  return {'stale', seq, floor, floorHolder}
end
if tonumber(fence) > tonumber(floor) or floorHolder == '' then
  redis.call('HSET', floorKey, 'fence', fence, 'holder', holder)
end
for c = 1, n do
  local r = redis.pcall(unpack(cmds[c]))
  if type(r) == 'table' and r.err then
    mark('failed:' .. c .. ':' .. r.err)
    return {'failed', c, r.err}
  end
end
mark('ok')
return {'ok'}
