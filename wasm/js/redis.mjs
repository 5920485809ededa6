// lease-fence/redis: the fence gate inside Redis, from JavaScript. The
// fence check, the raise of the floor, the refusal log and the caller's
// write run as one Lua script on the server (the same script, keys and
// meaning as Go's gates/redisfence), so nothing can come between them and a
// Go writer and a JavaScript writer share one floor.
//
// It takes a client of the `redis` package (createClient() or
// createCluster(), connected); it does not import it.
import { InvalidArgumentError, isStaleFence, LeaseFenceError } from './errors.mjs';
import {
  checkId, checkSignal, checkToken, DEFAULT_MAX_REJECTIONS, FenceStoreError, MAX_MAX_REJECTIONS, MAX_REJECTIONS_PAGE, OutcomeUnknownError, pageOptions,
  rejection, signalOf, staleError,
} from './gate-common.mjs';

export { FenceStoreError, isStaleFence, MAX_REJECTIONS_PAGE, OutcomeUnknownError };

/** Limits on one write. */
export const MAX_COMMANDS = 256;
export const MAX_KEYS = 256;
export const MAX_ARGS_PER_COMMAND = 1024;

// fence.lua:start
const SCRIPT = `#!lua
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
-- Replies: {'ok'}; {'stale', seq, admittedFence, admittedHolderId};
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
-- allowed in a script, have the right number of arguments, name at least
-- one key, and only declared keys. For 51 core commands that exist and are
-- allowed in scripts in every Redis from 7.0 on, their arity and where
-- their keys are (COMMAND INFO's arity, first key, last key, step; a test
-- checks these against the server's) are written here, so the script does
-- not ask the server: COMMAND INFO's long answer and COMMAND GETKEYS were
-- most of a commit's work on the server. Any other command is asked about.
local known = ' APPEND:3:1:1:1 DECR:2:1:1:1 DECRBY:3:1:1:1 DEL:-2:1:-1:1 EXPIRE:-3:1:1:1 EXPIREAT:-3:1:1:1 ' ..
  'GETDEL:2:1:1:1 GETEX:-2:1:1:1 GETSET:3:1:1:1 HDEL:-3:1:1:1 HINCRBY:4:1:1:1 HINCRBYFLOAT:4:1:1:1 ' ..
  'HMSET:-4:1:1:1 HSET:-4:1:1:1 HSETNX:4:1:1:1 INCR:2:1:1:1 INCRBY:3:1:1:1 INCRBYFLOAT:3:1:1:1 LINSERT:5:1:1:1 ' ..
  'LMOVE:5:1:2:1 LPOP:-2:1:1:1 LPUSH:-3:1:1:1 LPUSHX:-3:1:1:1 LREM:4:1:1:1 LSET:4:1:1:1 LTRIM:4:1:1:1 ' ..
  'MSET:-3:1:-1:2 MSETNX:-3:1:-1:2 PERSIST:2:1:1:1 PEXPIRE:-3:1:1:1 PEXPIREAT:-3:1:1:1 PSETEX:4:1:1:1 ' ..
  'RPOP:-2:1:1:1 RPUSH:-3:1:1:1 RPUSHX:-3:1:1:1 SADD:-3:1:1:1 SET:-3:1:1:1 SETEX:4:1:1:1 SETNX:3:1:1:1 ' ..
  'SETRANGE:4:1:1:1 SMOVE:4:1:2:1 SREM:-3:1:1:1 UNLINK:-2:1:-1:1 XADD:-5:1:1:1 XDEL:-3:1:1:1 XTRIM:-4:1:1:1 ' ..
  'ZADD:-4:1:1:1 ZINCRBY:4:1:1:1 ZREM:-3:1:1:1 ZREMRANGEBYRANK:4:1:1:1 ZREMRANGEBYSCORE:4:1:1:1 '
local declared = {}
for i = 4, #KEYS do declared[KEYS[i]] = true end
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
    if i then arity, first, last, step = string.match(known, '^(%-?%d+):(%d+):(%-?%d+):(%d+) ', i + #name) end
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
`;
// fence.lua:end

// page.lua:start
const PAGE_SCRIPT = `#!lua flags=no-writes
-- lease-fence: a page of a resource's rejection log, read in one step so
-- that a refusal trimming the log meanwhile cannot shift the page. Go's
-- gates/redisfence and JavaScript's lease-fence/redis send this same text.
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
`;
// page.lua:end

/** The Lua script the gate runs for every commit and admit (needs Redis 7). */
export const script = SCRIPT;

/**
 * A write was admitted (the floor raised to `fence`) and its command
 * `index` failed as it ran: the commands before it ran, it and the ones
 * after it did not. Redis does not undo them, so the floor stays raised.
 * `written` is 'partly'.
 */
export class CommandError extends LeaseFenceError {
  constructor(message, options) {
    super(message, options && 'cause' in options ? { cause: options.cause } : undefined);
    this.resource = options?.resource ?? '';
    this.fence = options?.fence ?? 0;
    this.index = options?.index ?? -1;
    this.command = options?.command ?? '';
    this.written = 'partly';
  }
}
Object.defineProperty(CommandError.prototype, 'name', { value: 'CommandError', writable: true, configurable: true });

/**
 * The hash tag of resource: `{resource}`, with %, { and } written as %25,
 * %7B and %7D, so any resource name makes a tag of its own.
 */
export function redisTag(resource) {
  checkId(resource, 'resource');
  return `{${resource.replace(/[%{}]/g, (c) => ({ '%': '%25', '{': '%7B', '}': '%7D' })[c])}}`;
}

/** A key for the caller's data of resource, in its hash slot: `{resource}:name`. */
export function redisKey(resource, name) {
  if (typeof name !== 'string') throw new InvalidArgumentError('lease-fence/redis: name must be a string', 'name');
  return `${redisTag(resource)}:${name}`;
}

const encoder = new TextEncoder();

/** The Redis Cluster hash slot of key (CRC16/XMODEM of its hash tag, mod 16384). */
export function redisSlot(key) {
  let b = encoder.encode(key);
  const i = b.indexOf(0x7b);
  if (i >= 0) {
    const j = b.indexOf(0x7d, i + 1);
    if (j > i + 1) b = b.subarray(i + 1, j);
  }
  let crc = 0;
  for (const x of b) {
    crc ^= x << 8;
    for (let k = 0; k < 8; k++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
  }
  return crc & 16383;
}

// A commit's marker id: 64 random bits drawn once per process, then a
// counter, 32 hex digits like Go's random ones. Unique across processes
// without drawing random bytes for every commit (getRandomValues took tens
// of microseconds a commit in a profile).
let markerPrefix;
let markerSeq = 0n;
function markerId() {
  markerPrefix ??= Array.from(crypto.getRandomValues(new Uint8Array(8)), (x) => x.toString(16).padStart(2, '0')).join('');
  markerSeq += 1n;
  return markerPrefix + markerSeq.toString(16).padStart(16, '0');
}

const shas = new Map();
function scriptSha(text) {
  if (!shas.has(text)) {
    shas.set(text, crypto.subtle.digest('SHA-1', encoder.encode(text)).then((d) =>
      Array.from(new Uint8Array(d), (x) => x.toString(16).padStart(2, '0')).join('')));
  }
  return shas.get(text);
}

// runScript sends EVALSHA, and EVAL when the server does not have the
// script yet (as go-redis's Script.Run does).
async function runScript(client, text, keys, args) {
  const hash = await scriptSha(text);
  try {
    return await client.evalSha(hash, { keys, arguments: args });
  } catch (err) {
    if (!String(err?.message).startsWith('NOSCRIPT')) throw err;
    return client.eval(text, { keys, arguments: args });
  }
}

const corrupt = (key, reason, cause) => Object.assign(new FenceStoreError(
  `lease-fence/redis: the gate's key ${JSON.stringify(key)} holds what the gate did not write (${reason}); nothing was changed`,
  { op: 'commit', cause }), { key });
const wrongType = (key, err) => (String(err?.message).startsWith('WRONGTYPE') ? corrupt(key, err.message, err) : null);

function hasClass(err, name) {
  for (let p = err; p && p !== Error.prototype; p = Object.getPrototypeOf(p)) {
    if (p.constructor?.name === name) return true;
  }
  return false;
}

// sentNothing: the script was never sent, or Redis answered an error
// instead of running it.
const sentNothing = (err) => hasClass(err, 'ErrorReply') || hasClass(err, 'ClientClosedError') ||
  hasClass(err, 'ClientOfflineError') || hasClass(err, 'ConnectionTimeoutError') || err?.code === 'ECONNREFUSED';

const arg = (argument, reason) => new InvalidArgumentError(`lease-fence/redis: ${argument} ${reason}`, argument);

/**
 * Opens the gate on client (a connected client or cluster of the `redis`
 * package). Options: prefix (default 'lease-fence:', no braces),
 * maxRejections (refusals kept per resource, default 1000),
 * markerTtlMillis (how long a commit's marker is kept, default 60000).
 * Sends nothing.
 */
export function openRedisFence(client, options) {
  if (typeof client !== 'object' || client === null || typeof client.evalSha !== 'function' || typeof client.eval !== 'function') {
    throw arg('client', 'must be a client of the redis package (with eval and evalSha)');
  }
  if (options !== undefined && (typeof options !== 'object' || options === null)) {
    throw arg('options', 'must be an object such as { prefix, maxRejections }');
  }
  const { prefix = 'lease-fence:', maxRejections = 0, markerTtlMillis = 60_000 } = options ?? {};
  if (typeof prefix !== 'string' || prefix === '' || prefix.length > 128 || /[{}]/.test(prefix)) {
    throw arg('options.prefix', "must be a string of 1 to 128 characters without '{' or '}'");
  }
  if (!Number.isInteger(maxRejections) || maxRejections < 0 || maxRejections > MAX_MAX_REJECTIONS) {
    throw arg('options.maxRejections', `must be from 1 to ${MAX_MAX_REJECTIONS}, or 0 for the default`);
  }
  if (!Number.isSafeInteger(markerTtlMillis) || markerTtlMillis < 1000) {
    throw arg('options.markerTtlMillis', 'must be an integer of at least 1000');
  }
  return new RedisFence(client, prefix, maxRejections || DEFAULT_MAX_REJECTIONS, markerTtlMillis);
}

/** A fence gate kept in Redis. Made by openRedisFence. */
class RedisFence {
  #client;
  #prefix;
  #maxRej;
  #ttl;

  constructor(client, prefix, maxRej, ttl) {
    this.#client = client;
    this.#prefix = prefix;
    this.#maxRej = maxRej;
    this.#ttl = ttl;
  }

  #base(resource) {
    return `${this.#prefix}${redisTag(resource)}:`;
  }

  /**
   * Runs write.commands (each [name, ...args], at least one) inside the
   * gate's script after the fence check. write.keys lists every key they
   * touch, all in the resource's hash slot (redisKey names them). Resolves
   * when every command ran; rejects with StaleFenceError (nothing ran; the
   * refusal is logged), InvalidArgumentError (nothing changed),
   * CommandError (admitted; a command failed as it ran), FenceStoreError
   * (nothing happened) or OutcomeUnknownError. options.signal: an aborted
   * signal rejects with signal.reason before anything is sent (a script
   * that was sent runs to its end).
   */
  async commit(token, write, options) {
    checkToken(token);
    if (typeof write !== 'object' || write === null || !Array.isArray(write.commands) || write.commands.length === 0) {
      throw arg('write.commands', 'must hold at least one command (use admit to raise the floor without writing)');
    }
    const signal = signalOf(options, 'lease-fence/redis: commit');
    return this.#run(token, write, signal);
  }

  /** Raises the floor of token's resource without writing; an older token is refused and logged. */
  async admit(token, options) {
    checkToken(token);
    return this.#run(token, null, signalOf(options, 'lease-fence/redis: admit'));
  }

  /**
   * The highest fence admitted for resource (0 if none has been). A floor
   * key that is not the gate's hash rejects with FenceStoreError (with
   * `key`).
   */
  async floor(resource) {
    checkId(resource, 'resource');
    const key = `${this.#base(resource)}floor`;
    let v;
    try {
      v = await this.#client.hGet(key, 'fence');
    } catch (err) {
      throw wrongType(key, err) ?? new FenceStoreError(`lease-fence/redis: reading the floor: ${err?.message ?? err}`, { op: 'reading the floor', cause: err });
    }
    if (v != null && !/^\d+$/.test(v)) throw corrupt(key, 'its fence field is not a decimal number');
    return v == null ? 0 : Number(v);
  }

  /**
   * The newest refusals for resource (at most maxRejections), oldest first.
   * With options { afterSeq, limit }: a page, those whose seq is above
   * afterSeq (default 0), at most limit (1 to MAX_REJECTIONS_PAGE), read in
   * one step so that a refusal trimming the log cannot shift it; pass the
   * last seq of a page as afterSeq for the next, until a page is shorter
   * than limit.
   */
  async rejections(resource, options) {
    checkId(resource, 'resource');
    const page = pageOptions(options, 'lease-fence/redis: rejections');
    const key = `${this.#base(resource)}rejections`;
    let v;
    try {
      v = page
        ? await runScript(this.#client, PAGE_SCRIPT, [key], [String(page.afterSeq), String(page.limit)])
        : await this.#client.lRange(key, 0, -1);
    } catch (err) {
      throw wrongType(key, err) ?? new FenceStoreError(`lease-fence/redis: reading rejections: ${err?.message ?? err}`, { op: 'reading rejections', cause: err });
    }
    if (v.length % 5 !== 0) throw corrupt(key, 'is not a list of whole refusals');
    const out = [];
    for (let i = 0; i + 5 <= v.length; i += 5) {
      if (![0, 2, 4].every((j) => /^\d+$/.test(v[i + j]))) throw corrupt(key, `refusal ${i / 5} has a field that is not a decimal number`);
      out.push(rejection(v[i], resource, v[i + 1], v[i + 2], v[i + 3], v[i + 4]));
    }
    return out;
  }

  async #run(token, write, signal) {
    const base = this.#base(token.resource);
    const id = markerId();
    const mark = `${base}commit:${id}`;
    const keys = [`${base}floor`, `${base}rejections`, mark];
    const args = [token.holderId, String(token.fence), String(this.#maxRej), String(this.#ttl), '0'];
    if (write !== null) this.#addWrite(token.resource, base, keys, args, write);
    checkSignal(signal);
    let reply;
    try {
      reply = await runScript(this.#client, SCRIPT, keys, args);
    } catch (err) {
      if (sentNothing(err)) throw new FenceStoreError(`lease-fence/redis: commit did not happen: ${err?.message ?? err}`, { op: 'commit', cause: err });
      return this.#settle(token, mark, err);
    }
    return this.#outcome(token, reply, write);
  }

  #addWrite(resource, base, keys, args, write) {
    const wkeys = write.keys ?? [];
    if (!Array.isArray(wkeys)) throw arg('write.keys', 'must be an array of keys');
    if (write.commands.length > MAX_COMMANDS) throw arg('write.commands', `must hold at most ${MAX_COMMANDS} commands`);
    if (wkeys.length > MAX_KEYS) throw arg('write.keys', `must hold at most ${MAX_KEYS} keys`);
    const slot = redisSlot(base);
    wkeys.forEach((k, i) => {
      const a = `write.keys[${i}]`;
      if (typeof k !== 'string' || k === '') throw arg(a, 'must be a non-empty string');
      if (k.startsWith(base)) throw arg(a, `is in the gate's own namespace ${JSON.stringify(base)}`);
      if (redisSlot(k) !== slot) throw arg(a, `${JSON.stringify(k)} is not in the hash slot of resource ${JSON.stringify(resource)}: name it with redisKey`);
      keys.push(k);
    });
    args[4] = String(write.commands.length);
    write.commands.forEach((c, i) => {
      const a = `write.commands[${i}]`;
      if (!Array.isArray(c) || c.length === 0 || typeof c[0] !== 'string' || c[0] === '') throw arg(a, 'must start with a command name');
      if (c.length > MAX_ARGS_PER_COMMAND) throw arg(a, `must hold at most ${MAX_ARGS_PER_COMMAND} strings`);
      args.push(String(c.length));
      for (const x of c) {
        if (typeof x !== 'string' && typeof x !== 'number' && !(x instanceof Uint8Array)) throw arg(a, 'must hold strings, numbers or bytes');
        args.push(typeof x === 'number' ? String(x) : x);
      }
    });
  }

  // #settle settles a commit whose reply was lost: marks it aborted unless
  // the script already marked it, then reads how it ended.
  async #settle(token, mark, cause) {
    for (let i = 0; i < 5; i++) {
      try {
        const set = await this.#client.set(mark, 'aborted', { NX: true, PX: this.#ttl });
        if (set === 'OK') throw new FenceStoreError(`lease-fence/redis: commit did not happen: ${cause?.message ?? cause}`, { op: 'commit', cause });
        const v = await this.#client.get(mark);
        if (v != null) return this.#marker(token, v, cause);
      } catch (err) {
        if (err instanceof LeaseFenceError) throw err;
      }
      await new Promise((resolve) => setTimeout(resolve, 10 * 2 ** i));
    }
    throw new OutcomeUnknownError(`lease-fence/redis: the commit's outcome is unknown: ${cause?.message ?? cause}`, { cause });
  }

  #outcome(token, reply, write) {
    const s = (i) => (Array.isArray(reply) && reply[i] != null ? String(reply[i]) : '');
    switch (s(0)) {
      case 'ok': return undefined;
      case 'stale': throw staleError(rejection(s(1), token.resource, token.holderId, token.fence, s(3), s(2)));
      case 'invalid': throw arg(`write.commands[${Number(s(1)) - 1}]`, s(2));
      case 'failed': throw this.#commandError(token, write, Number(s(1)) - 1, s(2));
      case 'replay': return this.#marker(token, s(1), null);
      case 'corrupt': throw corrupt(s(1), s(2));
    }
    throw new FenceStoreError('lease-fence/redis: unexpected reply from the script', { op: 'commit' });
  }

  #marker(token, v, cause) {
    const [kind, ...rest] = v.split(':');
    switch (kind) {
      case 'ok': return undefined;
      case 'stale': throw staleError(rejection(rest[0], token.resource, token.holderId, token.fence, rest.slice(2).join(':'), rest[1]));
      case 'failed': throw this.#commandError(token, null, Number(rest[0]) - 1, rest.slice(1).join(':'));
      case 'aborted': throw new FenceStoreError(`lease-fence/redis: commit did not happen: ${cause?.message ?? 'settled as not run'}`, { op: 'commit', cause });
    }
    throw new OutcomeUnknownError(`lease-fence/redis: unknown commit marker ${JSON.stringify(v)}`, { cause });
  }

  #commandError(token, write, index, message) {
    const command = write?.commands?.[index]?.[0] ?? '';
    return new CommandError(`lease-fence/redis: write to ${JSON.stringify(token.resource)} at fence ${token.fence} admitted, ` +
      `but command ${index} ${command} failed (the commands before it ran, the rest did not): ${message}`,
    { resource: token.resource, fence: token.fence, index, command });
  }
}
