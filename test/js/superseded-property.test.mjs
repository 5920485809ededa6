// When the signal given to a commitAsync write aborts, checked against a
// model over 1,000 seeded random schedules. Each schedule, one step at a
// time (and letting every promise reaction run after each step, so that the
// gate is at rest when it is checked), starts commitAsync writes (random
// fences, one holder per fence as a coordinator issues them; fns that take
// the signal and fns that declare no parameter; some with a signal of their
// own to give up waiting), admits fences, finishes or fails the running
// write, aborts waiting writes, and tries gate.commit while a write runs.
// After every step:
//   - the running write's signal has aborted exactly when the model says a
//     newer fence reached the gate while it ran: an admit past its fence, a
//     write with a higher fence that started waiting for it, or one already
//     waiting when it got its turn; never for an equal or older fence; its
//     reason is a SupersededError naming the resource, the write and the
//     first such fence (and whether that one waits);
//   - the floor and the rejections log are the model's;
// and every call ends as the model says: refused at once or when its turn
// came (StaleFenceError), given up (a GateBusyError naming the running
// write, with the abort reason as its cause), run. At the end no finished
// write's signal has changed since it finished, and a fn that declares no
// parameter was still called with its signal.
//
// The same checker runs against three deliberately broken gates (no signal,
// a signal that also aborts for an equal fence, a signal that can still
// abort after its write finished), which it must catch. The model runs one
// write at a time: the gates are exclusive.
import { describe } from 'node:test';
import { FenceGate, GateBusyError, LeaseFenceError, StaleFenceError, SupersededError } from 'lease-fence';
import { deferred, scheduleOf, scheduleTests, settle } from './helpers.mjs';

const SCHEDULES = 1000;
const R = 'orders-db';
const holder = (f) => `holder-${f}`;
const tok = (f) => ({ resource: R, holderId: holder(f), fence: f });

export async function runSchedule(seed, makeGate) {
  const { random, pick, chance, violations, fail } = scheduleOf(seed);
  const gate = makeGate(R);

  // The model.
  let floor = 0;
  let refusals = 0;
  let running = null; // the op whose write holds the gate
  let told = null; // the model's SupersededError fields for running, once a newer fence reached it
  const queue = []; // ops waiting for their turn
  const ops = [];
  const counts = { ran: 0, refusedAtOnce: 0, refusedAtTurn: 0, gaveUp: 0, superseded: 0, supersededAtStart: 0, busyCommit: 0 };

  const tell = (f, waiting) => {
    if (running !== null && told === null && f > running.fence) {
      told = { resource: R, holderId: holder(running.fence), fence: running.fence, newerHolderId: holder(f), newerFence: f, newerWaiting: waiting };
    }
  };
  const start = (op) => {
    running = op;
    told = null;
    floor = Math.max(floor, op.fence);
    op.expect = 'ran';
    const newer = queue.find((q) => q.fence > op.fence);
    if (newer) {
      tell(newer.fence, true);
      counts.supersededAtStart++;
    }
  };
  // handOn follows the model through the turns after the running write
  // ended: heads below the floor are refused, the first other one starts.
  const handOn = () => {
    running = null;
    told = null;
    while (queue.length) {
      const op = queue.shift();
      if (op.fence < floor) {
        refusals++;
        op.expect = 'refusedAtTurn';
        continue;
      }
      start(op);
      return;
    }
  };
  const outcome = (op, p) => {
    op.state = 'pending';
    p.then((v) => { op.state = 'fulfilled'; op.result = v; op.endedSignal = [op.signal?.aborted, op.signal?.reason]; },
      (e) => { op.state = 'rejected'; op.result = e; op.endedSignal = [op.signal?.aborted, op.signal?.reason]; });
  };

  const steps = 10 + pick(30);
  for (let step = 0; step < steps; step++) {
    const r = random();
    // Fences mostly at or just above the floor (the interesting part), some
    // below it.
    const near = () => Math.max(1, chance(0.2) ? floor - pick(3) : floor + pick(3));
    if (r < 0.4) {
      const f = near();
      const op = { name: `write#${ops.length}@${f}`, fence: f, takesSignal: chance(0.7), runs: 0, done: deferred(), fails: chance(0.3) };
      ops.push(op);
      const body = async () => {
        op.runs++;
        await op.done.promise;
        if (op.fails) throw new Error(`${op.name} failed`);
        return op.name;
      };
      const fn = op.takesSignal
        ? (signal) => { op.signal = signal; return body(); }
        : function () { op.args = arguments.length; op.signal = arguments[0]; return body(); };
      let options;
      if (chance(0.4)) {
        op.controller = new AbortController();
        options = { signal: op.controller.signal };
      }
      outcome(op, gate.commitAsync(tok(f), fn, options));
      if (f < floor) {
        refusals++;
        op.expect = 'refusedAtOnce';
      } else if (running === null && queue.length === 0) {
        start(op);
      } else {
        queue.push(op);
        op.expect = 'waiting';
        tell(f, true);
      }
    } else if (r < 0.55) {
      const f = near();
      let err;
      try {
        gate.admit(tok(f));
      } catch (e) {
        err = e;
      }
      if (f < floor) {
        refusals++;
        if (!(err instanceof StaleFenceError)) fail(`admit ${f} below floor ${floor}: ${err}`);
      } else {
        if (err) fail(`admit ${f}: ${err}`);
        if (f > floor) {
          floor = f;
          tell(f, false);
        }
      }
    } else if (r < 0.8) {
      if (running !== null) {
        const op = running;
        if (op.fails) op.done.reject(new Error(`${op.name} failed`));
        else op.done.resolve();
        op.finished = true;
        handOn();
      }
    } else if (r < 0.93) {
      const waiting = queue.filter((q) => q.controller);
      if (waiting.length) {
        const op = waiting[pick(waiting.length)];
        op.reason = chance(0.5) ? new Error(`${op.name} not needed`) : undefined;
        op.controller.abort(op.reason);
        op.reason = op.controller.signal.reason;
        op.expect = 'gaveUp';
        op.behind = running;
        queue.splice(queue.indexOf(op), 1);
      }
    } else if (running !== null) {
      // A synchronous commit while a write runs: refused, naming that write.
      let err;
      try {
        gate.commit(tok(running.fence), () => fail('commit ran while a write was running'));
      } catch (e) {
        err = e;
      }
      if (!(err instanceof LeaseFenceError) || !err.message.includes(`holder ${JSON.stringify(holder(running.fence))} with fence ${running.fence}`)) {
        fail(`commit while ${running.name} runs: ${err}`);
      } else {
        counts.busyCommit++;
      }
    }
    await settle();

    // The running write's signal, against the model.
    if (running !== null) {
      const s = running.signal;
      if (!(s instanceof AbortSignal)) {
        fail(`step ${step}: ${running.name}'s fn got ${s}, not an AbortSignal`);
      } else if (told === null) {
        if (s.aborted) fail(`step ${step}: ${running.name}'s signal aborted (${s.reason}); no newer fence reached the gate`);
      } else if (!s.aborted) {
        fail(`step ${step}: ${running.name}'s signal has not aborted; ${JSON.stringify(told)}`);
      } else if (!(s.reason instanceof SupersededError) || JSON.stringify({ ...s.reason }) !== JSON.stringify(told)) {
        fail(`step ${step}: ${running.name}'s signal aborted with ${s.reason} ${JSON.stringify({ ...s.reason })}, want ${JSON.stringify(told)}`);
      }
    }
    if (gate.floor !== floor || gate.rejectionCount !== refusals) {
      fail(`step ${step}: floor ${gate.floor}, ${gate.rejectionCount} refusals; the model has ${floor}, ${refusals}`);
    }
  }

  // Finish everything, then give a newer fence to the finished writes.
  while (running !== null || queue.length) {
    if (running !== null) {
      running.done.resolve();
      running.fails = false;
      running.finished = true;
    }
    handOn();
    await settle();
  }
  try {
    gate.admit(tok(floor + 1000));
  } catch (e) {
    fail(`the last admit: ${e}`);
  }
  await settle();

  for (const op of ops) {
    if (op.state === 'pending') {
      fail(`${op.name} never settled`);
      continue;
    }
    const e = op.result;
    switch (op.expect) {
      case 'ran':
        counts.ran++;
        if (op.runs !== 1) fail(`${op.name} ran ${op.runs} times`);
        if (op.fails ? !(op.state === 'rejected' && e.message === `${op.name} failed`) : e !== op.name) fail(`${op.name} ended ${op.state} with ${e}`);
        break;
      case 'refusedAtOnce':
      case 'refusedAtTurn':
        counts[op.expect]++;
        if (!(e instanceof StaleFenceError) || op.runs !== 0) fail(`${op.name} should be refused (${op.expect}): ${e}, ran ${op.runs}`);
        break;
      case 'gaveUp': {
        counts.gaveUp++;
        const b = op.behind;
        if (!(e instanceof GateBusyError) || e.cause !== op.reason || e.resource !== R || e.holderId !== holder(op.fence) || e.fence !== op.fence ||
          e.runningHolderId !== holder(b.fence) || e.runningFence !== b.fence || !(e.runningMillis >= 0) || op.runs !== 0 ||
          !e.message.includes(`holder ${JSON.stringify(holder(b.fence))} has been writing with fence ${b.fence}`)) {
          fail(`${op.name} gave up behind ${b.name}: ${e} ${JSON.stringify(e)}, ran ${op.runs}`);
        }
        break;
      }
      default:
        fail(`${op.name}: the model lost it (${op.expect})`);
    }
    if (op.signal !== undefined) {
      if (op.signal.aborted) counts.superseded++;
      if (op.signal.aborted !== op.endedSignal[0] || op.signal.reason !== op.endedSignal[1]) {
        fail(`${op.name}'s signal changed after the write finished: ${op.endedSignal[0]} -> ${op.signal.aborted} (${op.signal.reason})`);
      }
    }
    if (!op.takesSignal && op.runs && op.args !== 1) fail(`${op.name}'s fn declares no parameter and got ${op.args} argument(s), not its signal`);
  }
  return { violations, counts };
}

// Broken gates: FenceGate underneath, with the signal handed to fn replaced.
class SignalSwap {
  constructor(resource) {
    this.gate = new FenceGate(resource, { exclusive: true });
    this.current = null; // { fence, ctrl } of the write in fn
  }
  get floor() { return this.gate.floor; }
  get rejectionCount() { return this.gate.rejectionCount; }
  commit(token, fn) { return this.gate.commit(token, fn); }
  admit(token) {
    this.gate.admit(token);
    this.newer(token, false);
  }
  commitAsync(token, fn, options) {
    const p = this.gate.commitAsync(token, (signal) => {
      const ctrl = new AbortController();
      const w = { fence: token.fence, holderId: token.holderId, ctrl, signal };
      this.current = w;
      const out = fn(this.signalFor(w));
      Promise.resolve(out).finally(() => { if (this.current === w) this.current = this.keep ? w : null; }).catch(() => {});
      return out;
    }, options);
    this.newer(token, true);
    return p;
  }
  newer() {}
}

// Gives fn a signal that never aborts.
class NoSignalGate extends SignalSwap {
  signalFor(w) { return w.ctrl.signal; }
}

// Also aborts for an equal fence.
class EqualFenceGate extends SignalSwap {
  signalFor(w) { return w.ctrl.signal; }
  newer(token, waiting) {
    const w = this.current;
    if (w && !w.ctrl.signal.aborted && token.fence >= w.fence) {
      w.ctrl.abort(new SupersededError('equal', { resource: R, holderId: w.holderId, fence: w.fence, newerHolderId: token.holderId, newerFence: token.fence, newerWaiting: waiting }));
    }
  }
}

// Forwards the real signal while the write runs, and keeps aborting the
// last write's own signal on a newer fence after it finished.
class LateSignalGate extends SignalSwap {
  constructor(resource) {
    super(resource);
    this.keep = true;
  }
  signalFor(w) {
    w.signal.addEventListener('abort', () => w.ctrl.abort(w.signal.reason), { once: true });
    return w.ctrl.signal;
  }
  newer(token, waiting) {
    const w = this.current;
    if (w && !w.ctrl.signal.aborted && token.fence > w.fence) {
      w.ctrl.abort(new SupersededError('late', { resource: R, holderId: w.holderId, fence: w.fence, newerHolderId: token.holderId, newerFence: token.fence, newerWaiting: waiting }));
    }
  }
}

describe('the superseded-write signal under random schedules', () => {
  scheduleTests(`${SCHEDULES} seeded schedules: the signal aborts exactly when a newer fence reaches the gate`, SCHEDULES, runSchedule, [NoSignalGate, EqualFenceGate, LateSignalGate]);
});
