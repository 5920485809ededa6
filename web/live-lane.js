// One lane of a live run (live.js): its coordinator, agents and resource,
// run with real timers, its events in the model's own form.

import { script, checkEvent, commitMisuse, pushGrant, writeEvent, laneOf, newer, COORDINATOR, HOLDERS, RESOURCE, agentKeys } from './model.js';
import { HOLDER_KEY } from './scenario.js';
import { plainRejection } from './lane-state.js';

const MAX_ATTEMPTS = 6;

/**
 * What delayed a run beyond its script, in real milliseconds: the latest a
 * timer woke after its time (the page not scheduled: a loaded machine),
 * the slowest round trip of a lease call, the longest restart (instant in
 * the model). Shown with the comparison; body[data-live-delay] (and the
 * scale k, body[data-live-scale]) for tests.
 */
export class Meter {
  max = 0;

  note(ms) {
    this.max = Math.max(this.max, ms);
  }
}

// sleep resolves after ms (real); with meter, it notes how late its timer
// woke (the page's thread not scheduled in time).
function sleep(ms, signal, meter) {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(t);
      reject(signal.reason);
    };
    const due = performance.now() + Math.max(0, ms);
    const t = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      meter?.note(performance.now() - due);
      resolve();
    }, Math.max(0, ms));
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

function parseJSON(text) {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}

async function post(path, body, signal) {
  const res = await fetch(path, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body), signal });
  const v = parseJSON(await res.text());
  if (!res.ok) throw new Error(v?.error?.message ?? `${path} answered ${res.status}`);
  return v;
}


/**
 * One lane of a live run: its coordinator, agents (each with a
 * LeaseServiceClient on a clock of the page's performance.now), its
 * resource (a FenceGate in the fenced lane, a plain object in the naive
 * one), and the events so far.
 */
export class LiveLane {
  constructor({ lib, svc, scenario, mode, k, signal, runId, backend, meter }) {
    Object.assign(this, { lib, svc, s: scenario, mode, k, signal, runId, backend, meter });
    this.fenced = mode === 'fenced';
    this.events = [];
    this.gens = [];
    this.epoch = 0;
    this.genOfReq = new Map();
    this.sentAt = new Map();
    this.reqNames = new Map();
    this.sent = new Set();
    this.maxFence = 0;
    this.wids = 0;
    this.lastFloor = scenario.floor;
    this.errors = [];
    this.pending = [];
    this.resource = { value: null, by: null };
  }

  async connect() {
    if (this.backend === 'native') {
      const { id } = await post('/live/native/start', { ttlMillis: this.s.ttl * this.k }, this.signal);
      this.coordId = id;
      this.base = `${location.origin}/live/native/${id}`;
      this.resourceName = RESOURCE;
    } else {
      this.base = `${location.origin}/live/worker`;
      this.resourceName = `playground-${this.runId}-${this.mode}-0/${RESOURCE}`;
    }
    this.gateResource = this.resourceName;
    this.gate = this.fenced ? new this.lib.FenceGate(this.gateResource, this.s.floor > 0 ? { initialFloor: this.s.floor } : undefined) : null;
  }

  close() {
    if (this.coordId) {
      const id = this.coordId;
      this.coordId = null;
      post(`/live/native/${id}/stop`, {}).catch(() => {});
    }
  }

  now() {
    return (performance.now() - this.t0) / this.k;
  }

  stamp() {
    return Math.round(this.now());
  }

  emit(e) {
    const ev = { seq: this.events.length, ...e };
    this.events.push(ev);
    return ev;
  }

  reqName(id) {
    if (!this.reqNames.has(id)) this.reqNames.set(id, `r${this.reqNames.size + 1}`);
    return this.reqNames.get(id);
  }

  // Scenario time of a reading of the page's clock (the agents' clocks read it).
  virtual(ms) {
    return Math.round((ms - this.t0) / this.k);
  }

  until(t) {
    return sleep(this.t0 + t * this.k - performance.now(), this.signal, this.meter);
  }

  wait(ms) {
    return sleep(ms * this.k, this.signal, this.meter);
  }

  /** The lane so far, in the model's shape (copies: the run goes on). */
  lane(now) {
    const events = this.events.map((e) => ({ ...e }));
    if (now !== null) for (const e of events) if (e.kind === 'send' && e.arrive === null) e.arrive = Math.max(e.t, Math.min(now, e.t + e.up));
    return laneOf(this, events, this.gens.map((g) => ({ ...g })), this.maxFence);
  }

  /** One call that changes nothing (a release of a lease nobody holds), to open the connections. */
  async warm() {
    // On the lane's own resource: the Worker's first call to a Durable Object creates it.
    const body = { requestId: `warm-${this.runId}-${this.mode}`, resource: this.resourceName, holderId: 'warm', fence: 1, secret: 'warm-up-only-not-a-lease-secret-xxxxxxxxxx' };
    await fetch(`${this.base}/v1/release`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body), signal: this.signal }).then((r) => r.text()).catch(() => {});
  }

  async run(t0) {
    this.t0 = t0;
    this.agents = {};
    for (const key of agentKeys(this.s)) {
      const holderId = HOLDERS[key];
      const clock = this.lib.createClock(holderId, () => performance.now());
      const ag = { key, holderId, clock, lease: null, naive: null, plan: { up: 0, down: 0, lose: 0, timeout: 0 } };
      const lose = script(this.s).find((th) => th.actor === key)?.steps.find((st) => st.lose);
      ag.svc = new this.svc.LeaseServiceClient({
        baseURL: this.base,
        holderId,
        clock,
        clockSkewMillis: this.s.skew * this.k,
        fetch: this.fetchFor(ag),
        attempts: 4,
        // Only the reply the scenario loses ends its attempt after the
        // scenario's timeout (fetchFor); an attempt that is merely slow (a
        // loaded machine) gets all this time. A lost reply's request is
        // sent again at once, as in the model.
        attemptTimeoutMillis: 5000 + 3 * this.k * 1000,
        backoff: lose ? () => 0 : undefined,
      });
      this.agents[key] = ag;
    }
    await sleep(this.t0 - performance.now(), this.signal);
    const threads = script(this.s).map((th) =>
      this.thread(th).catch((err) => {
        if (this.signal.aborted) throw this.signal.reason;
        this.errors.push(`${th.actor}: ${err?.message ?? err}`);
        this.emit({ t: this.stamp(), actor: th.actor, kind: 'give-up', what: 'live', error: String(err?.message ?? err).slice(0, 200) });
      }),
    );
    await Promise.all(threads);
    await Promise.allSettled(this.pending);
    if (this.signal.aborted) throw this.signal.reason;
  }

  async thread(th) {
    for (const step of th.steps) {
      if (step.at !== undefined) await this.until(step.at);
      if (this.signal.aborted) throw this.signal.reason;
      if (th.actor === COORDINATOR) {
        await this.restart(step);
        continue;
      }
      const ag = this.agents[th.actor];
      switch (step.op) {
        case 'acquire':
          if (!(await this.acquire(ag, step))) return;
          break;
        case 'renew':
          if (!(await this.renew(ag, step))) return;
          break;
        case 'check':
          if (!this.check(ag)) return;
          break;
        case 'model':
          if (step.ms === 0 && step.quiet0) break;
          this.emit({ t: this.stamp(), actor: ag.key, kind: 'model', until: this.stamp() + step.ms, ms: step.ms });
          await this.wait(step.ms);
          break;
        case 'write':
          this.write(ag, step);
          break;
        case 'awrite': {
          const p = this.writeAsync(ag, step);
          if (step.detach) this.pending.push(p);
          else await p;
          break;
        }
        default:
          throw new Error(`unknown step ${step.op}`);
      }
    }
  }

  // The fetch an agent's LeaseServiceClient sends with: the scenario's
  // latency each way, the reply lost where the scenario loses it, and an
  // event for each thing that happens on the wire.
  fetchFor(ag) {
    return async (url, init) => {
      const op = url.slice(url.lastIndexOf('/') + 1);
      const body = JSON.parse(init.body);
      const plan = ag.plan;
      const again = this.sent.has(body.requestId);
      this.sent.add(body.requestId);
      const name = this.reqName(body.requestId);
      if (body.sentAt) this.sentAt.set(body.requestId, this.virtual(body.sentAt.millis));
      if (op === 'release') return fetch(url, init);
      const what = op === 'renew' ? 'renewal' : 'acquire';
      if (again) this.emit({ t: this.stamp(), actor: ag.key, kind: 'timeout', req: name, after: plan.timeout });
      const sentReal = performance.now();
      const send = this.emit({ t: this.stamp(), actor: ag.key, kind: 'send', to: COORDINATOR, arrive: null, up: plan.up, what, req: name, again, sentAt: this.sentAt.get(body.requestId) });
      await sleep(plan.up * this.k, init.signal, this.meter);
      const a = performance.now();
      const res = await fetch(url, init);
      const text = await res.text();
      const b = performance.now();
      this.meter.note(b - a);
      const at = Math.round((a + b) / 2 - this.t0) / this.k;
      send.arrive = Math.round(at);
      this.processed(ag, what, body, res.status, text, Math.round(at), name);
      const lose = plan.lose > 0 && !again;
      await sleep(plan.down * this.k, init.signal, this.meter);
      if (lose) {
        plan.lose--;
        this.emit({ t: this.stamp(), actor: ag.key, kind: 'lost', from: COORDINATOR, departed: Math.round(at), req: name });
        // Never answered: the agent gives up on it at the scenario's
        // timeout from its send (at once if the round trip took longer),
        // and its client sends the request again.
        await sleep(sentReal + plan.timeout * this.k - performance.now(), init.signal);
        throw new Error(`the scenario lost the reply to ${name}`);
      }
      const ok = parseJSON(text)?.ok === true;
      this.emit({ t: this.stamp(), actor: ag.key, kind: 'reply', from: COORDINATOR, departed: Math.round(at), req: name, ok });
      return new Response(text, { status: res.status, headers: { 'content-type': res.headers.get('content-type') ?? 'application/json' } });
    };
  }

  // What the coordinator answered, as the model's coordinator events.
  processed(ag, what, body, status, text, t, name) {
    const v = parseJSON(text);
    if (status !== 200 || !v) {
      this.errors.push(`${ag.key}'s ${what} ${name}: the coordinator answered ${status} ${String(v?.error?.code ?? text).slice(0, 120)}`);
      return;
    }
    const ev = { t, actor: COORDINATOR, from: ag.key, req: name, what };
    if (v.ok && v.grant) {
      const g = v.grant;
      const holder = HOLDER_KEY[g.holderId] ?? g.holderId;
      const until = Math.round(t + g.ttlMillis / this.k);
      this.maxFence = Math.max(this.maxFence, g.fence);
      let gen = this.gens.find((x) => x.epoch === this.epoch && x.fence === g.fence && x.holder === holder);
      const prev = this.gens.filter((x) => x.epoch === this.epoch).at(-1);
      if (!gen && what === 'acquire') {
        gen = { id: this.gens.length, epoch: this.epoch, holder, fence: g.fence, start: t, end: until };
        this.gens.push(gen);
        const reassignedFrom = prev && prev.holder !== holder ? prev.holder : null;
        this.emit({ ...ev, kind: 'grant', holder, fence: g.fence, until, reassignedFrom, issuedFence: this.maxFence });
        if (this.s.preset === 'push') this.push(g, t);
      } else if (what === 'renewal' && gen) {
        gen.end = until;
        this.emit({ ...ev, kind: 'extend', holder, fence: g.fence, until, issuedFence: this.maxFence });
      } else if (gen) {
        this.emit({ ...ev, kind: 'replay', holder, fence: g.fence, until, issuedFence: this.maxFence });
      }
      if (gen) this.genOfReq.set(body.requestId, gen.id);
    } else if (v.ok === false && v.reason === 'expired') {
      this.emit({ ...ev, kind: 'refuse-renewal', issuedFence: this.maxFence });
    } else if (v.ok === false) {
      this.emit({ ...ev, kind: 'deny', heldBy: v.heldBy, retryAfter: Math.round(v.retryAfterMillis / this.k), issuedFence: this.maxFence });
    }
  }

  // The push preset: the page hands the new token to the gate as the
  // coordinator's grant comes back (the coordinator has no push channel).
  push(g, t) {
    pushGrant(this, this.gateResource, g, t);
  }

  async acquire(ag, step) {
    for (let attempt = 1; ; attempt++) {
      ag.plan = { up: step.up, down: step.down, lose: attempt === 1 ? step.lose ?? 0 : 0, timeout: step.timeout ?? 0 };
      try {
        const lease = await ag.svc.acquire(this.resourceName, { signal: this.signal });
        this.took(ag, lease, 'acquire');
        return true;
      } catch (err) {
        if (this.signal.aborted) throw this.signal.reason;
        if (err instanceof this.svc.LeaseDeniedError && attempt < MAX_ATTEMPTS) {
          await sleep(Math.ceil(err.retryAfterMillis) + this.k, this.signal, this.meter);
          continue;
        }
        if (!(err instanceof this.svc.LeaseDeniedError)) this.errors.push(`${ag.key}'s acquire: ${err?.message ?? err}`);
        this.emit({ t: this.stamp(), actor: ag.key, kind: 'give-up', what: 'acquire' });
        return false;
      }
    }
  }

  async renew(ag, step) {
    if (!ag.lease) {
      this.emit({ t: this.stamp(), actor: ag.key, kind: 'give-up', what: 'renewal' });
      return false;
    }
    ag.plan = { up: step.up, down: step.down, lose: 0, timeout: 0 };
    try {
      const lease = await ag.svc.renew(ag.lease, { signal: this.signal });
      this.took(ag, lease, 'renewal');
    } catch (err) {
      if (this.signal.aborted) throw this.signal.reason;
      if (!(err instanceof this.svc.LeaseExpiredError)) throw err;
      this.emit({ t: this.stamp(), actor: ag.key, kind: 'renewal-refused', expiresAt: this.fenced ? null : this.virtual(ag.naive.expiresAt.millis) });
    }
    return true;
  }

  // A grant arrived: the agent's lease (and, naive, its expiresAt).
  took(ag, lease, what) {
    ag.lease = lease;
    ag.gen = this.genOfReq.get(lease.grant.requestId);
    const gen = this.gens[ag.gen];
    const t = this.stamp();
    const base = { t, actor: ag.key, kind: 'lease', what, gen: ag.gen, fence: lease.token.fence, coordinatorUntil: gen?.end };
    if (this.fenced) {
      this.emit({ ...base, deadline: this.virtual(lease.deadline.millis), sentAt: this.sentAt.get(lease.grant.requestId), ttl: Math.round(lease.grant.ttlMillis / this.k), skew: this.s.skew });
    } else {
      if (what === 'renewal' && ag.naive) ag.naive.renewed();
      else ag.naive = this.lib.createNaiveLease(ag.clock, lease.grant.ttlMillis);
      this.emit({ ...base, deadline: this.virtual(ag.naive.expiresAt.millis), ttl: Math.round(lease.grant.ttlMillis / this.k) });
    }
  }

  // Whether the agent goes on after its check.
  check(ag) {
    const e = this.emit(checkEvent(this, ag, this.stamp(), (x) => this.virtual(x.millis)));
    return e.result !== 'none' && (e.advisory || e.result === 'valid');
  }

  // The token the gate is shown: the lease's, for the gate's resource (the
  // same name, unless a Worker restart moved the lane to a fresh object).
  token(ag) {
    const t = ag.lease.token;
    return t.resource === this.gateResource ? t : { resource: this.gateResource, holderId: t.holderId, fence: t.fence };
  }

  write(ag, step) {
    const t = this.stamp();
    const gen = this.gens[ag.gen];
    this.emit(writeEvent(this, ag, this.fenced ? this.token(ag) : null, step, t, !(gen && gen.end > t)));
  }

  // As the model's writeAsync, with a store call of real (scaled) time.
  writeAsync(ag, step) {
    const t = this.stamp();
    const wid = this.wids++;
    const fence = ag.lease.token.fence;
    const base = { actor: ag.key, wid, gen: ag.gen, value: step.value, async: true, ms: step.ms, calledAt: t };
    let began = null;
    const land = (floorBefore) => {
      const now = this.stamp();
      const before = this.resource.value;
      const beforeBy = this.resource.by;
      this.resource.value = step.value;
      this.resource.by = ag.key;
      const overtaken = this.events.some((e) => e.kind === 'write' && e.landed && e.actor !== ag.key && e.t > began && newer(this.gens, e.gen, ag.gen));
      const gen = this.gens[ag.gen];
      const stale = !(gen && gen.end > began) || overtaken;
      this.emit({ ...base, t: now, kind: 'write', landed: true, fence: this.fenced ? fence : null, began, before, beforeBy, stale, overtaken, floorBefore, floor: this.fenced ? this.gate.floor : undefined });
    };
    if (!this.fenced) {
      began = t;
      this.emit({ ...base, t, kind: 'write-call', fence: null, queued: false });
      return this.wait(step.ms).then(() => land(undefined));
    }
    if (step.tryCommit) commitMisuse(this, this.token(ag), { t, actor: ag.key, wid, fence });
    const floorAtCall = this.gate.floor;
    const fn = async () => {
      began = this.stamp();
      if (began !== t) {
        const floorBefore = this.lastFloor;
        this.lastFloor = this.gate.floor;
        this.emit({ ...base, t: began, kind: 'write-begin', fence, floorBefore, floor: this.gate.floor });
      }
      await this.wait(step.ms);
      land(this.gate.floor);
    };
    const done = this.gate.commitAsync(this.token(ag), fn, { signal: this.signal });
    this.emit({ ...base, t, kind: 'write-call', fence, queued: began === null, floorBefore: floorAtCall, floor: this.gate.floor });
    this.lastFloor = this.gate.floor;
    return done.catch((err) => {
      if (this.signal.aborted) throw this.signal.reason;
      if (!(err instanceof this.lib.StaleFenceError)) throw err;
      const now = this.stamp();
      const gen = this.gens[ag.gen];
      this.emit({ ...base, t: now, kind: 'write', landed: false, fence, began: null, stale: !(gen && gen.end > now), floorBefore: this.gate.floor, floor: this.gate.floor, rejection: plainRejection(err.rejection) });
    });
  }

  // The coordinator restarts: native, the dev server kills it and starts it
  // again (-memory: it forgets every lease and starts fences over); the
  // Worker, a fresh Durable Object stands in. Then, for a startFence, the
  // resource is acquired and released that many times.
  async restart(step) {
    const began = performance.now();
    try {
      await this.restartNow(step);
    } finally {
      this.meter.note(performance.now() - began);
    }
  }

  async restartNow(step) {
    const t = this.stamp();
    const issued = this.maxFence;
    this.epoch++;
    for (const g of this.gens) {
      if (g.epoch < this.epoch && g.end > t) {
        g.end = t;
        g.forgotten = true;
      }
    }
    this.emit({ t, actor: COORDINATOR, kind: 'restart', persisted: step.startFence > 0, startFence: step.startFence, issuedBefore: issued });
    if (this.backend === 'native') await post(`/live/native/${this.coordId}/restart`, {}, this.signal);
    else this.resourceName = `playground-${this.runId}-${this.mode}-${this.epoch}/${RESOURCE}`;
    if (step.startFence > 0) {
      const pump = new this.svc.LeaseServiceClient({ baseURL: this.base, holderId: 'restart', clock: this.lib.createClock('restart', () => performance.now()) });
      for (let i = 0; i < step.startFence; i++) {
        const l = await pump.acquire(this.resourceName, { signal: this.signal });
        await pump.release(l, { signal: this.signal });
      }
    }
    this.maxFence = step.startFence;
  }
}
