// LeaseServiceClient: the calls of the coordinator service for one holder.
// Each call is begun with the library's LeaseClient before anything is
// sent (so a lease's deadline is anchored at its first send) and sent by
// the transport (transport.mjs) as one JSON body that every retry repeats.
// The holder secrets live in a private field, never in a message. What each
// method does for its caller is documented once, in ../service-client.d.ts.

// The package's own entry, by name: the host's export condition picks it
// (node, workerd, browser), so this module shares the one instance and the
// one set of classes with the caller's `import … from 'lease-fence'`, and
// loads the wasm the way that entry does.
import { createMonotonicClock, LeaseClient } from 'lease-fence';
import { InvalidArgumentError } from '../errors.mjs';
import { baseURLsOf } from './base-url.mjs';
import { expired, LeaseDeniedError, LeaseServiceError, named } from './errors.mjs';
import { LeaseElection } from './election.mjs';
import { holdOptions, makeHold, withHold } from './hold.mjs';
import { internal, leaseState, ServiceLease } from './lease.mjs';
import { list, listPage, watch } from './list-watch.mjs';
import {
  callOptions, checkOptions, checkResource, checkValue, DEFAULT_MAX_WAIT_MILLIS, isOptions, MAX_FENCE, MAX_WAIT_MILLIS, optionsOf, positive, wholeMillis,
} from './options.mjs';
import { base64url, hex, randomBytes, requestBody } from './protocol.mjs';
import { nodeModules, nodeSender } from './node-http.mjs';
import { defaultBackoff, defaultTimers } from './timers.mjs';
import { FINAL_CODES, MAX_ATTEMPTS, RETRIED_4XX, Transport } from './transport.mjs';

// The most renewals one batch (POST /v1/renewals) carries.
const MAX_RENEWALS = 256;

const CLIENT_OPTIONS = ['baseURL', 'baseURLs', 'leaseClient', 'holderId', 'clock', 'clockSkewMillis', 'fetch', 'transport', 'agent', 'attempts', 'attemptTimeoutMillis', 'timeoutMillis', 'backoff', 'token',
  'maxWaitMillis', 'timers'];
const INSPECT_OPTIONS = ['signal', 'timeoutMillis', 'afterFence', 'waitMillis', 'afterValue'];
const REVOKE_OPTIONS = ['signal', 'timeoutMillis', 'holderId', 'fence'];
const ELECTION_OPTIONS = ['renewEveryMillis'];

// senderOf picks what the client sends its calls with (options.fetch,
// options.transport, options.agent): node:http and node:https with
// keep-alive agents on Node ('auto', the default, or 'node'), fetch
// elsewhere, with options.fetch, or with transport 'fetch'.
function senderOf(f, transport = 'auto', agent) {
  if (transport !== 'auto' && transport !== 'node' && transport !== 'fetch') {
    throw new InvalidArgumentError(`lease-fence: options.transport must be 'auto', 'node' or 'fetch', not ${typeof transport === 'string' ? JSON.stringify(transport) : typeof transport}`, 'options.transport');
  }
  if (f !== undefined) {
    if (typeof f !== 'function') throw new InvalidArgumentError('lease-fence: options.fetch must be a function', 'options.fetch');
    if (transport === 'node' || agent !== undefined) {
      throw new InvalidArgumentError(`lease-fence: options.fetch sends every call itself: it cannot be given with ${agent !== undefined ? 'options.agent' : "transport 'node'"}`, 'options.fetch');
    }
    return f;
  }
  const mods = transport === 'fetch' ? undefined : nodeModules();
  if (mods !== undefined) return nodeSender(mods, agent);
  if (transport === 'node') {
    throw new InvalidArgumentError("lease-fence: options.transport 'node' needs node:http (Node 20.16 or later); this host has fetch", 'options.transport');
  }
  if (agent !== undefined) {
    throw new InvalidArgumentError(`lease-fence: options.agent is for the node transport; ${transport === 'fetch' ? "transport 'fetch' was asked for" : 'this host has no node:http'}`, 'options.agent');
  }
  if (typeof globalThis.fetch !== 'function') {
    throw new InvalidArgumentError('lease-fence: this host has neither node:http nor a global fetch: pass options.fetch', 'options.fetch');
  }
  return globalThis.fetch;
}

export class LeaseServiceClient {
  #transport; // the settings calls are sent with (transport.mjs)
  #lc;
  #maxWait;
  #tools; // what hold and election use: the client's own calls and settings
  // Acquisition record -> its secret. A lease holds its record, this map the
  // secret; a record whose lease ended is dropped from it.
  #secrets = new WeakMap();
  // Set once a coordinator answered that it takes no batch of renewals (a
  // Worker: 501): each renewal is then its own call.
  #noBatch = false;

  constructor(options) {
    if (!isOptions(options)) {
      throw new InvalidArgumentError('lease-fence: LeaseServiceClient takes an options object', 'options');
    }
    checkOptions(options, CLIENT_OPTIONS, 'new LeaseServiceClient');
    const { baseURL, baseURLs, leaseClient, holderId, clock, clockSkewMillis, fetch: f, attemptTimeoutMillis = 5000, timeoutMillis, backoff = defaultBackoff, token,
      maxWaitMillis = DEFAULT_MAX_WAIT_MILLIS, timers = defaultTimers } = options;
    const bases = baseURLsOf(baseURL, baseURLs);
    const { attempts = Math.max(4, bases.length + 1) } = options;
    if (leaseClient !== undefined) {
      if (holderId !== undefined || clock !== undefined || clockSkewMillis !== undefined) {
        throw new InvalidArgumentError('lease-fence: pass either options.leaseClient or holderId/clock/clockSkewMillis, not both', 'options.leaseClient');
      }
      if (!(leaseClient instanceof LeaseClient)) {
        throw new InvalidArgumentError('lease-fence: options.leaseClient must be a LeaseClient', 'options.leaseClient');
      }
      this.#lc = leaseClient;
    } else {
      if (typeof holderId !== 'string') {
        throw new InvalidArgumentError('lease-fence: options.holderId must be a string', 'options.holderId');
      }
      this.#lc = new LeaseClient({ clock: clock ?? createMonotonicClock(holderId), holderId, clockSkewMillis });
    }
    const fetch = senderOf(f, options.transport, options.agent);
    positive(attempts, 'options.attempts', { integer: true, max: MAX_ATTEMPTS });
    positive(attemptTimeoutMillis, 'options.attemptTimeoutMillis');
    if (timeoutMillis !== undefined) positive(timeoutMillis, 'options.timeoutMillis');
    if (typeof backoff !== 'function') {
      throw new InvalidArgumentError('lease-fence: options.backoff must be a function', 'options.backoff');
    }
    const headers = { 'content-type': 'application/json' };
    if (token !== undefined) {
      // Visible ASCII: what a header value may carry without being mangled.
      if (typeof token !== 'string' || !/^[\x21-\x7e]+$/.test(token)) {
        throw new InvalidArgumentError('lease-fence: options.token must be a non-empty string of visible ASCII characters', 'options.token');
      }
      headers.authorization = `Bearer ${token}`;
    }
    this.#maxWait = positive(maxWaitMillis, 'options.maxWaitMillis', { integer: true, max: MAX_WAIT_MILLIS });
    if (!isOptions(timers) || typeof timers.setTimeout !== 'function' || typeof timers.clearTimeout !== 'function') {
      throw new InvalidArgumentError('lease-fence: options.timers must be an object with setTimeout(fn, ms) and clearTimeout(handle)', 'options.timers');
    }
    this.#transport = new Transport({
      bases, fetch, attempts, attemptTimeout: attemptTimeoutMillis, timeout: timeoutMillis, backoff, headers, timers, clock: this.#lc.clock,
    });
    this.#tools = {
      timers, clock: this.#lc.clock, backoff, maxWait: this.#maxWait, timeout: timeoutMillis,
      renew: (lease, opts) => this.#renew(lease, opts),
      renewEach: (leases, opts) => this.#renewEach(leases, opts),
      holds: new Set(), // the client's HeldLeases, whose renewals share calls
      acquire: (resource, opts, waitMillis, value) => this.#acquire(resource, opts, waitMillis, value),
      release: (lease, opts) => this.#release(lease, opts),
    };
  }

  get baseURL() {
    return this.#transport.bases[0];
  }

  get baseURLs() {
    return [...this.#transport.bases];
  }

  get holderId() {
    return this.#lc.holderId;
  }

  get leaseClient() {
    return this.#lc;
  }

  async acquire(resource, options) {
    const opts = callOptions(options, 'client.acquire');
    return (await this.#acquire(resource, opts, 0)).lease;
  }

  // acquire acquires resource, waiting for it up to waitMillis (0: not at
  // all; Infinity: until the call's signal aborts) in calls of at most
  // maxWaitMillis each. Every call is the same acquisition (request id and
  // secret), so the coordinator keeps its place in the queue between them.
  // Resolves to { lease, sentAt } (sentAt: the request's send instant).
  async #acquire(resource, opts, waitMillis, value) {
    const request = this.#lc.beginAcquire(resource);
    const secret = base64url(randomBytes(32));
    const body = requestBody(request, secret, value);
    for (;;) {
      let wait = 0;
      if (waitMillis > 0) {
        wait = this.#maxWait;
        if (waitMillis !== Infinity) wait = Math.min(wait, Math.floor(waitMillis - (this.#lc.clock.now().millis - request.sentAt.millis)));
        wait = Math.max(wait, 0);
      }
      const reply = await this.#transport.send('acquire', wait > 0 ? { ...body, waitMillis: wait } : body, { ...opts, waitMillis: wait });
      if (reply.ok === true) {
        let core;
        try {
          core = this.#lc.completeAcquire(request, reply.grant);
        } catch (e) {
          // The LeaseClient no longer knows the request (it forgets the
          // oldest of more than 4,096 begun and never completed): the
          // grant cannot be made a lease anchored at its send. End it.
          const { resource: r, holderId, fence } = reply.grant;
          this.#transport.send('release', { requestId: hex(randomBytes(16)), resource: r, holderId, fence, secret }, {}).catch(() => {});
          throw e;
        }
        const record = { ended: false };
        this.#secrets.set(record, secret);
        return { lease: new ServiceLease(internal, this, record, core), sentAt: request.sentAt.millis };
      }
      if (reply.reason === 'revoked') {
        throw new LeaseServiceError(`lease-fence: the wait for ${JSON.stringify(request.resource)} was ended by an operator's revoke (its place in the queue was removed)`,
          { code: 'revoked', status: 200, attempts: 1 });
      }
      if (wait === 0) {
        // parseReply admits a refused acquisition only with both fields.
        const { heldBy, retryAfterMillis } = reply;
        throw new LeaseDeniedError(`lease-fence: ${JSON.stringify(request.resource)} is held by ${JSON.stringify(heldBy)} for ${retryAfterMillis} ms more`,
          { resource: request.resource, heldBy, retryAfterMillis });
      }
    }
  }

  async renew(lease, options) {
    const opts = callOptions(options, 'client.renew');
    return (await this.#renew(lease, opts)).lease;
  }

  // renew renews lease; resolves to { lease, sentAt }. With opts.until
  // (holder millis: a hold's loss), its attempts share the time left before
  // it, a fraction each (see #send); client.renew keeps attemptTimeoutMillis,
  // as the caller's own call with its own timeouts.
  async #renew(lease, opts) {
    const record = this.#record(lease, 'renew');
    const request = this.#lc.beginRenewal(lease.lease);
    const body = requestBody(request, this.#secrets.get(record));
    const reply = await this.#transport.send('renew', body, opts);
    if (reply.ok !== true) {
      record.ended = true;
      this.#secrets.delete(record);
      throw expired(lease.token, 'renewal', reply.reason);
    }
    return { lease: new ServiceLease(internal, this, record, this.#lc.completeRenewal(request, reply.grant)), sentAt: request.sentAt.millis };
  }

  async renewEach(leases, options) {
    const opts = callOptions(options, 'client.renewEach');
    if (!Array.isArray(leases)) throw new InvalidArgumentError('lease-fence: renewEach takes an array of leases', 'leases');
    return (await this.#renewEach(leases, opts)).map((r) => (r.error !== undefined ? { error: r.error } : { lease: r.lease }));
  }

  // renewEach renews each of leases; resolves to [{ lease, sentAt } or
  // { error }], one per lease. opts are #renew's (opts.until may be a
  // function: a batch of holds' renewals).
  async #renewEach(leases, opts) {
    const out = new Array(leases.length);
    const items = [];
    for (let i = 0; i < leases.length; i++) {
      try {
        const record = this.#record(leases[i], 'renew');
        const request = this.#lc.beginRenewal(leases[i].lease);
        items.push({ i, record, request, body: requestBody(request, this.#secrets.get(record)) });
      } catch (e) {
        out[i] = { error: e };
      }
    }
    const answer = (it, reply, error) => {
      if (error !== undefined) {
        out[it.i] = { error };
      } else if (reply.ok !== true) {
        it.record.ended = true;
        this.#secrets.delete(it.record);
        out[it.i] = { error: expired(leases[it.i].token, 'renewal', reply.reason) };
      } else {
        try {
          out[it.i] = { lease: new ServiceLease(internal, this, it.record, this.#lc.completeRenewal(it.request, reply.grant)), sentAt: it.request.sentAt.millis };
        } catch (e) {
          out[it.i] = { error: e };
        }
      }
    };
    // apart sends each of list alone; resolves to whether the coordinator
    // answered any (a reply, or an error status).
    const apart = async (list) => {
      let answered = false;
      await Promise.all(list.map(async (it) => {
        let reply;
        try {
          reply = await this.#transport.send('renew', it.body, opts);
        } catch (e) {
          if (e instanceof LeaseServiceError && e.status > 0) answered = true;
          answer(it, undefined, e);
          return;
        }
        answered = true;
        answer(it, reply);
      }));
      return answered;
    };
    const chunks = [];
    for (let k = 0; k < items.length; k += MAX_RENEWALS) chunks.push(items.slice(k, k + MAX_RENEWALS));
    await Promise.all(chunks.map(async (chunk) => {
      let pending = chunk;
      for (let round = 1; pending.length > 0; round++) {
        if (pending.length === 1 || this.#noBatch) {
          await apart(pending);
          return;
        }
        let reply;
        try {
          reply = await this.#transport.send('renewals', { renewals: pending.map((it) => it.body) }, opts);
        } catch (e) {
          if (e instanceof LeaseServiceError && (e.code === 'not_supported' || e.code === 'not_found')) {
            this.#noBatch = true; // a Worker, or a coordinator older than batches
            await apart(pending);
            return;
          }
          if (e instanceof LeaseServiceError && e.code === 'no_answer' && !opts.signal?.aborted) {
            // No answer at all: the network, or (in a browser) a
            // coordinator older than batches whose CORS refuses their
            // preflight. Each alone; if one is answered, batches are not
            // tried again.
            if (await apart(pending)) this.#noBatch = true;
            return;
          }
          for (const it of pending) answer(it, undefined, e);
          return;
        }
        if (reply.results.length !== pending.length) {
          const e = new LeaseServiceError(`lease-fence: a batch of ${pending.length} renewals answered with ${reply.results.length} results`, { code: 'bad_reply', status: 200, attempts: 1 });
          for (const it of pending) answer(it, undefined, e);
          return;
        }
        const again = [];
        pending.forEach((it, j) => {
          const r = reply.results[j];
          if (r.error !== undefined) {
            // This renewal alone met a failure that changed nothing (its
            // resource's store was unavailable): sent again, the same request.
            const st = r.error.status;
            if ((st >= 500 || RETRIED_4XX.has(st)) && !FINAL_CODES.has(r.error.code) && round < this.#transport.attempts && !opts.signal?.aborted) again.push(it);
            answer(it, undefined, r.error);
            return;
          }
          answer(it, r);
        });
        pending = again;
      }
    }));
    return out;
  }

  async release(lease, options) {
    return this.#release(lease, callOptions(options, 'client.release'));
  }

  // release releases lease with the options of #send.
  async #release(lease, opts) {
    const record = this.#record(lease, 'release');
    const { resource, holderId, fence } = lease.token;
    const body = { requestId: hex(randomBytes(16)), resource, holderId, fence, secret: this.#secrets.get(record) };
    const reply = await this.#transport.send('release', body, opts);
    record.ended = true;
    this.#secrets.delete(record);
    if (reply.ok !== true) throw expired(lease.token, 'release', reply.reason);
  }

  async proclaim(lease, value, options) {
    const opts = callOptions(options, 'client.proclaim');
    checkValue(value, 'value');
    const record = this.#record(lease, 'proclaim');
    const { resource, holderId, fence } = lease.token;
    const body = { requestId: hex(randomBytes(16)), resource, holderId, fence, secret: this.#secrets.get(record), value };
    const reply = await this.#transport.send('proclaim', body, opts);
    if (reply.ok !== true) throw expired(lease.token, 'proclaim', reply.reason);
  }

  async revoke(resource, options) {
    const { signal, timeoutMillis, holderId, fence } = optionsOf(options, REVOKE_OPTIONS, 'client.revoke', 'revoke options');
    checkResource(resource, 'resource');
    const body = { resource };
    if (holderId !== undefined) body.holderId = checkResource(holderId, 'options.holderId');
    if (fence !== undefined) {
      body.fence = wholeMillis(fence, 'options.fence', MAX_FENCE);
      if (body.fence === 0) throw new InvalidArgumentError('lease-fence: options.fence must be at least 1', 'options.fence');
    }
    // Sent again after a lost answer only with a fence: without one, a
    // second revoke could end the next holder's lease.
    const reply = await this.#transport.send('revoke', body, { signal, timeoutMillis, attempts: fence === undefined ? 1 : undefined });
    return reply.revoked;
  }

  async hold(resource, options) {
    const opts = holdOptions(options, 'client.hold');
    return makeHold(this, this.#tools, resource, opts);
  }

  async withLease(resource, fn, options) {
    if (typeof fn !== 'function') {
      throw new InvalidArgumentError('lease-fence: withLease takes a function (held) => ... as its second argument', 'fn');
    }
    const opts = holdOptions(options, 'client.withLease');
    return withHold(this, this.#tools, resource, fn, opts);
  }

  async inspect(resource, options) {
    const { signal, timeoutMillis, afterFence, waitMillis, afterValue } = optionsOf(options, INSPECT_OPTIONS, 'client.inspect');
    checkResource(resource, 'resource');
    const body = { resource };
    if (afterFence !== undefined) body.afterFence = wholeMillis(afterFence, 'options.afterFence', MAX_FENCE);
    if (afterValue !== undefined) {
      if (afterFence === undefined) {
        throw new InvalidArgumentError('lease-fence: options.afterValue needs options.afterFence: an inspection waits for the fence or the value to change', 'options.afterValue');
      }
      body.afterValue = checkValue(afterValue, 'options.afterValue');
    }
    if (waitMillis !== undefined) {
      if (afterFence === undefined) {
        throw new InvalidArgumentError('lease-fence: options.waitMillis needs options.afterFence: an inspection waits for the fence to change from it', 'options.waitMillis');
      }
      body.waitMillis = wholeMillis(waitMillis, 'options.waitMillis', MAX_WAIT_MILLIS);
    }
    const reply = await this.#transport.send('inspect', body, { signal, timeoutMillis, waitMillis: body.waitMillis ?? 0 });
    return reply.status;
  }

  election(name, options) {
    const { renewEveryMillis } = optionsOf(options, ELECTION_OPTIONS, 'client.election', 'election options');
    checkResource(name, 'name');
    if (renewEveryMillis !== undefined) positive(renewEveryMillis, 'options.renewEveryMillis');
    return new LeaseElection(internal, this, this.#tools, name, renewEveryMillis);
  }

  #record(lease, what) {
    const { client, record } = lease instanceof ServiceLease ? leaseState(lease) : {};
    if (client !== this) {
      throw new InvalidArgumentError(`lease-fence: ${what} takes a lease acquired through this LeaseServiceClient`, 'lease');
    }
    if (record.ended) throw expired(lease.token, what);
    return record;
  }

  async listPage(options) {
    return listPage(this.#transport, options);
  }

  async *list(options) {
    yield* list(this, options);
  }

  async *watch(options) {
    yield* watch(this.#transport, options);
  }

  toString() {
    return `LeaseServiceClient(${this.#transport.bases.join(' ')}, holder ${JSON.stringify(this.#lc.holderId)})`;
  }
}
named(LeaseServiceClient, 'LeaseServiceClient');
