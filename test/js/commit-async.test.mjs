// gate.commitAsync and the async guards of gate.commit: writes on a gate run
// one at a time, a waiting write is checked when its turn comes, aborts, and
// what commit and admit do while an async write runs.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { FenceGate, GateBusyError, InvalidArgumentError, LeaseFenceError, StaleFenceError, SupersededError } from 'lease-fence';
import { deferred, settle } from './helpers.mjs';

const tok = (holderId, fence, resource = 'slot') => ({ resource, holderId, fence });

// Records how a promise ended, without awaiting it.
function track(promise) {
  const t = { state: 'pending', value: undefined };
  promise.then((v) => Object.assign(t, { state: 'fulfilled', value: v }), (e) => Object.assign(t, { state: 'rejected', value: e }));
  return t;
}

describe('gate.commitAsync', () => {
  test('the issue\'s case: a stale async write waits for its turn and is refused, not landed', async () => {
    const gate = new FenceGate('slot');
    const db = { value: 'initial', writes: [] };
    const slowA = deferred();
    // A (fence 1) starts its write and awaits the database.
    const a = track(gate.commitAsync(tok('a', 1), async () => {
      await slowA.promise;
      db.value = 'a';
      db.writes.push('a');
    }));
    // B (fence 2) commits while A awaits: it waits for A's write to settle.
    let bRan = false;
    const b = track(gate.commitAsync(tok('b', 2), async () => {
      bRan = true;
      db.value = 'b';
      db.writes.push('b');
      return 'b done';
    }));
    await settle();
    assert.equal(bRan, false, 'B waits while A\'s write runs');
    assert.equal(gate.floor, 1);
    slowA.resolve();
    await settle();
    assert.equal(a.state, 'fulfilled');
    assert.deepEqual(b, { state: 'fulfilled', value: 'b done' });
    // A comes back with its old token: refused, logged with both holders.
    let aRanAgain = false;
    const again = track(gate.commitAsync(tok('a', 1), async () => { aRanAgain = true; }));
    await settle();
    assert.equal(again.state, 'rejected');
    assert.ok(again.value instanceof StaleFenceError);
    assert.equal(aRanAgain, false);
    assert.deepEqual(db, { value: 'b', writes: ['a', 'b'] });
    assert.deepEqual(gate.rejections, [{ seq: 1, resource: 'slot', refusedHolderId: 'a', refusedFence: 1, admittedHolderId: 'b', admittedFence: 2 }]);
  });

  test('while a newer write runs, an older fence is refused at once (as Gate.Commit does); the same fence waits (exclusive)', async () => {
    const gate = new FenceGate('slot', { exclusive: true });
    const slowB = deferred();
    const order = [];
    const b = track(gate.commitAsync(tok('b', 2), async () => { order.push('b start'); await slowB.promise; order.push('b end'); }));
    let aRan = false;
    const a = track(gate.commitAsync(tok('a', 1), async () => { aRan = true; }));
    const b2 = track(gate.commitAsync(tok('b', 2), async () => { order.push('b2'); }));
    await settle();
    assert.equal(a.state, 'rejected', 'refused before the running write settled');
    assert.ok(a.value instanceof StaleFenceError);
    assert.deepEqual(a.value.rejection, { seq: 1, resource: 'slot', refusedHolderId: 'a', refusedFence: 1, admittedHolderId: 'b', admittedFence: 2 });
    assert.equal(b2.state, 'pending', 'the same fence waits its turn');
    slowB.resolve();
    await settle();
    assert.equal(b.state, 'fulfilled');
    assert.equal(b2.state, 'fulfilled');
    assert.equal(aRan, false);
    assert.deepEqual(order, ['b start', 'b end', 'b2']);
    assert.equal(gate.rejections.length, 1);
  });

  test('always a promise: every refusal is a rejection, never a synchronous throw', async () => {
    const gate = new FenceGate('slot');
    gate.admit(tok('b', 5));
    const calls = [
      () => gate.commitAsync(tok('a', 1), async () => {}),
      () => gate.commitAsync(tok('a', 0), async () => {}),
      () => gate.commitAsync(tok('a', 6, 'other'), async () => {}),
      () => gate.commitAsync(null, async () => {}),
      () => gate.commitAsync(tok('a', 6), 'not a function'),
      () => gate.commitAsync(tok('a', 6), async () => {}, 'options'),
      () => gate.commitAsync(tok('a', 6), async () => {}, { signal: {} }),
      () => FenceGate.prototype.commitAsync.call({}, tok('a', 6), async () => {}),
      () => gate.commitAsync({ resource: 'slot', holderId: 'a', get fence() { throw new Error('getter'); } }, async () => {}),
    ];
    const errors = [];
    for (const c of calls) {
      let p;
      assert.doesNotThrow(() => { p = c(); });
      assert.ok(p instanceof Promise);
      errors.push(await p.then(() => null, (e) => e));
    }
    assert.ok(errors[0] instanceof StaleFenceError);
    assert.ok(errors.slice(1, 8).every((e) => e instanceof InvalidArgumentError));
    assert.match(errors[2].message, /presented to the gate/);
    assert.deepEqual([1, 3, 4, 5, 6, 7].map((i) => errors[i].argument), ['token.fence', 'token', 'fn', 'options', 'options.signal', 'this']);
    assert.equal(errors[8].message, 'getter');
    assert.equal(gate.floor, 5);
    assert.equal(gate.rejections.length, 1, 'only the stale token is logged');
  });

  test('bad arguments of a write that would wait are refused at once, not at its turn', async () => {
    const gate = new FenceGate('slot');
    const slow = deferred();
    const first = track(gate.commitAsync(tok('a', 1), () => slow.promise));
    const bad = track(gate.commitAsync(tok('a', 0), async () => {}));
    const other = track(gate.commitAsync(tok('a', 2, 'other'), async () => {}));
    await settle();
    assert.equal(first.state, 'pending');
    assert.equal(bad.state, 'rejected');
    assert.equal(bad.value.argument, 'token.fence');
    assert.ok(other.value instanceof InvalidArgumentError);
    slow.resolve('ok');
    await settle();
    assert.deepEqual(first, { state: 'fulfilled', value: 'ok' });
    assert.equal(gate.rejections.length, 0);
  });

  test('the floor is raised before fn runs and stays raised when fn throws or rejects', async () => {
    const gate = new FenceGate('slot');
    let seen;
    await gate.commitAsync(tok('a', 3), () => { seen = gate.floor; });
    assert.equal(seen, 3);
    const boom = new Error('half written');
    await assert.rejects(gate.commitAsync(tok('b', 4), () => { throw boom; }), (e) => e === boom);
    assert.equal(gate.floor, 4);
    await assert.rejects(gate.commitAsync(tok('c', 5), async () => { await null; throw boom; }), (e) => e === boom);
    assert.equal(gate.floor, 5);
    await assert.rejects(gate.commitAsync(tok('b', 4), async () => {}), StaleFenceError);
    assert.equal(await gate.commitAsync(tok('c', 5), () => 'sync value'), 'sync value');
    assert.equal(await gate.commitAsync(tok('c', 5), async () => 'async value'), 'async value');
    assert.equal(await gate.commitAsync(tok('c', 5), () => ({ then(ok) { ok('thenable value'); } })), 'thenable value');
  });

  test('writes with the running fence share the gate; a higher fence waits for all of them, and the writes of its fence behind it start with it', async () => {
    const gate = new FenceGate('slot');
    let running = 0;
    let most = 0;
    const order = [];
    const write = (name) => async () => {
      running++;
      most = Math.max(most, running);
      order.push(`${name}+`);
      for (let i = 0; i < 3; i++) await null;
      order.push(`${name}-`);
      running--;
      return name;
    };
    let lateRan = false;
    const results = await Promise.allSettled([
      gate.commitAsync(tok('a', 1), write('a1')),
      gate.commitAsync(tok('a', 1), write('a2')),
      gate.commitAsync(tok('b', 2), write('b')),
      gate.commitAsync(tok('b', 2), write('b2')),
      gate.commitAsync(tok('a', 1), async () => { lateRan = true; }), // behind the raise: refused at its turn
    ]);
    assert.deepEqual(results.slice(0, 4).map((r) => r.value), ['a1', 'a2', 'b', 'b2']);
    assert.equal(results[4].status, 'rejected');
    assert.ok(results[4].reason instanceof StaleFenceError);
    assert.deepEqual(results[4].reason.rejection, { seq: 1, resource: 'slot', refusedHolderId: 'a', refusedFence: 1, admittedHolderId: 'b', admittedFence: 2 });
    assert.equal(lateRan, false);
    assert.equal(most, 2);
    assert.deepEqual(order, ['a1+', 'a2+', 'a1-', 'a2-', 'b+', 'b2+', 'b-', 'b2-']);
  });

  test('FenceGate options.exclusive must be a boolean', () => {
    assert.throws(() => new FenceGate('slot', { exclusive: 'yes' }), (e) => e instanceof InvalidArgumentError && e.argument === 'options.exclusive');
  });

  test('exclusive: writes run one at a time, waiting writes in the order they were made', async () => {
    const gate = new FenceGate('slot', { exclusive: true });
    let running = 0;
    const order = [];
    const write = (name) => async () => {
      assert.equal(running, 0, `${name} started while another write ran`);
      running++;
      order.push(`${name}+`);
      for (let i = 0; i < 3; i++) await null;
      order.push(`${name}-`);
      running--;
      return name;
    };
    const results = await Promise.all([
      gate.commitAsync(tok('a', 1), write('a1')),
      gate.commitAsync(tok('a', 1), write('a2')),
      gate.commitAsync(tok('b', 2), write('b')),
      gate.commitAsync(tok('b', 2), write('b2')),
    ]);
    assert.deepEqual(results, ['a1', 'a2', 'b', 'b2']);
    assert.deepEqual(order, ['a1+', 'a1-', 'a2+', 'a2-', 'b+', 'b-', 'b2+', 'b2-']);
  });

  test('abort: a waiting write rejects with a GateBusyError (the signal\'s reason its cause), never runs, logs nothing, moves nothing', async () => {
    const gate = new FenceGate('slot');
    const slow = deferred();
    const first = track(gate.commitAsync(tok('a', 1), () => slow.promise));
    const ac = new AbortController();
    let ran = false;
    const waiting = track(gate.commitAsync(tok('b', 9), async () => { ran = true; }, { signal: ac.signal }));
    const ac2 = new AbortController();
    const reason = new Error('not needed any more');
    const waiting2 = track(gate.commitAsync(tok('b', 9), async () => { ran = true; }, { signal: ac2.signal }));
    const third = track(gate.commitAsync(tok('c', 3), async () => 'third'));
    ac.abort();
    ac2.abort(reason);
    await settle();
    assert.equal(waiting.state, 'rejected');
    assert.ok(waiting.value instanceof GateBusyError);
    assert.ok(waiting.value.cause instanceof DOMException && waiting.value.cause.name === 'AbortError');
    assert.ok(waiting2.value instanceof GateBusyError);
    assert.equal(waiting2.value.cause, reason);
    assert.deepEqual({ ...waiting2.value, runningMillis: 0 },
      { resource: 'slot', holderId: 'b', fence: 9, runningHolderId: 'a', runningFence: 1, runningMillis: 0 });
    assert.match(waiting2.value.message, /^lease-fence: the write of holder "b" with fence 9 to "slot" gave up waiting for its turn \(Error: not needed any more\): holder "a" has been writing with fence 1 for at least \d+ ms$/);
    slow.resolve();
    await settle();
    assert.equal(ran, false);
    assert.equal(first.state, 'fulfilled');
    assert.deepEqual(third, { state: 'fulfilled', value: 'third' }, 'the write after the aborted ones takes its turn');
    assert.equal(gate.floor, 3, 'fence 9 was never admitted');
    assert.equal(gate.rejections.length, 0);
  });

  test('an already-aborted signal rejects at once, even on an idle gate', async () => {
    const gate = new FenceGate('slot');
    let ran = false;
    const reason = new Error('gone');
    await assert.rejects(gate.commitAsync(tok('a', 1), async () => { ran = true; }, { signal: AbortSignal.abort(reason) }), (e) => e === reason);
    await assert.rejects(gate.commitAsync(tok('a', 1), async () => { ran = true; }, { signal: AbortSignal.abort() }), (e) => e.name === 'AbortError');
    assert.equal(ran, false);
    assert.equal(gate.floor, 0);
    // Argument errors still come first.
    await assert.rejects(gate.commitAsync(tok('a', 0), async () => {}, { signal: AbortSignal.abort() }), InvalidArgumentError);
  });

  test('a running write is not interrupted by its signal', async () => {
    const gate = new FenceGate('slot');
    const ac = new AbortController();
    const slow = deferred();
    const p = track(gate.commitAsync(tok('a', 1), async () => { await slow.promise; return 'landed'; }, { signal: ac.signal }));
    ac.abort();
    slow.resolve();
    await settle();
    assert.deepEqual(p, { state: 'fulfilled', value: 'landed' });
  });

  test('a commitAsync made inside a commit\'s fn waits until that fn returns', async () => {
    const gate = new FenceGate('slot');
    const order = [];
    let inner;
    gate.commit(tok('a', 1), () => {
      inner = gate.commitAsync(tok('a', 1), () => { order.push('inner'); });
      order.push('outer end');
    });
    await inner;
    assert.deepEqual(order, ['outer end', 'inner']);
  });
});

describe('the superseded-write signal', () => {
  test('fires when a newer fence is admitted while the write runs, with both fences, holders and the resource; the gate still waits', async () => {
    const gate = new FenceGate('slot');
    const slow = deferred();
    let signal;
    const a = track(gate.commitAsync(tok('a', 1), async (s) => { signal = s; await slow.promise; return s.aborted; }));
    assert.ok(signal instanceof AbortSignal);
    assert.equal(signal.aborted, false);
    const seen = [];
    signal.addEventListener('abort', () => seen.push(signal.reason));
    gate.admit(tok('b', 2));
    assert.equal(signal.aborted, true, 'aborted as admit returns');
    assert.equal(seen.length, 1);
    const r = signal.reason;
    assert.ok(r instanceof SupersededError && r instanceof LeaseFenceError && r instanceof Error);
    assert.equal(r.name, 'SupersededError');
    assert.deepEqual({ ...r }, { resource: 'slot', holderId: 'a', fence: 1, newerHolderId: 'b', newerFence: 2, newerWaiting: false });
    assert.equal(r.message, 'lease-fence: the write of holder "a" with fence 1 to "slot" is superseded: holder "b" with fence 2 was admitted');
    // A later, higher admit does not abort it again or change the reason.
    gate.admit(tok('c', 3));
    assert.equal(seen.length, 1);
    assert.equal(signal.reason, r);
    // The gate still waits for the running write: the newer write queues.
    let cRan = false;
    const c = track(gate.commitAsync(tok('c', 3), () => { cRan = true; }));
    await settle();
    assert.equal(cRan, false);
    slow.resolve();
    await settle();
    assert.deepEqual(a, { state: 'fulfilled', value: true });
    assert.equal(c.state, 'fulfilled');
  });

  test('fires when a newer write starts waiting for it (the floor moves only at that write\'s turn)', async () => {
    const gate = new FenceGate('slot');
    const slow = deferred();
    let signal;
    track(gate.commitAsync(tok('a', 1), (s) => { signal = s; return slow.promise; }));
    const b = track(gate.commitAsync(tok('b', 2), () => 'b wrote'));
    assert.equal(signal.aborted, true);
    assert.deepEqual({ ...signal.reason }, { resource: 'slot', holderId: 'a', fence: 1, newerHolderId: 'b', newerFence: 2, newerWaiting: true });
    assert.match(signal.reason.message, /holder "b" with fence 2 waits for it to finish$/);
    assert.equal(gate.floor, 1, 'b is not admitted until its turn');
    slow.resolve();
    await settle();
    assert.deepEqual(b, { state: 'fulfilled', value: 'b wrote' });
    assert.equal(gate.floor, 2);
  });

  test('never for an equal fence (admitted or waiting, another holder\'s too), nor an older one', async () => {
    const gate = new FenceGate('slot');
    gate.admit(tok('a', 5));
    const slow = deferred();
    let signal;
    track(gate.commitAsync(tok('a', 5), (s) => { signal = s; return slow.promise; }));
    gate.admit(tok('a', 5));
    gate.admit(tok('z', 5));
    const same = track(gate.commitAsync(tok('a', 5), () => 'same'));
    const other = track(gate.commitAsync(tok('z', 5), () => 'other'));
    const old = track(gate.commitAsync(tok('old', 4), () => 'old'));
    assert.throws(() => gate.admit(tok('old', 4)), StaleFenceError);
    await settle();
    assert.equal(old.state, 'rejected');
    assert.equal(signal.aborted, false);
    slow.resolve();
    await settle();
    assert.deepEqual([same.value, other.value], ['same', 'other']);
    assert.equal(signal.aborted, false);
  });

  test('never after the write finished, though the signal was kept', async () => {
    const gate = new FenceGate('slot');
    let kept;
    await gate.commitAsync(tok('a', 1), async (s) => { kept = s; });
    gate.admit(tok('b', 2));
    await gate.commitAsync(tok('c', 3), () => {});
    let kept2;
    gate.commitAsync(tok('c', 3), (s) => { kept2 = s; return 'sync'; });
    gate.admit(tok('d', 4));
    await settle();
    assert.equal(kept.aborted, false);
    assert.equal(kept2.aborted, false);
  });

  test('a write that gets its turn while a newer fence already waits starts with its signal aborted', async () => {
    const gate = new FenceGate('slot');
    const slow = deferred();
    track(gate.commitAsync(tok('a', 1), () => slow.promise));
    let bSignal;
    const b = track(gate.commitAsync(tok('b', 2), (s) => { bSignal = s; return s.aborted; }));
    track(gate.commitAsync(tok('c', 3), () => {}));
    slow.resolve();
    await settle();
    assert.deepEqual(b, { state: 'fulfilled', value: true });
    assert.deepEqual({ ...bSignal.reason }, { resource: 'slot', holderId: 'b', fence: 2, newerHolderId: 'c', newerFence: 3, newerWaiting: true });
  });

  test('every fn is given the signal, also one that declares no parameter (a wrapper passes it on)', async () => {
    const gate = new FenceGate('slot');
    const args = [];
    await gate.commitAsync(tok('a', 1), function () { args.push(arguments.length, arguments[0] instanceof AbortSignal); });
    await gate.commitAsync(tok('a', 1), async (...rest) => { args.push(rest.length, rest[0] instanceof AbortSignal); });
    await gate.commitAsync(tok('a', 1), function (s) { args.push(arguments.length, s instanceof AbortSignal); });
    assert.deepEqual(args, [1, true, 1, true, 1, true]);
  });

  test('a listener of the signal may call the gate: the newer write that triggered it keeps its place', async () => {
    const gate = new FenceGate('slot');
    const slow = deferred();
    const order = [];
    track(gate.commitAsync(tok('a', 1), (s) => {
      s.addEventListener('abort', () => { gate.commitAsync(tok('a', 1), () => order.push('a again')).catch((e) => order.push(e.name)); });
      return slow.promise;
    }));
    const b = gate.commitAsync(tok('b', 2), () => order.push('b'));
    slow.resolve();
    await b;
    await settle();
    assert.deepEqual(order, ['b', 'StaleFenceError']);
  });

  test('runningMillis counts from the start of a write that got the gate from the queue, else from when the first write queued behind it', async () => {
    const gate = new FenceGate('slot');
    const a = deferred();
    const b = deferred();
    track(gate.commitAsync(tok('a', 1), () => a.promise)); // found the gate free: its start is not read
    const queuedAt = performance.now();
    track(gate.commitAsync(tok('b', 2), () => b.promise)); // queues: the gate reads the clock now
    const ac = new AbortController();
    const c = track(gate.commitAsync(tok('c', 3), () => {}, { signal: ac.signal }));
    ac.abort();
    await settle();
    const bound = performance.now() - queuedAt;
    assert.ok(c.value instanceof GateBusyError);
    assert.ok(c.value.runningMillis >= 0 && c.value.runningMillis <= Math.ceil(bound), `${c.value.runningMillis} ms > ${bound}`);
    assert.match(c.value.message, /holder "a" has been writing with fence 1 for at least \d+ ms$/);
    const ac2 = new AbortController();
    const d = track(gate.commitAsync(tok('d', 4), () => {}, { signal: ac2.signal }));
    const handedFrom = performance.now();
    a.resolve(); // b gets the gate from the queue: its start is read then
    await settle();
    const handedTo = performance.now();
    const abortAt = performance.now();
    ac2.abort();
    const upper = performance.now() - handedFrom;
    await settle();
    assert.equal(d.value.runningHolderId, 'b');
    assert.ok(d.value.runningMillis <= Math.ceil(upper), `${d.value.runningMillis} ms > ${upper}`);
    assert.ok(d.value.runningMillis >= Math.floor(abortAt - handedTo), `${d.value.runningMillis} ms < ${abortAt - handedTo}`);
    assert.match(d.value.message, /holder "b" has been writing with fence 2 for \d+ ms$/);
    b.resolve();
    await settle();
  });

  test('a commitAsync made inside a running commitAsync\'s synchronous fn runs after it', async () => {
    const gate = new FenceGate('slot');
    let inner;
    const outer = await gate.commitAsync(tok('a', 1), () => {
      inner = gate.commitAsync(tok('a', 1), () => 'inner ran');
      return 'outer';
    });
    assert.equal(outer, 'outer');
    assert.equal(await inner, 'inner ran');
  });

  test('gate.commit while an async write runs names that write', async () => {
    const gate = new FenceGate('slot');
    const slow = deferred();
    track(gate.commitAsync(tok('a', 7), () => slow.promise));
    assert.throws(() => gate.commit(tok('a', 7), () => {}), (e) => e instanceof LeaseFenceError &&
      /a write is still running on this gate \(holder "a" with fence 7: /.test(e.message));
    slow.resolve();
    await settle();
  });
});

describe('gate.commit with promises', () => {
  test('a plain function returning a promise keeps the gate busy until it settles', async () => {
    const gate = new FenceGate('slot');
    const slow = deferred();
    const returned = gate.commit(tok('a', 1), () => slow.promise);
    assert.ok(returned instanceof Promise);
    let ran = false;
    assert.throws(() => gate.commit(tok('b', 2), () => { ran = true; }),
      (e) => e instanceof LeaseFenceError && !(e instanceof StaleFenceError) && /still running/.test(e.message));
    assert.equal(ran, false);
    assert.equal(gate.floor, 1, 'the refused commit moved nothing');
    const waiting = track(gate.commitAsync(tok('b', 2), () => 'b wrote'));
    await settle();
    assert.equal(waiting.state, 'pending', 'commitAsync waits its turn');
    slow.resolve('a wrote');
    assert.equal(await returned, 'a wrote', 'commit\'s promise settles as fn\'s did');
    await settle();
    assert.deepEqual(waiting, { state: 'fulfilled', value: 'b wrote' });
    assert.equal(gate.commit(tok('b', 2), () => 'free again'), 'free again');
    assert.equal(gate.rejections.length, 0);
  });

  test('a rejected promise frees the gate too, and the rejection reaches the caller', async () => {
    const gate = new FenceGate('slot');
    const boom = new Error('failed write');
    await assert.rejects(gate.commit(tok('a', 1), () => Promise.reject(boom)), (e) => e === boom);
    assert.equal(gate.commit(tok('a', 1), () => 'next'), 'next');
  });

  test('any thenable counts, and the gate is free when the caller\'s await resumes', async () => {
    const gate = new FenceGate('slot');
    let fire;
    const thenable = { then(ok) { fire = ok; } };
    const p = gate.commit(tok('a', 1), () => thenable);
    await settle();
    assert.throws(() => gate.commit(tok('a', 1), () => {}), /still running/);
    fire(7);
    assert.equal(await p, 7);
    assert.equal(gate.commit(tok('a', 1), () => 'ok'), 'ok');
  });

  test('a commit inside a running commitAsync write is refused (it would wait for itself)', async () => {
    const gate = new FenceGate('slot');
    let inner;
    await gate.commitAsync(tok('a', 1), async () => {
      await null;
      try {
        gate.commit(tok('a', 1), () => {});
      } catch (e) {
        inner = e;
      }
    });
    assert.match(inner.message, /still running/);
  });

  test('async and async-arrow functions are refused; async generators and plain functions are not', () => {
    const gate = new FenceGate('slot');
    async function named() {}
    for (const fn of [named, async () => {}, async function () {}]) {
      assert.throws(() => gate.commit(tok('a', 1), fn), (e) => e instanceof InvalidArgumentError && e.argument === 'fn');
    }
    assert.equal(gate.floor, 0);
    const gen = gate.commit(tok('a', 1), async function* () {});
    assert.equal(typeof gen.next, 'function');
  });
});

describe('gate.admit while a write runs', () => {
  test('admit raises the floor at once; the running write finishes; older waiting writes are refused at their turn (exclusive)', async () => {
    const gate = new FenceGate('slot', { exclusive: true });
    const slow = deferred();
    const order = [];
    const running = track(gate.commitAsync(tok('a', 1), async () => { order.push('a+'); await slow.promise; order.push('a-'); }));
    const olderWaiting = track(gate.commitAsync(tok('a', 1), async () => { order.push('a again'); }));
    const newerWaiting = track(gate.commitAsync(tok('c', 3), async () => { order.push('c'); }));
    gate.admit(tok('b', 2)); // the coordinator pushes the next generation
    assert.equal(gate.floor, 2, 'admit does not wait for the running write');
    assert.throws(() => gate.admit(tok('a', 1)), StaleFenceError, 'an older admit is refused and logged');
    slow.resolve();
    await settle();
    assert.equal(running.state, 'fulfilled', 'the running write is not interrupted');
    assert.ok(olderWaiting.value instanceof StaleFenceError);
    assert.equal(olderWaiting.value.rejection.admittedHolderId, 'b');
    assert.equal(newerWaiting.state, 'fulfilled');
    assert.deepEqual(order, ['a+', 'a-', 'c']);
    assert.equal(gate.floor, 3);
    assert.deepEqual(gate.rejections.map((r) => [r.refusedHolderId, r.refusedFence, r.admittedHolderId, r.admittedFence]),
      [['a', 1, 'b', 2], ['a', 1, 'b', 2]]);
  });
});
