// Property test of the gate under async writes: seeded random schedules of
// several holders mixing commit and commitAsync, random awaits, throws,
// rejections, promises returned to commit, admits and aborts. In every
// schedule:
//   1. no two writes on the gate overlap in time;
//   2. the fences admitted (writes started, admits accepted) never decrease;
//   3. every refusal is a StaleFenceError, logged in gate.rejections with
//      both holders and both fences (and the admitted side was admitted);
//   4. the floor equals the highest admitted fence, at every step.
// Besides: every call settles, fn runs exactly once for a write that was
// admitted and never otherwise, a thrown or rejected value reaches the
// caller unchanged, an aborted write never runs (and one that waited rejects
// with a GateBusyError naming the write that held the gate, its signal's
// reason as the cause), and the signal a commitAsync fn may take aborts only
// with a SupersededError naming that write and a newer fence, and never once
// the write has settled. (superseded-property.test.mjs checks exactly when
// that signal aborts.)
//
// The checker is also run against two deliberately broken gates, which it
// must catch, so that it cannot pass whatever the gate does. The gates are
// exclusive (one write at a time, property 1); shared admission is checked
// by commit-async.test.mjs and the conformance suite's
// raiseWaitsForEqualWrites.
import { describe } from 'node:test';
import { FenceGate, GateBusyError, LeaseFenceError, StaleFenceError, SupersededError } from 'lease-fence';
import { deferred, scheduleOf, scheduleTests, settle } from './helpers.mjs';

const SCHEDULES = 1000;
const RESOURCE = 'orders-db';

function uuid(random) {
  const hex = () => Math.floor(random() * 16).toString(16);
  const part = (n) => Array.from({ length: n }, hex).join('');
  return `${part(8)}-${part(4)}-4${part(3)}-a${part(3)}-${part(12)}`;
}

// runSchedule plays one seeded schedule against the gate makeGate returns
// and returns the violations it saw (empty when every property held).
export async function runSchedule(seed, makeGate) {
  const { random, pick, chance, violations, fail } = scheduleOf(seed);
  const gate = makeGate(RESOURCE);

  const holders = Array.from({ length: 2 + pick(4) }, (_, i) => ({ id: chance(0.5) ? uuid(random) : `h${i}`, fence: 0 }));
  let generation = 0;
  for (const h of holders) h.fence = ++generation;

  // What the gate has admitted, in order, and who at each fence.
  let highest = 0;
  let lastAdmitted = 0;
  const admittedBy = new Map(); // fence -> Set of holder ids
  const admitted = (holderId, fence, what) => {
    if (fence < lastAdmitted) fail(`${what} admitted fence ${fence} after fence ${lastAdmitted}`);
    lastAdmitted = Math.max(lastAdmitted, fence);
    highest = Math.max(highest, fence);
    if (!admittedBy.has(fence)) admittedBy.set(fence, new Set());
    admittedBy.get(fence).add(holderId);
  };

  let active = 0; // writes whose fn is running, by the writes' own account
  const ops = [];
  const deferreds = new Set(); // promises that writes wait on, settled by the schedule
  const controllers = []; // AbortControllers of waiting writes
  let stale = 0;

  // A write: starts (checking overlap and order), may wait, may fail.
  let lastStarted = null; // the write that started last: the one holding the gate while another waits
  function makeWrite(op, holder, fence) {
    op.holderId = holder.id;
    op.fence = fence;
    const startWrite = () => {
      op.runs++;
      if (active !== 0) fail(`${op.name} started while ${active} write(s) ran`);
      active++;
      admitted(holder.id, fence, op.name);
      lastStarted = op;
      op.startedAt = performance.now();
    };
    const endWrite = () => { active--; };
    const failure = new Error(`${op.name} failed`);
    op.failure = failure;
    op.value = { op: op.name };
    const shape = pick(10);
    if (op.kind === 'commit') {
      if (shape < 5) return () => { startWrite(); endWrite(); return op.value; };
      if (shape < 7) return () => { startWrite(); endWrite(); throw failure; };
      // A plain function returning a promise: the write lasts until the
      // promise settles.
      return () => {
        startWrite();
        const d = deferred();
        const fails = chance(0.3);
        deferreds.add({ settle() { endWrite(); if (fails) d.reject(failure); else d.resolve(op.value); } });
        op.expectFailure = fails;
        return d.promise;
      };
    }
    if (shape < 2) return () => { startWrite(); endWrite(); throw failure; }; // a sync throw from commitAsync's fn
    if (shape < 3) return () => { startWrite(); endWrite(); return op.value; }; // a sync fn is fine for commitAsync
    const awaits = pick(4);
    const waits = chance(0.5);
    const fails = chance(0.3);
    op.expectFailure = fails;
    // The write of both async shapes, started as the fn is called.
    const write = async () => {
      startWrite();
      try {
        for (let i = 0; i < awaits; i++) await null;
        if (waits) {
          const d = deferred();
          deferreds.add({ settle: d.resolve });
          await d.promise;
        }
        if (fails) throw failure;
        return op.value;
      } finally {
        endWrite();
      }
    };
    if (chance(0.5)) {
      // A fn that takes the signal.
      return async (signal) => {
        op.signal = signal;
        if (!(signal instanceof AbortSignal)) fail(`${op.name}'s fn got ${signal}, not an AbortSignal`);
        return write();
      };
    }
    return async (...args) => {
      if (args.length !== 1 || !(args[0] instanceof AbortSignal)) fail(`${op.name}'s fn, which declares no parameter, got ${args.length} argument(s), not its signal`);
      return write();
    };
  }

  function observe(op, promise) {
    op.state = 'pending';
    const settled = () => { op.signalAtEnd = op.signal?.aborted; op.reasonAtEnd = op.signal?.reason; };
    promise.then((v) => { op.state = 'fulfilled'; op.result = v; settled(); }, (e) => { op.state = 'rejected'; op.result = e; settled(); });
  }

  // Whether some write has started and the gate has not yet handed back its
  // outcome: a refusal saying a write is still running is only correct then.
  const busy = () => ops.some((o) => o.runs > 0 && o.async && o.state === 'pending');

  const steps = 20 + pick(40);
  for (let step = 0; step < steps; step++) {
    const holder = holders[pick(holders.length)];
    const r = random();
    if (r < 0.12) {
      holder.fence = ++generation; // the holder won the lease again
    } else if (r < 0.18) {
      const fence = chance(0.5) ? holder.fence : ++generation;
      holder.fence = fence;
      try {
        gate.admit({ resource: RESOURCE, holderId: holder.id, fence });
        admitted(holder.id, fence, `admit ${fence}`);
      } catch (e) {
        if (!(e instanceof StaleFenceError)) fail(`admit threw ${e}`);
        else stale++;
        checkRejection(e, holder.id, fence, `admit ${fence}`);
      }
    } else if (r < 0.45) {
      const op = { name: `commit#${ops.length} ${holder.id}@${holder.fence}`, kind: 'commit', runs: 0, async: false };
      ops.push(op);
      const fence = holder.fence;
      const fn = makeWrite(op, holder, fence);
      const before = gate.floor;
      const wasBusy = busy();
      op.calledAt = performance.now();
      try {
        const v = gate.commit({ resource: RESOURCE, holderId: holder.id, fence }, fn);
        if (v instanceof Promise) {
          op.async = true;
          observe(op, v);
        } else {
          op.state = 'fulfilled';
          op.result = v;
        }
      } catch (e) {
        op.state = 'rejected';
        op.result = e;
        if (e instanceof LeaseFenceError && /still running/.test(e.message)) {
          op.busy = true;
          if (!wasBusy) fail(`${op.name} refused as busy while no write ran`);
          if (op.runs !== 0) fail(`${op.name} ran although refused as busy`);
          if (gate.floor !== before) fail(`${op.name} refused as busy moved the floor`);
        }
      }
    } else if (r < 0.8) {
      const op = { name: `commitAsync#${ops.length} ${holder.id}@${holder.fence}`, kind: 'commitAsync', runs: 0, async: true };
      ops.push(op);
      const fence = holder.fence;
      const fn = makeWrite(op, holder, fence);
      let options;
      if (chance(0.2)) {
        const ac = new AbortController();
        op.controller = ac;
        if (chance(0.15)) ac.abort(new Error(`${op.name} aborted early`));
        else controllers.push(ac);
        options = { signal: ac.signal };
      }
      let p;
      op.calledAt = performance.now(); // before the gate could read its clock for this write
      try {
        p = gate.commitAsync({ resource: RESOURCE, holderId: holder.id, fence }, fn, options);
      } catch (e) {
        fail(`${op.name} threw synchronously: ${e}`);
        continue;
      }
      if (!(p instanceof Promise)) fail(`${op.name} did not return a promise`);
      op.highestAtCall = highest;
      observe(op, p);
    } else {
      // Let time pass: settle something, abort something, or just wait.
      const what = pick(3);
      if (what === 0 && deferreds.size) {
        const list = [...deferreds];
        const d = list[pick(list.length)];
        deferreds.delete(d);
        d.settle();
      } else if (what === 1 && controllers.length) {
        const ac = controllers.splice(pick(controllers.length), 1)[0];
        const running = lastStarted; // the write holding the gate, if the aborted one waits
        ac.abort(chance(0.5) ? undefined : new Error('aborted'));
        const op = ops.find((o) => o.controller === ac);
        op.runningAtAbort = running;
        op.abortedAt = performance.now();
      } else if (chance(0.3)) {
        await settle();
      }
    }
    for (let i = pick(3); i > 0; i--) await null;
    if (gate.floor !== highest) fail(`after step ${step} the floor is ${gate.floor}, the highest admitted fence ${highest}`);
  }

  // Drain: settle everything that waits until every call has an outcome.
  for (let round = 0; round < 1000 && (deferreds.size || ops.some((o) => o.state === 'pending')); round++) {
    for (const d of [...deferreds]) {
      deferreds.delete(d);
      d.settle();
    }
    await settle();
  }

  function checkRejection(e, holderId, fence, name) {
    if (!(e instanceof StaleFenceError)) return;
    const rej = e.rejection;
    if (!rej || rej.refusedHolderId !== holderId || rej.refusedFence !== fence || rej.resource !== RESOURCE) {
      fail(`${name}: rejection names the wrong refused side: ${JSON.stringify(rej)}`);
      return;
    }
    if (!(rej.admittedFence > rej.refusedFence)) fail(`${name}: refused although its fence was not below the floor: ${JSON.stringify(rej)}`);
    if (!admittedBy.get(rej.admittedFence)?.has(rej.admittedHolderId)) {
      fail(`${name}: rejection names ${rej.admittedHolderId}@${rej.admittedFence}, which was never admitted`);
    }
  }

  const counts = { fulfilled: 0, failed: 0, stale: 0, staleAfterWaiting: 0, busy: 0, aborted: 0, gaveUp: 0, superseded: 0 };
  for (const op of ops) {
    const fence = Number(op.name.slice(op.name.lastIndexOf('@') + 1));
    const holderId = op.name.slice(op.name.indexOf(' ') + 1, op.name.lastIndexOf('@'));
    if (op.state === 'pending') {
      fail(`${op.name} never settled`);
      continue;
    }
    const e = op.result;
    if (op.state === 'fulfilled') {
      if (op.runs !== 1) fail(`${op.name} fulfilled but ran ${op.runs} times`);
      if (e !== op.value) fail(`${op.name} fulfilled with ${e} instead of its write's value`);
      if (op.expectFailure) fail(`${op.name} fulfilled though its write failed`);
      counts.fulfilled++;
    } else if (e === op.failure) {
      counts.failed++;
      if (op.runs !== 1) fail(`${op.name} reported its write's failure but ran ${op.runs} times`);
    } else if (e instanceof StaleFenceError) {
      stale++;
      counts.stale++;
      // Refused at once when already below the floor; otherwise it waited
      // and a newer fence was admitted meanwhile.
      if (op.kind === 'commitAsync' && fence >= op.highestAtCall) counts.staleAfterWaiting++;
      if (op.runs !== 0) fail(`${op.name} refused but its write ran`);
      checkRejection(e, holderId, fence, op.name);
    } else if (op.busy) {
      counts.busy++; // checked when it happened
    } else if (op.controller?.signal.aborted && e === op.controller.signal.reason) {
      if (op.runs !== 0) fail(`${op.name} aborted but its write ran`);
      if (op.runningAtAbort !== undefined && !(e instanceof Error && /early/.test(e.message))) {
        // Already aborted when called is the only way to get the bare reason.
        fail(`${op.name} waited and was aborted, but rejected with the bare reason ${e}`);
      }
      counts.aborted++;
    } else if (e instanceof GateBusyError && op.controller?.signal.aborted && e.cause === op.controller.signal.reason) {
      if (op.runs !== 0) fail(`${op.name} gave up waiting but its write ran`);
      const r = op.runningAtAbort;
      if (!r || e.runningHolderId !== r.holderId || e.runningFence !== r.fence || e.holderId !== holderId || e.fence !== fence ||
        e.resource !== RESOURCE || !(e.runningMillis >= 0 && e.runningMillis <= Math.round(op.abortedAt - r.calledAt) + 1)) {
        fail(`${op.name} gave up behind ${r?.name}: ${e.message} (${JSON.stringify(e)})`);
      }
      counts.gaveUp++;
    } else {
      fail(`${op.name} ended unexpectedly: ${e && e.stack ? e.stack : e}`);
    }
  }

  // Every refusal is in the log, once, in order.
  const log = gate.rejections;
  if (log.length !== stale) fail(`the log has ${log.length} refusals, the callers saw ${stale}`);
  log.forEach((rej, i) => {
    if (rej.seq !== i + 1) fail(`log entry ${i} has seq ${rej.seq}`);
    if (typeof rej.refusedHolderId !== 'string' || typeof rej.admittedHolderId !== 'string' || !(rej.refusedFence < rej.admittedFence)) {
      fail(`log entry ${JSON.stringify(rej)} does not name both holders and both fences`);
    }
  });
  if (gate.floor !== highest) fail(`at the end the floor is ${gate.floor}, the highest admitted fence ${highest}`);
  if (active !== 0) fail(`${active} writes never ended`);
  // Superseded signals: only with a SupersededError naming the write and a
  // newer fence, and never after the write settled (a newer fence arriving
  // later changes nothing).
  gate.admit?.({ resource: RESOURCE, holderId: 'last', fence: ++generation });
  for (const op of ops) {
    if (!op.signal) continue;
    if (op.signal.aborted) {
      const r = op.signal.reason;
      if (!(r instanceof SupersededError) || r.holderId !== op.holderId || r.fence !== op.fence || !(r.newerFence > op.fence) || r.resource !== RESOURCE) {
        fail(`${op.name}'s signal aborted with ${r}`);
      }
      counts.superseded++;
    }
    if (op.signal.aborted !== op.signalAtEnd || op.signal.reason !== op.reasonAtEnd) fail(`${op.name}'s signal changed after the write settled`);
  }
  return { violations, counts };
}

// Two broken gates the checker must catch. Both keep FenceGate's floor and
// log, and break only the async rules.

// What both share: FenceGate's floor, log and admit, and a commit that admits
// the token and runs fn, whatever fn returns.
class BrokenGate {
  constructor(resource) { this.gate = new FenceGate(resource, { exclusive: true }); }
  get floor() { return this.gate.floor; }
  get rejections() { return this.gate.rejections; }
  admit(token) { this.gate.admit(token); }
  commit(token, fn) {
    this.gate.admit(token);
    return fn();
  }
}

// Runs a commitAsync write as soon as it is called, like the old commit with
// an async function did: writes overlap, and stale writes land.
class NoQueueGate extends BrokenGate {
  async commitAsync(token, fn, { signal } = {}) {
    if (signal?.aborted) throw signal.reason;
    this.gate.admit(token);
    return fn();
  }
}

// Queues writes but checks a token when it is called, not when its turn
// comes: a write whose token went stale while it waited still runs.
class CheckAtCallGate extends BrokenGate {
  constructor(resource) {
    super(resource);
    this.tail = Promise.resolve();
  }
  commitAsync(token, fn, { signal } = {}) {
    try {
      if (signal?.aborted) throw signal.reason;
      this.gate.admit(token);
    } catch (e) {
      return Promise.reject(e);
    }
    const run = this.tail.then(() => fn());
    this.tail = run.catch(() => {});
    return run;
  }
}

describe('gate under random async schedules', () => {
  scheduleTests(`${SCHEDULES} seeded schedules keep the four properties`, SCHEDULES, runSchedule, [NoQueueGate, CheckAtCallGate]);
});
