// Holding a lease: client.hold and withLease, and the HeldLease they give,
// which renews its lease until release(), a loss or its caller's signal.
// Timing is the holder's clock and the client's timers, with the meaning
// of Go's client.Client Hold/Do (service/client/hold.go).
import { InvalidArgumentError } from '../errors.mjs';
import { LeaseExpiredError, LeaseLostError, LeaseReleasedError, LeaseRevokedError, named } from './errors.mjs';
import { disposedBy, internal } from './lease.mjs';
import { callOptions, checkValue, optionsOf, positive, wholeMillis } from './options.mjs';
import { durationText, MAX_TIMER_MILLIS, MIN_RETRY_MILLIS } from './timers.mjs';

// A hold counts its lease lost LOSS_MARGIN before the holder's deadline
// (lossMargin: 5 % of the TTL, at most 250 ms, at least 1 ms), so that a
// loss timer that fires late (by up to that margin) still aborts the signal
// before the deadline. The timer is set for that instant, and the lease
// counts as lost when its firing finds the margin plus DEADLINE_EARLY_MILLIS
// or less left: a host's timer may fire up to a millisecond before its delay
// has passed by the holder's clock, and delays are whole milliseconds.
const LOSS_MARGIN_FRACTION = 0.05;
const MAX_LOSS_MARGIN_MILLIS = 250;
const DEADLINE_EARLY_MILLIS = 1;
// How long the release a hold sends itself when the lease was lost (or the
// hold's signal ended it) may take, retries included.
const ENDING_RELEASE_MILLIS = 2000;

function lossMargin(ttlMillis) {
  return Math.max(DEADLINE_EARLY_MILLIS, Math.min(ttlMillis * LOSS_MARGIN_FRACTION, MAX_LOSS_MARGIN_MILLIS));
}

let ownRelease; // (held) => the release a HeldLease sent itself, or undefined; set in HeldLease's static block
let joinBatch; // (held, first, now, leave) => a member of a batch of renewals, or undefined; set in HeldLease's static block
let takeAnswer; // (held, member, out, err): a batch's answer for held; set in HeldLease's static block

// A hold's renewal not due yet joins another hold's of the same client that
// is, when due within this part of its renewal interval: sent that much
// early at most, and from then on due with it.
const BATCH_WINDOW = 0.25;
const MAX_BATCH = 256;

// renewDue begins the renewal of first, which fell due, with those of the
// client's other holds due within their window, in one call (tools.renewEach:
// POST /v1/renewals). The call's signal aborts once every hold in it has
// ended or taken its answer; its attempts share the time left before the
// earliest loss among the holds still in it.
function renewDue(first, tools) {
  let now;
  try {
    now = tools.clock.now().millis;
  } catch {
    now = undefined;
  }
  const ac = new AbortController();
  let left = 0;
  const leave = (m) => () => {
    if (!m.in) return;
    m.in = false;
    if (--left === 0) ac.abort(new Error('every hold of the batch ended'));
  };
  const members = [];
  const take = (h, isFirst) => {
    const m = joinBatch(h, isFirst, now, leave);
    if (m !== undefined) {
      left++;
      members.push(m);
    }
  };
  take(first, true);
  if (members.length === 0) return;
  for (const h of tools.holds) {
    if (members.length >= MAX_BATCH) break;
    if (h !== first) take(h, false);
  }
  // The earliest loss of the holds still in the batch: its attempts are
  // hedged on that. A pending hold past its loss counts no more: the
  // attempts in flight are awaited for it, without hedges.
  const until = () => {
    let at;
    try {
      at = tools.clock.now().millis;
    } catch {
      at = undefined;
    }
    let u;
    for (const m of members) {
      if (!m.in || (m.pending && (at === undefined || m.lossAt - at <= DEADLINE_EARLY_MILLIS))) continue;
      if (u === undefined || m.lossAt < u) u = m.lossAt;
    }
    return u;
  };
  if (members.length === 1) {
    const [m] = members;
    tools.renew(m.before, { signal: ac.signal, until }).then((out) => takeAnswer(m.held, m, out), (e) => takeAnswer(m.held, m, undefined, e));
    return;
  }
  tools.renewEach(members.map((m) => m.before), { signal: ac.signal, until }).then(
    (results) => results.forEach((r, i) => takeAnswer(members[i].held, members[i], r.error === undefined ? r : undefined, r.error)),
    (e) => members.forEach((m) => takeAnswer(m.held, m, undefined, e)));
}

const HOLD_OPTIONS = ['waitMillis', 'signal', 'renewEveryMillis', 'value'];

// holdOptions checks the options of hold, withLease (what names the call).
export function holdOptions(options, what) {
  const { waitMillis = 0, signal, renewEveryMillis, value } = optionsOf(options, HOLD_OPTIONS, what, `${what} options`);
  wholeMillis(waitMillis, 'options.waitMillis', Number.MAX_SAFE_INTEGER, true);
  if (renewEveryMillis !== undefined) positive(renewEveryMillis, 'options.renewEveryMillis');
  if (value !== undefined) checkValue(value, 'options.value');
  return { waitMillis, signal, renewEveryMillis, value };
}

// makeHold acquires resource through client (tools: the client's own
// calls and settings), waiting as waitMillis says, and starts a
// HeldLease on it. A waited grant whose first renewal is refused (it
// expired at the coordinator before the renewal came: a wait longer than
// the TTL and a slow answer), or lost with no renewal of it succeeded (a
// wait that took most of the TTL, and a slow coordinator; its attempts
// sent are awaited past the loss, then the grant is released), is waited
// for again, for what is left of the wait, as Go's client.Client.Hold
// does.
export async function makeHold(client, tools, resource, opts) {
  let { waitMillis } = opts;
  for (;;) {
    const start = tools.clock.now().millis;
    try {
      return await holdOnce(client, tools, resource, { ...opts, waitMillis });
    } catch (e) {
      if (!(e instanceof LeaseExpiredError || e instanceof LeaseLostError) || waitMillis === 0 || opts.signal?.aborted) throw e;
      if (waitMillis !== Infinity) {
        waitMillis -= tools.clock.now().millis - start;
        if (waitMillis < 1) throw e;
      }
    }
  }
}

async function holdOnce(client, tools, resource, { waitMillis, signal, renewEveryMillis, value }) {
  let { lease, sentAt } = await tools.acquire(resource, { signal }, waitMillis, value);
  const giveUp = (e) => {
    client.release(lease).catch(() => {});
    throw e;
  };
  const ttl = lease.grant.ttlMillis;
  const skew = sentAt + ttl - lease.deadline.millis;
  const every = renewEveryMillis ?? ttl / 3;
  const margin = lossMargin(ttl);
  if (!(every < ttl - skew - margin)) {
    giveUp(new InvalidArgumentError(`lease-fence: options.renewEveryMillis (${every}) must be less than the TTL (${ttl} ms) minus the clock skew (${skew} ms) ` +
      `and the loss margin (${margin} ms), or the lease would lapse between renewals`, 'options.renewEveryMillis'));
  }
  // A grant (one that waited, or a slow answer) is anchored, like any, at
  // the acquisition's send: if it came after its first renewal was due,
  // renew now, so the lease handed over has its time ahead.
  let now;
  try {
    now = tools.clock.now().millis;
  } catch (e) {
    giveUp(e);
  }
  const due = now >= sentAt + every;
  if (due && lease.deadline.millis - margin - now <= DEADLINE_EARLY_MILLIS) {
    // The wait ate the lease's whole time by the holder's clock (it may
    // still be live at the coordinator, which counts from its grant):
    // there is no loss to hedge on.
    try {
      ({ lease, sentAt } = await tools.renew(lease, { signal }));
    } catch (e) {
      giveUp(e);
    }
    return new HeldLease(internal, client, tools, lease, sentAt, every, margin, signal, 1);
  }
  const held = new HeldLease(internal, client, tools, lease, sentAt, every, margin, signal, 0, due);
  if (!due) return held;
  // The hold's first renewal, at once and as every renewal: hedged on the
  // loss of the lease the acquisition made (anchored at its send), tried
  // again sooner if it fails, shared with the client's other holds due.
  // hold resolves once one succeeded; a loss (or the caller's signal) ends
  // the hold, which releases the lease, and rejects.
  if (!held.signal.aborted) {
    renewDue(held, tools);
    await new Promise((resolve) => {
      const settle = () => {
        held.removeEventListener('renewed', settle);
        held.signal.removeEventListener('abort', settle);
        resolve();
      };
      held.addEventListener('renewed', settle);
      held.signal.addEventListener('abort', settle);
    });
  }
  if (!held.signal.aborted) return held;
  if (signal?.aborted) throw signal.reason;
  const reason = held.signal.reason;
  // Refused: the refusal, as a renewal rejects (makeHold waits again).
  throw reason instanceof LeaseLostError && reason.cause instanceof LeaseExpiredError ? reason.cause : reason;
}

// withHold is client.withLease(resource, fn) once its arguments are checked
// (opts: holdOptions's).
export async function withHold(client, tools, resource, fn, opts) {
  const held = await makeHold(client, tools, resource, opts);
  let value, error;
  let failed = false;
  try {
    value = await fn(held);
  } catch (e) {
    failed = true;
    error = e;
  }
  const reason = held.signal.reason;
  const lost = held.signal.aborted && reason instanceof LeaseLostError ? reason : undefined;
  let releaseError;
  try {
    // Ended by a loss or the caller's signal, the hold released the lease
    // itself, within ENDING_RELEASE_MILLIS: its outcome, not a new call.
    await (ownRelease(held) ?? held.release());
  } catch (e) {
    // The caller's own signal ended the hold: its reason is not news.
    if (!(opts.signal?.aborted && e === opts.signal.reason)) releaseError = e;
  }
  const errors = [];
  // fn stopped because of the loss (it threw the signal's reason, or an
  // AbortError caused by it, as node:timers/promises and events.once
  // reject): the loss alone says it.
  const stoppedByLoss = failed && lost !== undefined && (error === lost || (typeof error === 'object' && error !== null && error.cause === lost));
  if (failed && !stoppedByLoss) errors.push(error);
  if (lost) errors.push(lost);
  if (releaseError !== undefined) errors.push(releaseError);
  if (errors.length === 0) return value;
  if (errors.length === 1) throw errors[0];
  const what = [failed && !stoppedByLoss && 'the callback failed', lost && 'the lease was lost while it ran', releaseError !== undefined && 'the release failed'].filter(Boolean);
  throw new AggregateError(errors, `lease-fence: withLease(${JSON.stringify(held.token.resource)}): ${what.join(', and ')}`);
}

export class HoldEvent extends Event {
  constructor(key, type, lease, error = null) {
    if (key !== internal) {
      throw new InvalidArgumentError('lease-fence: HoldEvent objects are dispatched by a HeldLease, not made with new', 'this');
    }
    super(type);
    this.lease = lease;
    this.error = error;
  }
}
named(HoldEvent, 'HoldEvent');

// HeldLease (its contract: ../service-client.d.ts). Every renewal is a new
// request (LeaseClient.beginRenewal), so each deadline is anchored at that
// renewal's own send; renewals are begun renewEveryMillis after the last
// one's send (a third of the TTL by default), a failed one is tried again
// sooner, an attempt unanswered after half the time left before the loss
// gets a hedge beside it, and the one in flight is aborted at the loss. The
// renewals of a client's holds due within a quarter of their interval of
// one another share one call (POST /v1/renewals), each answered on its own.
// Timers are set from the holder's clock for the instants the deadline and
// the next renewal fall on, never by adding intervals; all of them are
// cleared when the hold ends, so a released or lost hold keeps nothing alive.
export class HeldLease extends EventTarget {
  #client;
  #tools;
  #lease; // the current ServiceLease: the last renewal's
  #sentAt; // holder millis: the send of the current lease's request
  #every;
  #margin; // how long before the deadline the lease counts as lost
  #next; // holder millis: when to begin the next renewal
  #ac = new AbortController();
  #outer;
  #onOuter;
  #renewT;
  #lossT;
  #renewing; // the AbortController of the renewal in flight
  #renewals = 0;
  #failure; // the last renewal's failure since the last success
  #done = false;
  #releasing; // the release sent, a promise
  #own; // the release the hold sent itself when it ended without release(), a promise
  // hold has not returned it: its first renewal is not ended by the loss
  // of the lease the acquisition made (nothing ran under it), its attempts
  // in flight are awaited past that loss (without more hedges), and its
  // success is taken then, anchored at its own send
  #pending;

  static {
    ownRelease = (h) => h.#own;
    joinBatch = (h, first, now, leave) => h.#join(first, now, leave);
    takeAnswer = (h, m, out, err) => h.#taken(m, out, err);
  }

  static {
    disposedBy(this, 'release');
  }

  constructor(key, client, tools, lease, sentAt, every, margin, outer, renewals = 0, pending = false) {
    if (key !== internal) {
      throw new InvalidArgumentError('lease-fence: HeldLease objects are made by LeaseServiceClient.hold, not with new', 'this');
    }
    super();
    this.#client = client;
    this.#tools = tools;
    this.#lease = lease;
    this.#sentAt = sentAt;
    this.#every = every;
    this.#margin = margin;
    this.#next = sentAt + every;
    this.#renewals = renewals;
    this.#pending = pending;
    tools.holds.add(this);
    if (outer) {
      this.#outer = outer;
      this.#onOuter = () => this.#endBy(outer.reason);
      if (outer.aborted) {
        this.#endBy(outer.reason);
        return;
      }
      outer.addEventListener('abort', this.#onOuter, { once: true });
    }
    this.#arm();
  }

  get token() {
    return this.#lease.token;
  }

  get lease() {
    return this.#lease;
  }

  get deadline() {
    return this.#lease.deadline;
  }

  get signal() {
    return this.#ac.signal;
  }

  get renewals() {
    return this.#renewals;
  }

  async release(options) {
    callOptions(options, 'held.release');
    if (!this.#done) {
      const { resource, holderId, fence } = this.#lease.token;
      this.#end(new LeaseReleasedError(`lease-fence: the hold on ${JSON.stringify(resource)} (fence ${fence}) was released`, { resource, holderId, fence }));
      this.dispatchEvent(new HoldEvent(internal, 'released', this.#lease));
    }
    if (this.#releasing === undefined) this.#releasing = this.#sendRelease(options);
    const p = this.#releasing;
    try {
      await p;
    } catch (e) {
      if (this.#releasing === p) this.#releasing = undefined;
      throw e;
    }
  }

  dispose(options) {
    return this.release(options);
  }

  #sendRelease(options) {
    return this.#client.release(this.#lease, options).catch((e) => {
      if (!(e instanceof LeaseExpiredError)) throw e;
    });
  }

  // releaseInBackground releases a lease given up (lost at the holder's
  // deadline it may still be live at the coordinator, with others waiting),
  // within ENDING_RELEASE_MILLIS (less if the client's timeoutMillis is), so
  // that withLease and release() settle soon after a loss even when the
  // coordinator does not answer. release() waits for it, or sends again if
  // it failed; withLease waits for it and reports its failure (#own).
  #releaseInBackground() {
    const tools = this.#tools;
    const timeoutMillis = Math.min(ENDING_RELEASE_MILLIS, tools.timeout ?? Infinity);
    let until;
    try {
      until = tools.clock.now().millis + timeoutMillis;
    } catch {
      until = undefined;
    }
    const p = tools.release(this.#lease, { timeoutMillis, until }).catch((e) => {
      if (!(e instanceof LeaseExpiredError)) throw e;
    });
    this.#releasing = p;
    this.#own = p;
    p.catch(() => {
      if (this.#releasing === p) this.#releasing = undefined;
    });
  }

  #after(ms, fn) {
    return this.#tools.timers.setTimeout(fn, Math.min(Math.max(Math.floor(ms), 0), MAX_TIMER_MILLIS));
  }

  #clearTimers() {
    if (this.#renewT !== undefined) this.#tools.timers.clearTimeout(this.#renewT);
    if (this.#lossT !== undefined) this.#tools.timers.clearTimeout(this.#lossT);
    this.#renewT = this.#lossT = undefined;
  }

  // nowOrLose reads the holder's clock; without it the deadline cannot be
  // kept, so the lease is given up (undefined).
  #nowOrLose() {
    try {
      return this.#tools.clock.now().millis;
    } catch (e) {
      this.#lose(e, undefined, true);
      return undefined;
    }
  }

  // arm sets the timers for the deadline and the next renewal from a
  // reading of the holder's clock, or finds the lease lost.
  #arm() {
    const now = this.#nowOrLose();
    if (now === undefined) return;
    const deadline = this.#lease.deadline.millis;
    const lossAt = deadline - this.#margin;
    const timers = this.#tools.timers;
    if (lossAt - now <= DEADLINE_EARLY_MILLIS) {
      if (this.#pending && this.#renewing !== undefined) {
        // hold has not returned, and the first renewal is in flight: its
        // answer decides (#taken arms again).
        if (this.#lossT !== undefined) timers.clearTimeout(this.#lossT);
        this.#lossT = undefined;
        return;
      }
      this.#lose(this.#failure, now);
      return;
    }
    if (this.#lossT !== undefined) timers.clearTimeout(this.#lossT);
    this.#lossT = this.#after(lossAt - now, () => {
      this.#lossT = undefined;
      if (!this.#done) this.#arm();
    });
    if (this.#renewing === undefined) {
      if (this.#renewT !== undefined) timers.clearTimeout(this.#renewT);
      this.#renewT = this.#after(Math.min(this.#next, lossAt) - now, () => {
        this.#renewT = undefined;
        this.#onRenewal();
      });
    }
  }

  #onRenewal() {
    if (this.#done || this.#renewing !== undefined) return;
    renewDue(this, this.#tools);
  }

  // join puts this hold's renewal in a batch being made (renewDue), unless
  // it ended or a renewal is in flight: first (its renewal fell due, or
  // hold renews it at once), or due within BATCH_WINDOW of its interval at
  // now; its renewal timer is then cleared. leave(member) makes what takes
  // it out of the batch.
  #join(first, now, leave) {
    if (this.#done || this.#renewing !== undefined) return undefined;
    const lossAt = this.#lease.deadline.millis - this.#margin;
    if (!first && (now === undefined || Math.min(this.#next, lossAt) - now > this.#every * BATCH_WINDOW)) return undefined;
    if (this.#renewT !== undefined) this.#tools.timers.clearTimeout(this.#renewT);
    this.#renewT = undefined;
    const m = { held: this, before: this.#lease, lossAt, pending: this.#pending, in: true };
    const out = leave(m);
    // What #end aborts: this hold leaves the batch.
    m.ctl = { abort: out };
    this.#renewing = m.ctl;
    return m;
  }

  // taken takes the answer of this hold's renewal in the batch m: out
  // ({ lease, sentAt }) or the failure err.
  #taken(m, out, err) {
    if (this.#renewing === m.ctl) this.#renewing = undefined;
    m.ctl.abort();
    const before = m.before;
    // Ended meanwhile (the end aborted this renewal, or its answer came
    // after): the end releases the lease.
    if (this.#done) return;
    const now = this.#nowOrLose();
    if (now === undefined) return;
    if (out !== undefined) {
      // An answer taken after the lease counted as lost does not revive
      // the hold: the work had to stop by then (the loss timer was late).
      // Before hold returns (#pending) no work ran: the renewed lease,
      // anchored at the renewal's send, is taken (#arm finds it lost if
      // it is).
      if (!this.#pending && before.deadline.millis - this.#margin - now <= DEADLINE_EARLY_MILLIS) {
        this.#lose(this.#failure, now);
        return;
      }
      this.#pending = false;
      if (out.lease.deadline.millis > this.#lease.deadline.millis) {
        this.#lease = out.lease;
        this.#sentAt = out.sentAt;
        this.#next = out.sentAt + this.#every;
      }
      this.#renewals++;
      this.#failure = undefined;
      this.dispatchEvent(new HoldEvent(internal, 'renewed', this.#lease));
      if (this.#done) return; // a listener released it
    } else if (err instanceof LeaseExpiredError) {
      this.#lose(err, now);
      return;
    } else {
      this.#failure = err;
      const left = this.#lease.deadline.millis - now;
      this.#next = now + Math.max(Math.min(this.#every, left) / 4, MIN_RETRY_MILLIS);
    }
    this.#arm();
  }

  // end ends the hold: timers cleared, the renewal in flight aborted, the
  // signal aborted with reason.
  #end(reason) {
    this.#done = true;
    this.#tools.holds.delete(this);
    this.#clearTimers();
    const r = this.#renewing;
    this.#renewing = undefined;
    r?.abort(reason);
    this.#outer?.removeEventListener('abort', this.#onOuter);
    this.#ac.abort(reason);
  }

  // lose ends the hold with a LeaseLostError: cause is the renewal's
  // refusal (a LeaseExpiredError), the last renewal's failure, or (noClock)
  // the clock's; now is the holder's reading when the loss was found. The
  // message gives durations (since the lease's send, to or past its
  // deadline), not instants of the holder's clock domain.
  #lose(cause, now, noClock = false) {
    if (this.#done) return;
    const lease = this.#lease;
    const { resource, holderId, fence } = lease.token;
    const deadline = lease.deadline.millis;
    const when = now === undefined ? '' : `${durationText(now - this.#sentAt)} after the send of the call that last extended it, ` +
      (now <= deadline ? `${durationText(deadline - now)} before the holder's deadline` : `${durationText(now - deadline)} after the holder's deadline`);
    let why;
    if (noClock) {
      why = `the holder's clock could not be read (${cause?.message ?? cause}), so its deadline could not be kept`;
    } else if (cause instanceof LeaseExpiredError && cause.revoked) {
      why = `an operator revoked it (the coordinator answered its renewal "revoked"), ${when}`;
    } else if (cause instanceof LeaseExpiredError) {
      why = `the coordinator refused its renewal (it is no longer current), ${when}`;
    } else {
      why = `no renewal succeeded in time; given up ${when}`;
    }
    const options = { resource, holderId, fence, deadline: lease.deadline };
    if (cause !== undefined) options.cause = cause;
    const Lost = cause instanceof LeaseExpiredError && cause.revoked ? LeaseRevokedError : LeaseLostError;
    const err = new Lost(`lease-fence: the lease on ${JSON.stringify(resource)} (fence ${fence}) was lost: ${why}`, options);
    this.#end(err);
    this.dispatchEvent(new HoldEvent(internal, 'lost', lease, err));
    this.#releaseInBackground();
  }

  #endBy(reason) {
    if (this.#done) return;
    this.#end(reason);
    this.dispatchEvent(new HoldEvent(internal, 'released', this.#lease));
    this.#releaseInBackground();
  }

  toString() {
    const { resource, holderId, fence } = this.#lease.token;
    const state = this.#done ? `, ended: ${this.#ac.signal.reason?.name ?? String(this.#ac.signal.reason)}` : '';
    return `HeldLease(${JSON.stringify(resource)} held by ${JSON.stringify(holderId)}, fence ${fence}, until ${this.#lease.deadline}, ${this.#renewals} renewals${state})`;
  }
}
named(HeldLease, 'HeldLease');
