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
local holder, fence, ttl, n = ARGV[1], ARGV[2], ARGV[4], tonumber(ARGV[5])
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
-- follows a space and precedes a space or a line's end. The commands most
-- writes use come first, as the lookup reads the list from its start.
local known = [[
 SET:-3:1:1:1 HSET:-4:1:1:1 DEL:-2:1:-1:1 INCR:2:1:1:1 INCRBY:3:1:1:1 EXPIRE:-3:1:1:1
 PEXPIRE:-3:1:1:1 LPUSH:-3:1:1:1 RPUSH:-3:1:1:1 SADD:-3:1:1:1 ZADD:-4:1:1:1 XADD:-5:1:1:1
 UNLINK:-2:1:-1:1 HDEL:-3:1:1:1 HINCRBY:4:1:1:1 SREM:-3:1:1:1 ZREM:-3:1:1:1 LPOP:-2:1:1:1
 RPOP:-2:1:1:1 MSET:-3:1:-1:2 APPEND:3:1:1:1 DECR:2:1:1:1 DECRBY:3:1:1:1 EXPIREAT:-3:1:1:1
 GETDEL:2:1:1:1 GETEX:-2:1:1:1 GETSET:3:1:1:1 HINCRBYFLOAT:4:1:1:1 HMSET:-4:1:1:1
 HSETNX:4:1:1:1 INCRBYFLOAT:3:1:1:1 LINSERT:5:1:1:1 LMOVE:5:1:2:1 LPUSHX:-3:1:1:1
 LREM:4:1:1:1 LSET:4:1:1:1 LTRIM:4:1:1:1 MSETNX:-3:1:-1:2 PERSIST:2:1:1:1 PEXPIREAT:-3:1:1:1
 PSETEX:4:1:1:1 RPUSHX:-3:1:1:1 SETEX:4:1:1:1 SETNX:3:1:1:1 SETRANGE:4:1:1:1 SMOVE:4:1:2:1
 XDEL:-3:1:1:1 XTRIM:-4:1:1:1 ZINCRBY:4:1:1:1 ZREMRANGEBYRANK:4:1:1:1
 ZREMRANGEBYSCORE:4:1:1:1
]]
-- The caller's keys: compared one by one when few, made a set when many
-- (making it costs more than a few comparisons).
local nkeys = #KEYS
local declared
if nkeys - firstKey >= 8 then
  declared = {}
  for i = firstKey, nkeys do declared[KEYS[i]] = true end
end
local function undeclared(k)
  if declared then return not declared[k] end
  for i = firstKey, nkeys do
    if KEYS[i] == k then return false end
  end
  return true
end
-- num reads the list's number at p, one digit after an optional '-' (the
-- test of the list checks it keeps to that; tonumber would cost more than
-- the rest of the check), and gives the position of the next.
local function num(p)
  local b = string.byte(known, p)
  if b == 45 then return 48 - string.byte(known, p + 1), p + 3 end
  return b - 48, p + 2
end
-- Command c's strings are ARGV[firsts[c]] (its name) to ARGV[lasts[c]].
local firsts, lasts, at = {}, {}, 6
for c = 1, n do
  local s = at + 1
  at = s + tonumber(ARGV[at])
  local argc, name = at - s, ARGV[s]
  -- " NAME:" found in the list is one of its entries if NAME holds no
  -- ':' (one that does could span two: "SET:-3:1:1:1 SETEX").
  local p
  if not string.find(name, ':', 1, true) then
    local entry = ' ' .. string.upper(name) .. ':'
    p = string.find(known, entry, 1, true)
    if p then p = p + #entry end
  end
  if p then
    local arity, first, last, step
    arity, p = num(p)
    first, p = num(p)
    last, p = num(p)
    step = num(p)
    if (arity > 0 and argc ~= arity) or (arity < 0 and argc < -arity) or (step > 1 and (argc - first) % step ~= 0) then
      return {'invalid', c, 'has the wrong number of arguments'}
    end
    if last < 0 then last = argc + last end
    for i = first, last, step do
      local k = ARGV[s + i]
      if undeclared(k) then return {'invalid', c, 'touches a key the write did not declare: ' .. k} end
    end
  else
    local info = redis.call('COMMAND', 'INFO', name)[1]
    if not info then return {'invalid', c, 'is not a command this server knows'} end
    for _, flag in ipairs(info[3]) do
      if flag == 'noscript' or (type(flag) == 'table' and flag.ok == 'noscript') then
        return {'invalid', c, 'is not allowed in a script'}
      end
    end
    local keys = redis.pcall('COMMAND', 'GETKEYS', unpack(ARGV, s, at - 1))
    if keys.err then return {'invalid', c, keys.err} end
    for _, k in ipairs(keys) do
      if undeclared(k) then return {'invalid', c, 'touches a key the write did not declare: ' .. k} end
    end
  end
  firsts[c], lasts[c] = s, at - 1
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
local fenceN, floorN = tonumber(fence), tonumber(floor)
if fenceN < floorN then
  local n = redis.pcall('LLEN', logKey)
  if type(n) ~= 'number' then return {'corrupt', logKey, n.err} end
  if n % 5 ~= 0 then return {'corrupt', logKey, 'is not a list of whole refusals'} end
  local seq = redis.call('HINCRBY', floorKey, 'rejections', 1)
  redis.call('RPUSH', logKey, seq, holder, fence, floorHolder, floor)
  redis.call('LTRIM', logKey, -5 * tonumber(ARGV[3]), -1)
  mark('stale:' .. seq .. ':' .. floor .. ':' .. floorHolder)
  return {'stale', seq, floor, floorHolder}
end
if fenceN > floorN or floorHolder == '' then
  redis.call('HSET', floorKey, 'fence', fence, 'holder', holder)
end
for c = 1, n do
  local r = redis.pcall(unpack(ARGV, firsts[c], lasts[c]))
  if type(r) == 'table' and r.err then
    mark('failed:' .. c .. ':' .. r.err)
    return {'failed', c, r.err}
  end
end
mark('ok')
return {'ok'}
