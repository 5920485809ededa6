// lease-fence/redis: the fence gate inside Redis, from JavaScript. The
// fence check, the raise of the floor, the refusal log and the caller's
// write run as one Lua script on the server (the same script, keys and
// meaning as Go's gates/redisfence), so nothing can come between them and a
// Go writer and a JavaScript writer share one floor.
//
// It takes a client of the `redis` package (createClient() or
// createCluster(), connected); it does not import it.
import { InvalidArgumentError, isStaleFence, LeaseFenceError } from './errors.mjs';
import { FENCE_LUA, PAGE_LUA } from './gate-texts.mjs';
import {
  checkId, checkSignal, checkToken, DEFAULT_MAX_REJECTIONS, FenceStoreError, MAX_MAX_REJECTIONS, MAX_REJECTIONS_PAGE, OutcomeUnknownError, pageOptions,
  rejection, signalOf, staleError,
} from './gate-common.mjs';

export { FenceStoreError, isStaleFence, MAX_REJECTIONS_PAGE, OutcomeUnknownError };

/** Limits on one write. */
export const MAX_COMMANDS = 256;
export const MAX_KEYS = 256;
export const MAX_ARGS_PER_COMMAND = 1024;

// How many resources' key names a gate keeps made (#keyNames).
const MAX_NAMES = 1024;

// The most strings the commits of one batch (#join) send together; the
// commands are at most MAX_COMMANDS, as in one write.
const MAX_BATCH_STRINGS = 16 * MAX_ARGS_PER_COMMAND;

// The scripts: Go's gates/redisfence/fence.lua and page.lua, the one source
// of their text, brought in by the module make build-wasm and npm pack
// generate from them (scripts/gate-texts.mjs).
const SCRIPT = FENCE_LUA;
const PAGE_SCRIPT = PAGE_LUA;

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

// The SHA-1 of each script: a promise until it is known, then its hex.
const shas = new Map();
function scriptSha(text) {
  if (!shas.has(text)) {
    shas.set(text, crypto.subtle.digest('SHA-1', encoder.encode(text)).then((d) => {
      const hex = Array.from(new Uint8Array(d), (x) => x.toString(16).padStart(2, '0')).join('');
      shas.set(text, hex);
      return hex;
    }));
  }
  return shas.get(text);
}

// runScript sends EVALSHA, and EVAL when the server does not have the
// script yet (as go-redis's Script.Run does).
async function runScript(client, text, keys, args) {
  let hash = scriptSha(text);
  if (typeof hash !== 'string') hash = await hash;
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

// pushCommands appends commands to a script's arguments: each as its number
// of strings, then the strings (numbers written in decimal).
function pushCommands(args, commands) {
  for (const c of commands) {
    args.push(String(c.length));
    for (const x of c) args.push(typeof x === 'number' ? String(x) : x);
  }
}

// sameKeys: a and b list the same keys in the same order.
function sameKeys(a, b) {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

// failure: the error of a commit without a marker whose script failed
// with err: nothing happened, or (the script was sent) nobody knows.
const failure = (err) => (sentNothing(err)
  ? new FenceStoreError(`lease-fence/redis: commit did not happen: ${err?.message ?? err}`, { op: 'commit', cause: err })
  : new OutcomeUnknownError(`lease-fence/redis: the commit's outcome is unknown: ${err?.message ?? err}`, { cause: err }));

const arg = (argument, reason) => new InvalidArgumentError(`lease-fence/redis: ${argument} ${reason}`, argument);

/**
 * Opens the gate on client (a connected client or cluster of the `redis`
 * package). Options: prefix (default 'lease-fence:', no braces),
 * maxRejections (refusals kept per resource, default 1000), atMostOnce
 * (default false; true: each commit writes a marker of its outcome, so a
 * commit whose reply was lost is settled instead of rejecting with
 * OutcomeUnknownError, and a script sent again does not run twice),
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
  const { prefix = 'lease-fence:', maxRejections = 0, atMostOnce = false, markerTtlMillis = 60_000 } = options ?? {};
  if (typeof prefix !== 'string' || prefix === '' || prefix.length > 128 || /[{}]/.test(prefix)) {
    throw arg('options.prefix', "must be a string of 1 to 128 characters without '{' or '}'");
  }
  if (!Number.isInteger(maxRejections) || maxRejections < 0 || maxRejections > MAX_MAX_REJECTIONS) {
    throw arg('options.maxRejections', `must be from 1 to ${MAX_MAX_REJECTIONS}, or 0 for the default`);
  }
  if (typeof atMostOnce !== 'boolean') throw arg('options.atMostOnce', `must be a boolean, got ${typeof atMostOnce}`);
  if (!Number.isSafeInteger(markerTtlMillis) || markerTtlMillis < 1000) {
    throw arg('options.markerTtlMillis', 'must be an integer of at least 1000');
  }
  return new RedisFence(client, prefix, maxRejections || DEFAULT_MAX_REJECTIONS, atMostOnce ? markerTtlMillis : 0);
}

/** A fence gate kept in Redis. Made by openRedisFence. */
class RedisFence {
  #client;
  #prefix;
  #maxRej;
  #ttl; // the markers' time to live; 0 without atMostOnce
  #args; // the script's ARGV[3] and ARGV[4], the same for every call
  // The gate's key names of the resources written lately (#names).
  #names = new Map();
  // The commits waiting to be sent as one script (#join), or null.
  #batch = null;

  constructor(client, prefix, maxRej, ttl) {
    this.#client = client;
    this.#prefix = prefix;
    this.#maxRej = maxRej;
    this.#ttl = ttl;
    this.#args = [String(maxRej), String(ttl)];
  }

  #base(resource) {
    return `${this.#prefix}${redisTag(resource)}:`;
  }

  // #keyNames gives resource's key prefix, floor and log keys and hash slot,
  // made once for each of the last MAX_NAMES resources written rather
  // than for every commit (a commit names them all).
  #keyNames(resource) {
    let n = this.#names.get(resource);
    if (n === undefined) {
      const base = this.#base(resource);
      n = { base, floor: `${base}floor`, log: `${base}rejections`, slot: redisSlot(base) };
      if (this.#names.size >= MAX_NAMES) this.#names.delete(this.#names.keys().next().value);
      this.#names.set(resource, n);
    }
    return n;
  }

  /**
   * Runs write.commands (each [name, ...args], at least one) inside the
   * gate's script after the fence check. write.keys lists every key they
   * touch, all in the resource's hash slot (redisKey names them). Resolves
   * when every command ran; rejects with StaleFenceError (nothing ran; the
   * refusal is logged), InvalidArgumentError (nothing changed),
   * CommandError (admitted; a command failed as it ran), FenceStoreError
   * (nothing happened) or OutcomeUnknownError. options.signal: an aborted
   * signal rejects with signal.reason before anything is sent; one that
   * aborts while the commit waits for its batch to be sent takes it out
   * of the batch (nothing of it is sent) and rejects with signal.reason;
   * one that aborts once its script was sent rejects at once with
   * OutcomeUnknownError (the script runs to its end, for the batch's other
   * commits). With atMostOnce, a script that was sent is waited for.
   * Commits of one token with the same keys, made together without
   * atMostOnce, share one script (#join).
   */
  async commit(token, write, options) {
    checkToken(token);
    if (typeof write !== 'object' || write === null || !Array.isArray(write.commands) || write.commands.length === 0) {
      throw arg('write.commands', 'must hold at least one command (use admit to raise the floor without writing)');
    }
    const signal = signalOf(options, 'lease-fence/redis: commit');
    if (this.#ttl === 0) return this.#join(token, write, signal);
    this.#flush();
    return this.#run(token, write, signal);
  }

  /** Raises the floor of token's resource without writing; an older token is refused and logged. */
  async admit(token, options) {
    checkToken(token);
    const signal = signalOf(options, 'lease-fence/redis: admit');
    this.#flush();
    return this.#run(token, null, signal);
  }

  /**
   * The highest fence admitted for resource (0 if none has been). A floor
   * key that is not the gate's hash rejects with FenceStoreError (with
   * `key`).
   */
  async floor(resource) {
    checkId(resource, 'resource');
    const key = `${this.#base(resource)}floor`;
    this.#flush();
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
    this.#flush();
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
    const names = this.#keyNames(token.resource);
    const keys = [names.floor, names.log];
    const mark = this.#ttl === 0 ? null : `${names.base}commit:${markerId()}`;
    if (mark !== null) keys.push(mark);
    const args = [token.holderId, String(token.fence), this.#args[0], this.#args[1], '0'];
    if (write !== null) this.#addWrite(token.resource, names, keys, args, write);
    checkSignal(signal);
    let reply;
    try {
      reply = await runScript(this.#client, SCRIPT, keys, args);
    } catch (err) {
      if (mark === null || sentNothing(err)) throw failure(err);
      return this.#settle(token, mark, err);
    }
    return this.#outcome(token, reply, write);
  }

  #addWrite(resource, names, keys, args, write) {
    for (const k of this.#checkWrite(resource, names, write)) keys.push(k);
    args[4] = String(write.commands.length);
    pushCommands(args, write.commands);
  }

  // #checkWrite checks write's keys and commands as the gate takes them
  // (InvalidArgumentError) and returns its keys.
  #checkWrite(resource, { base, slot }, write) {
    const wkeys = write.keys ?? [];
    if (!Array.isArray(wkeys)) throw arg('write.keys', 'must be an array of keys');
    if (write.commands.length > MAX_COMMANDS) throw arg('write.commands', `must hold at most ${MAX_COMMANDS} commands`);
    if (wkeys.length > MAX_KEYS) throw arg('write.keys', `must hold at most ${MAX_KEYS} keys`);
    for (let i = 0; i < wkeys.length; i++) {
      const k = wkeys[i];
      const a = `write.keys[${i}]`;
      if (typeof k !== 'string' || k === '') throw arg(a, 'must be a non-empty string');
      if (k.startsWith(base)) throw arg(a, `is in the gate's own namespace ${JSON.stringify(base)}`);
      if (redisSlot(k) !== slot) throw arg(a, `${JSON.stringify(k)} is not in the hash slot of resource ${JSON.stringify(resource)}: name it with redisKey`);
    }
    const { commands } = write;
    for (let i = 0; i < commands.length; i++) {
      const c = commands[i];
      const a = `write.commands[${i}]`;
      if (!Array.isArray(c) || c.length === 0 || typeof c[0] !== 'string' || c[0] === '') throw arg(a, 'must start with a command name');
      if (c.length > MAX_ARGS_PER_COMMAND) throw arg(a, `must hold at most ${MAX_ARGS_PER_COMMAND} strings`);
      for (const x of c) {
        if (typeof x !== 'string' && typeof x !== 'number' && !(x instanceof Uint8Array)) throw arg(a, 'must hold strings, numbers or bytes');
      }
    }
    return wkeys;
  }

  // #join adds a commit (no marker) to the gate's batch: the commits of
  // one token, declaring the same keys, made while the batch is open, until
  // the microtask that sends it (8 writers of one holder, woken by one
  // reply, make theirs in one turn). The batch is one script: their
  // commands in order after one check, so each gives the answer it would
  // alone; the ones after a refusal, a refused command or a failed command
  // are sent again alone (see #runBatch). Any other call of the gate sends
  // the open batch first, so that the gate's calls reach Redis in the order
  // they were made. A commit with a signal that aborts leaves its batch if
  // it was not sent yet (rejecting with the signal's reason), else rejects
  // at once with OutcomeUnknownError; the batch goes on for the others.
  #join(token, write, signal) {
    const { resource, holderId, fence } = token;
    const names = this.#keyNames(resource);
    const keys = this.#checkWrite(resource, names, write);
    checkSignal(signal);
    const args = [];
    pushCommands(args, write.commands);
    // write: the command names, what an error names (#commandError).
    const item = { args, count: write.commands.length, write: { commands: write.commands.map((c) => [c[0]]) }, resolve: null, reject: null };
    const done = new Promise((resolve, reject) => { item.resolve = resolve; item.reject = reject; });
    let b = this.#batch;
    if (b === null || b.resource !== resource || b.holderId !== holderId || b.fence !== fence || !sameKeys(b.keys, keys) ||
      b.count + item.count > MAX_COMMANDS || b.strings + args.length > MAX_BATCH_STRINGS) {
      this.#flush();
      b = { resource, holderId, fence, names, keys: [...keys], items: [], count: 0, strings: 0, sent: false };
      this.#batch = b;
      queueMicrotask(() => { if (this.#batch === b) this.#flush(); });
    }
    b.items.push(item);
    b.count += item.count;
    b.strings += args.length;
    if (signal === undefined) return done;
    const onAbort = () => {
      if (!b.sent) {
        b.items.splice(b.items.indexOf(item), 1);
        b.count -= item.count;
        b.strings -= args.length;
        item.reject(signal.reason);
        return;
      }
      const { reason } = signal;
      item.reject(new OutcomeUnknownError(`lease-fence/redis: the commit's outcome is unknown: its signal aborted while its script was in flight: ${reason?.message ?? reason}`, { cause: reason }));
    };
    signal.addEventListener('abort', onAbort, { once: true });
    const off = () => signal.removeEventListener('abort', onAbort);
    done.then(off, off);
    return done;
  }

  // #flush sends the open batch, if any (none if all its commits left).
  #flush() {
    const b = this.#batch;
    if (b === null) return;
    this.#batch = null;
    b.sent = true;
    if (b.items.length === 0) return;
    const token = { resource: b.resource, holderId: b.holderId, fence: b.fence };
    this.#runBatch(token, b).catch((err) => {
      for (const it of b.items) it.reject(err);
    });
  }

  // #runBatch runs the commits of batch b as one script and settles each
  // as #outcome would settle it alone. Its commands are the commits' in
  // order, so the reply names the commit it stopped at: 'stale' (nothing
  // ran) is the first commit's refusal; 'invalid' (nothing ran) is that
  // commit's; 'failed' is that commit's, the ones before it landed. The
  // others the script did not run are sent again alone, as they would
  // have been.
  async #runBatch(token, b) {
    const { items } = b;
    const args = [token.holderId, String(token.fence), this.#args[0], this.#args[1], String(b.count)];
    for (const it of items) for (const x of it.args) args.push(x);
    let reply;
    try {
      reply = await runScript(this.#client, SCRIPT, [b.names.floor, b.names.log, ...b.keys], args);
    } catch (err) {
      for (const it of items) it.reject(failure(err));
      return;
    }
    const settle = (it, r) => {
      try {
        it.resolve(this.#outcome(token, r, it.write));
      } catch (err) {
        it.reject(err);
      }
    };
    const alone = (it) => this.#runBatch(token, { names: b.names, keys: b.keys, items: [it], count: it.count }).catch(it.reject);
    const kind = Array.isArray(reply) ? String(reply[0]) : '';
    if (kind === 'stale') {
      settle(items[0], reply);
      items.slice(1).forEach(alone);
      return;
    }
    if (kind !== 'invalid' && kind !== 'failed') {
      for (const it of items) settle(it, reply);
      return;
    }
    // The commit of the script's command c (1-based), and c in it.
    let c = Number(reply[1]) - 1;
    let i = 0;
    for (; i < items.length - 1 && c >= items[i].count; i++) c -= items[i].count;
    settle(items[i], [kind, String(c + 1), ...reply.slice(2)]);
    items.forEach((it, k) => {
      if (k > i || (k < i && kind === 'invalid')) alone(it);
      else if (k < i) it.resolve();
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
