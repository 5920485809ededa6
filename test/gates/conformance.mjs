// The conformance suite for JavaScript gates: the rules of Go's
// gates/gatetest, written once and run against FenceGate, lease-fence/sql
// and lease-fence/redis (adapters.mjs). A rule is an async function of a
// config that throws on the first broken rule; runConformance registers
// each as a node:test test, failures runs them and returns what failed (the
// deliberate breaks use it).
//
// config: {
//   create({ maxRejections }) -> { gate, addr }  a fresh gate on a fresh store
//   kind                 adapters.mjs kind, for writer processes (absent: one process only)
//   failedWrite          'keepsFloor' | 'rollsBack'
//   capped               the gate keeps only the newest maxRejections refusals
//   paged                the gate has rejectionsPage(resource, afterSeq, limit)
//   inside               the adapter calls write.inside while the write runs
//   restart(addr)        restarts the store (absent: not run)
//   maxFence             the highest fence the gate can carry, if below 2^53-1
//                        (fence-proxy's header): the fences above it, up to
//                        2^53-1, must be refused as invalid input before
//                        anything changes, and maxFence itself admitted
//   shared               the gate admits writes with the floor's fence in
//                        parallel: raiseWaitsForEqualWrites runs 8 at once
//                        (else 1)
//   unordered            waiting writes are not served in arrival order: a
//                        write with the old fence that arrives after a
//                        waiting raise may run before it (not checked)
// }
// gate: commit(token, { value, fail, nil, inside, signal, options }), admit(token),
// floor(resource), rejections(resource), values(resource), close(), and for
// a paged gate rejectionsPage(resource, afterSeq, limit).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { InvalidArgumentError, StaleFenceError } from 'lease-fence';
import { rng } from '../js/helpers.mjs';

const R = 'deploy-slot';
const MAX_FENCE = Number.MAX_SAFE_INTEGER;
const tk = (holderId, fence, resource = R) => ({ resource, holderId, fence });
const rej = (seq, refusedHolderId, refusedFence, admittedHolderId, admittedFence, resource = R) =>
  ({ seq, resource, refusedHolderId, refusedFence, admittedHolderId, admittedFence });

async function fresh(c, opts = {}) {
  const made = await c.create(opts);
  return made;
}

// refusedBehind makes a gate that keeps max refusals, admits agent-b at
// fence f, then has n writes of agent-a (fences 1 to n) refused, each
// checked; it returns the gate and the refusals it keeps (the last max of
// them where c.capped).
async function refusedBehind(c, max, n, f) {
  const { gate: g } = await fresh(c, { maxRejections: max });
  await g.commit(tk('agent-b', f), { value: `b${f}` });
  const all = [];
  for (let i = 1; i <= n; i++) {
    const r = rej(i, 'agent-a', i, 'agent-b', f);
    await stale('refusal', g.commit(tk('agent-a', i), { value: 'a' }), r);
    all.push(r);
  }
  return { g, kept: c.capped ? all.slice(n - max) : all };
}

async function stale(what, p, want) {
  await assert.rejects(p, (err) => {
    assert.ok(err instanceof StaleFenceError, `${what}: ${err?.name}: ${err?.message}`);
    assert.deepEqual(err.rejection, want, what);
    const admitted = want.admittedHolderId === null ? 'the initial floor' : `holder ${JSON.stringify(want.admittedHolderId)}`;
    assert.equal(err.message, `fence: stale write to ${JSON.stringify(want.resource)} refused (rejection #${want.seq}): ` +
      `holder ${JSON.stringify(want.refusedHolderId)} has fence ${want.refusedFence} but ${admitted} was admitted at fence ${want.admittedFence}`, what);
    return true;
  }, what);
}

async function snapshot(g, r = R) {
  return { floor: await g.floor(r), rejections: await g.rejections(r), values: await g.values(r) };
}

export const rules = {
  async floorRaisedBeforeWrite(c) {
    const { gate: g } = await fresh(c);
    await g.commit(tk('agent-a', 1), { value: 'a1' });
    assert.equal(await g.floor(R), 1);
    if (!c.inside) {
      await g.commit(tk('agent-b', 2), { value: 'b2' });
      assert.equal(await g.floor(R), 2);
      assert.deepEqual(await g.values(R), ['a1', 'b2']);
      return;
    }
    let older;
    let inside = 0;
    await g.commit(tk('agent-b', 2), {
      value: 'b2',
      inside: async () => {
        inside++;
        older = g.commit(tk('agent-a', 1), { value: 'a1-late' });
        older.catch(() => {});
        // Let the older commit reach the gate (it waits behind this write
        // or is refused at once).
        for (let i = 0; i < 50; i++) await new Promise((resolve) => setImmediate(resolve));
      },
    });
    assert.equal(inside, 1, 'the adapter called write.inside once');
    await stale('an older fence arriving while the newer write ran', older, rej(1, 'agent-a', 1, 'agent-b', 2));
    assert.equal(await g.floor(R), 2);
    assert.deepEqual(await g.values(R), ['a1', 'b2']);
  },

  async equalFenceAdmitted(c) {
    const { gate: g } = await fresh(c);
    await g.commit(tk('agent-a', 3), { value: 'a3' });
    await g.commit(tk('agent-a', 3), { value: 'a3-again' });
    await g.commit(tk('agent-b', 3), { value: 'b3' });
    assert.equal(await g.floor(R), 3);
    assert.deepEqual(await g.values(R), ['a3', 'a3-again', 'b3']);
    assert.deepEqual(await g.rejections(R), []);
    await stale('fence 2 after fence 3', g.commit(tk('agent-c', 2), { value: 'c2' }), rej(1, 'agent-c', 2, 'agent-a', 3));
    await g.admit(tk('agent-d', 3));
    assert.equal(await g.floor(R), 3);
  },

  async lowerFenceRefused(c) {
    const { gate: g } = await fresh(c);
    await g.commit(tk('agent-a', 1), { value: 'a1' });
    await g.commit(tk('agent-b', 2), { value: 'b2' });
    const r1 = rej(1, 'agent-a', 1, 'agent-b', 2);
    await stale('fence 1 after fence 2', g.commit(tk('agent-a', 1), { value: 'a1-late' }), r1);
    await g.commit(tk('agent-c', 7), { value: 'c7' });
    const r2 = rej(2, 'agent-b', 2, 'agent-c', 7);
    await stale('fence 2 after fence 7', g.commit(tk('agent-b', 2), { value: 'b2-late' }), r2);
    assert.deepEqual(await g.values(R), ['a1', 'b2', 'c7']);
    assert.equal(await g.floor(R), 7);
    assert.deepEqual(await g.rejections(R), [r1, r2]);
    const O = 'other-slot';
    await g.commit(tk('agent-x', 4, O), { value: 'x4' });
    const ro = rej(1, 'agent-y', 3, 'agent-x', 4, O);
    await stale('another resource', g.commit(tk('agent-y', 3, O), { value: 'y3' }), ro);
    assert.deepEqual(await g.rejections(O), [ro]);
    assert.deepEqual(await g.rejections(R), [r1, r2]);
  },

  async admitRaisesWithoutWriting(c) {
    const { gate: g } = await fresh(c);
    await g.commit(tk('agent-a', 1), { value: 'a1' });
    await g.admit(tk('agent-b', 5));
    assert.equal(await g.floor(R), 5);
    assert.deepEqual(await g.values(R), ['a1']);
    const r1 = rej(1, 'agent-a', 1, 'agent-b', 5);
    await stale('a write below an admitted fence', g.commit(tk('agent-a', 1), { value: 'a1-late' }), r1);
    const r2 = rej(2, 'agent-c', 4, 'agent-b', 5);
    await stale('admit of an older token', g.admit(tk('agent-c', 4)), r2);
    assert.deepEqual(await g.rejections(R), [r1, r2]);
    await g.commit(tk('agent-b', 5), { value: 'b5' });
    assert.deepEqual(await g.values(R), ['a1', 'b5']);
  },

  async failedWrite(c) {
    const { gate: g } = await fresh(c);
    await g.commit(tk('agent-a', 1), { value: 'a1' });
    await assert.rejects(g.commit(tk('agent-b', 2), { value: 'b2-part', fail: true }), (err) =>
      !(err instanceof StaleFenceError) && !(err instanceof InvalidArgumentError));
    assert.deepEqual(await g.rejections(R), []);
    if (c.failedWrite === 'rollsBack') {
      assert.equal(await g.floor(R), 1);
      assert.deepEqual(await g.values(R), ['a1']);
      await g.commit(tk('agent-a', 1), { value: 'a1-again' });
      assert.deepEqual(await g.values(R), ['a1', 'a1-again']);
    } else {
      assert.equal(await g.floor(R), 2);
      assert.deepEqual(await g.values(R), ['a1', 'b2-part']);
      await stale('the older fence after a failed newer write', g.commit(tk('agent-a', 1), { value: 'a1-again' }), rej(1, 'agent-a', 1, 'agent-b', 2));
    }
    await g.commit(tk('agent-b', 2), { value: 'b2' });
    assert.equal(await g.floor(R), 2);
  },

  async invalidInput(c) {
    const { gate: g } = await fresh(c);
    await g.commit(tk('agent-a', 5), { value: 'a5' });
    await g.commit(tk('agent-z', 1), { value: 'z1' }).catch(() => {});
    const bad = {
      fenceZero: [tk('agent-b', 0), 'token.fence'],
      fenceAboveMax: [tk('agent-b', MAX_FENCE + 1), 'token.fence'],
      fenceNotInteger: [tk('agent-b', 5.5), 'token.fence'],
      fenceString: [tk('agent-b', '6'), 'token.fence'],
      fenceNegative: [tk('agent-b', -1), 'token.fence'],
      emptyHolder: [tk('', 6), 'token.holderId'],
      oversizedHolder: [tk('h'.repeat(1025), 6), 'token.holderId'],
      oversizedHolderUtf8: [tk('é'.repeat(513), 6), 'token.holderId'],
      emptyResource: [tk('agent-b', 6, ''), 'token.resource'],
      oversizedResource: [tk('agent-b', 6, 'r'.repeat(1025)), 'token.resource'],
      notAnObject: [null, 'token'],
      staleAndEmptyHolder: [tk('', 1), 'token.holderId'],
    };
    const ceiling = c.maxFence ?? MAX_FENCE;
    if (ceiling < MAX_FENCE) {
      // Valid fences the gate cannot carry: refused too, never cut down.
      bad.fenceAboveGateMax = [tk('agent-b', ceiling + 1), 'token.fence'];
      bad.maxFenceAboveGateMax = [tk('agent-b', MAX_FENCE), 'token.fence'];
    }
    for (const [name, [token, argument]] of Object.entries(bad)) {
      const before = await snapshot(g);
      const check = (err) => err instanceof InvalidArgumentError && err.argument === argument;
      await assert.rejects(Promise.resolve().then(() => g.commit(token, { value: 'bad' })), check, `${name}: commit`);
      await assert.rejects(Promise.resolve().then(() => g.admit(token)), check, `${name}: admit`);
      assert.deepEqual(await snapshot(g), before, `${name} changed nothing`);
    }
    const before = await snapshot(g);
    for (const f of [6, 1]) {
      await assert.rejects(Promise.resolve().then(() => g.commit(tk('agent-b', f), { nil: true })), InvalidArgumentError, `a missing write (fence ${f})`);
    }
    assert.deepEqual(await snapshot(g), before, 'a missing write changed nothing');
    await g.commit(tk('agent-m', ceiling), { value: 'max' });
    assert.equal(await g.floor(R), ceiling);
  },

  async abortedSignal(c) {
    const { gate: g } = await fresh(c);
    await g.commit(tk('agent-a', 2), { value: 'a2' });
    for (const f of [3, 1]) { // would be admitted; would be refused
      const before = await snapshot(g);
      const signal = AbortSignal.abort();
      await assert.rejects(g.commit(tk('agent-b', f), { value: 'b', signal }), (e) => e === signal.reason, `fence ${f} with an aborted signal`);
      assert.deepEqual(await snapshot(g), before, `fence ${f} with an aborted signal changed nothing`);
    }
    for (const options of ['x', { signal: 'not a signal' }]) {
      const before = await snapshot(g);
      await assert.rejects(Promise.resolve().then(() => g.commit(tk('agent-b', 3), { value: 'b', options })), InvalidArgumentError, JSON.stringify(options));
      assert.deepEqual(await snapshot(g), before);
    }
  },

  async rejectionLog(c) {
    const { g, kept } = await refusedBehind(c, 3, 5, 10);
    assert.deepEqual(await g.rejections(R), kept);
  },

  async rejectionPages(c) {
    const n = 8;
    const limit = 3;
    const { g, kept: all } = await refusedBehind(c, 5, n, 20);
    const page = async (afterSeq, lim) => {
      const got = await g.rejectionsPage(R, afterSeq, lim);
      assert.ok(got.length <= lim, `a page of ${lim} holds ${got.length}`);
      return got;
    };
    const got = [];
    let after = 0;
    for (let i = 0; i <= n; i++) {
      const p = await page(after, limit);
      got.push(...p);
      if (p.length < limit) break;
      after = p.at(-1).seq;
    }
    assert.deepEqual(got, all, `pages of ${limit}`);
    assert.deepEqual(await page(all[1].seq, 100), all.slice(2));
    assert.deepEqual(await page(0, 1), all.slice(0, 1));
    assert.deepEqual(await page(n, 10), []);
    assert.deepEqual(await g.rejectionsPage('other-slot', 0, 10), []);
    const before = await snapshot(g);
    await assert.rejects(Promise.resolve().then(() => g.rejectionsPage(R, 0, 0)), InvalidArgumentError, 'limit 0');
    assert.deepEqual(await snapshot(g), before, 'a bad page changed nothing');
  },

  // Once fence f is admitted, no write with a lower fence runs or is
  // admitted. Writes with the floor's fence are in flight (8 at once with
  // c.shared, all admitted together; else 1); a higher fence that arrives
  // then is not admitted until every one of them has finished, and a write
  // with the old fence that arrives after it does not start (it is refused
  // once the higher one is admitted). A broken gate gets SHOW_TIME to admit
  // what it must not; a correct gate passes however slow it is.
  async raiseWaitsForEqualWrites(c) {
    const { gate: g } = await fresh(c);
    const n = c.shared ? 8 : 1;
    await g.commit(tk('agent-a', 5), { value: 'a5' });
    const seen = watcher();
    let inflight = 0;
    let entered = 0;
    let release;
    const released = new Promise((resolve) => { release = resolve; });
    const equal = [];
    for (let i = 0; i < n; i++) {
      equal.push(settled(g.commit(tk('agent-a', 5), {
        value: `agent-a#5#${i}`,
        inside: async () => { inflight++; entered++; seen.poke(); await released; inflight--; },
      })));
    }
    try {
      const ended = Promise.race(equal).then((r) => r);
      const all = await Promise.race([seen.until(() => entered === n, 60_000), ended]);
      if (all !== true) {
        assert.fail(all === false ? `only ${entered} of ${n} writes with the floor's fence were admitted at once: the gate runs them one at a time`
          : `an equal-fence write ended before it was released: ${all.error ?? 'fulfilled'}`);
      }
      // The raise arrives while the n writes are in flight.
      let raiseSaw = -1;
      const raise = settled(g.commit(tk('agent-b', 6), { value: 'b6', inside: async () => { raiseSaw = inflight; seen.poke(); } }));
      const early = await Promise.race([seen.until(() => raiseSaw >= 0, SHOW_TIME), raise]);
      if (early === true) assert.fail(`fence 6 was admitted while ${raiseSaw} writes with fence 5 were in flight`);
      if (early !== false) assert.fail(`fence 6 ended while writes with fence 5 were in flight: ${early.error ?? 'fulfilled'}`);
      // An old fence arriving after the higher one must not start.
      let lateRan = false;
      let late = null;
      if (!c.unordered) {
        late = settled(g.commit(tk('agent-a', 5), { value: 'a5-late', inside: async () => { lateRan = true; } }));
        await Promise.race([late, seen.until(() => false, SHOW_TIME)]);
        assert.ok(!lateRan, 'a write with fence 5 started after fence 6 arrived');
      }
      release();
      for (const r of await Promise.all(equal)) assert.ok(!('error' in r), `a write with fence 5 admitted before the raise: ${r.error}`);
      const r6 = await raise;
      assert.ok(!('error' in r6), `commit(b, 6): ${r6.error}`);
      assert.equal(raiseSaw, 0, `fence 6 was admitted while ${raiseSaw} writes with fence 5 were still in flight`);
      if (late !== null) {
        await stale('an old fence arriving after a raise', late.then((r) => ('error' in r ? Promise.reject(r.error) : r.value)),
          rej(1, 'agent-a', 5, 'agent-b', 6));
        assert.ok(!lateRan, 'a write with fence 5 ran after fence 6 arrived');
      }
      assert.equal(await g.floor(R), 6);
      const got = await g.values(R);
      assert.ok(got.length === n + 2 && got[0] === 'a5' && got[n + 1] === 'b6', `values ${JSON.stringify(got)}: want a5, the ${n} writes with fence 5, then b6`);
    } finally {
      release();
      await Promise.all(equal);
    }
  },

  async concurrentWriters(c) {
    const { gate: g } = await fresh(c, { maxRejections: 1000 });
    const runs = [];
    for (let w = 0; w < 6; w++) runs.push(writeRandom(g, R, `w${w}`, w + 1, 20));
    const attempts = (await Promise.all(runs)).flat();
    checkHistory(await snapshot(g), attempts, []);
  },

  async twoProcesses(c) {
    const { gate: g, addr } = await fresh(c, { maxRejections: 1000 });
    const workers = [startWorker(c.kind, addr, 'proc0', 101, 25), startWorker(c.kind, addr, 'proc1', 102, 25)];
    await Promise.all(workers.map((w) => w.ready));
    for (const w of workers) w.go();
    const local = [writeRandom(g, R, 'local0', 201, 25), writeRandom(g, R, 'local1', 202, 25)];
    const done = await Promise.all(workers.map((w) => w.finished));
    for (const d of done) {
      assert.equal(d.code, 0, `a writer process failed: ${d.stderr}`);
      assert.equal(d.done.length, 25);
    }
    const attempts = [...(await Promise.all(local)).flat(), ...done.flatMap((d) => d.done)];
    checkHistory(await snapshot(g), attempts, []);
  },

  async killedWriter(c) {
    const { gate: g, addr } = await fresh(c, { maxRejections: 1000 });
    const w = startWorker(c.kind, addr, 'victim', 300, -1, 12);
    await w.ready;
    w.go();
    const local = writeRandom(g, R, 'survivor', 301, 25);
    const d = await w.finished;
    assert.equal(d.signal, 'SIGKILL', `the writer process was killed (${d.code}): ${d.stderr}`);
    assert.ok(d.done.length >= 12);
    const attempts = [...d.done, ...(await local)];
    checkHistory(await snapshot(g), attempts, d.inflight);
    await g.commit(tk('after', 1000), { value: 'after#1000#0' });
    assert.equal(await g.floor(R), 1000);
  },

  async restart(c) {
    const { gate: g, addr } = await fresh(c);
    await g.commit(tk('agent-a', 1), { value: 'a1' });
    await g.commit(tk('agent-b', 2), { value: 'b2' });
    const r1 = rej(1, 'agent-a', 1, 'agent-b', 2);
    await stale('before the restart', g.commit(tk('agent-a', 1), { value: 'a1-late' }), r1);
    await g.admit(tk('agent-c', 3));
    await c.restart(addr);
    assert.equal(await g.floor(R), 3);
    assert.deepEqual(await g.values(R), ['a1', 'b2']);
    assert.deepEqual(await g.rejections(R), [r1]);
    await stale('after the restart', g.commit(tk('agent-b', 2), { value: 'b2-late' }), rej(2, 'agent-b', 2, 'agent-c', 3));
    await g.commit(tk('agent-c', 3), { value: 'c3' });
  },
};

/**
 * How long raiseWaitsForEqualWrites gives a gate to admit a write it must
 * not (a higher fence while equal-fence writes are in flight, an old fence
 * after the higher one arrived) before it takes the gate to be waiting. It
 * can only make the rule miss a break on a machine slower than that, never
 * fail a correct gate.
 */
export const SHOW_TIME = 2000;

// settled(p) resolves with { value } or { error } as p settles.
const settled = (p) => Promise.resolve(p).then((value) => ({ value }), (error) => ({ error }));

// watcher: until(cond, ms) resolves true once cond() holds (checked at each
// poke()), false after ms.
function watcher() {
  const waiting = new Set();
  return {
    poke() { for (const w of waiting) w(); },
    until(cond, ms) {
      return new Promise((resolve) => {
        const check = () => {
          if (!cond()) return;
          clearTimeout(timer);
          waiting.delete(check);
          resolve(true);
        };
        const timer = setTimeout(() => { waiting.delete(check); resolve(false); }, ms);
        waiting.add(check);
        check();
      });
    },
  };
}

const processRules = new Set(['twoProcesses', 'killedWriter']);

function applies(rule, c) {
  if (rule === 'raiseWaitsForEqualWrites' && !c.inside) return false;
  if (processRules.has(rule) && !c.kind) return false;
  if (rule === 'restart' && !c.restart) return false;
  if (rule === 'rejectionPages' && !c.paged) return false;
  return true;
}

/** Registers every rule that applies to config as a test. */
export function runConformance(name, config) {
  for (const [rule, fn] of Object.entries(rules)) {
    if (applies(rule, config)) test(`${name}: ${rule}`, () => fn(config));
  }
}

/** Runs the in-process rules and returns { rule: message } for those that failed. */
export async function failures(config) {
  const out = {};
  for (const [rule, fn] of Object.entries(rules)) {
    if (processRules.has(rule) || !applies(rule, config)) continue;
    try {
      await fn(config);
    } catch (err) {
      out[rule] = String(err?.message ?? err);
    }
  }
  return out;
}

/** Commits n random fences (drifting upwards) to resource; returns the attempts. */
export async function writeRandom(g, resource, holder, seed, n, report) {
  const rand = rng(seed);
  const out = [];
  for (let i = 0; n < 0 || i < n; i++) {
    const fence = 1 + i + Math.floor(rand() * 12);
    const a = { holder, fence, value: `${holder}#${fence}#${i}` };
    report?.('start', a);
    try {
      await g.commit(tk(holder, fence, resource), { value: a.value });
      a.outcome = 'landed';
    } catch (err) {
      if (err instanceof StaleFenceError) {
        a.outcome = 'refused';
        a.refusal = err.rejection;
      } else {
        a.outcome = `error: ${err?.message ?? err}`;
      }
    }
    report?.('done', a);
    out.push(a);
  }
  return out;
}

const fenceOf = (v) => Number(v.split('#')[1]);

/** The checks of gatetest's checkHistory. */
export function checkHistory(st, attempts, inflight) {
  const landed = new Set();
  const refused = new Map();
  const maybe = new Map(inflight.map((a) => [a.value, a]));
  let maxLanded = 0;
  for (const a of attempts) {
    if (a.outcome === 'landed') {
      landed.add(a.value);
      maxLanded = Math.max(maxLanded, a.fence);
    } else if (a.outcome === 'refused') {
      refused.set(a.value, a);
      assert.ok(a.refusal.refusedFence === a.fence && a.refusal.refusedHolderId === a.holder && a.refusal.admittedFence > a.fence,
        `refusal of ${a.value}: ${JSON.stringify(a.refusal)}`);
    } else {
      assert.fail(`${a.value}: ${a.outcome}`);
    }
  }
  assert.ok(refused.size > 0, 'some commits were refused: the writers overtook each other');
  const seen = new Set();
  let prev = 0;
  for (const v of st.values) {
    assert.ok(!seen.has(v), `${v} landed twice`);
    seen.add(v);
    const f = fenceOf(v);
    assert.ok(f >= prev, `${v} landed after a write with fence ${prev}`);
    prev = f;
    if (maybe.has(v)) maxLanded = Math.max(maxLanded, f);
    else assert.ok(landed.has(v), `${v} landed but was ${refused.has(v) ? 'refused' : 'not reported landed'}`);
  }
  for (const v of landed) assert.ok(seen.has(v), `${v} was reported landed but is not in the store`);
  const key = (r) => JSON.stringify([r.seq, r.resource, r.refusedHolderId, r.refusedFence, r.admittedHolderId, r.admittedFence]);
  const reported = new Map();
  for (const a of refused.values()) reported.set(key(a.refusal), (reported.get(key(a.refusal)) ?? 0) + 1);
  st.rejections.forEach((r, i) => {
    assert.equal(r.seq, i + 1, 'rejections are numbered 1..n');
    const k = key(r);
    if (reported.get(k) > 0) {
      reported.set(k, reported.get(k) - 1);
      return;
    }
    const m = [...maybe.values()].find((a) => a.holder === r.refusedHolderId && a.fence === r.refusedFence && !seen.has(a.value));
    assert.ok(m, `logged refusal ${k} was not reported to any writer`);
    maybe.delete(m.value);
  });
  for (const [k, n] of reported) assert.equal(n, 0, `refusal ${k} was reported but is not in the log`);
  assert.equal(st.floor, maxLanded, 'the floor is the highest fence landed');
}

const workerFile = fileURLToPath(new URL('./worker.mjs', import.meta.url));

/** Starts a writer process; killAfter: SIGKILL it after that many commits. */
export function startWorker(kind, addr, holder, seed, n, killAfter) {
  const child = spawn(process.execPath, [workerFile, kind, addr, R, holder, String(seed), String(n)], { stdio: ['pipe', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (d) => { stderr += d; });
  const done = [];
  const started = new Map();
  let readyResolve;
  const ready = new Promise((resolve) => { readyResolve = resolve; });
  createInterface({ input: child.stdout }).on('line', (line) => {
    const [kind2, body] = [line.slice(0, line.indexOf(' ') < 0 ? line.length : line.indexOf(' ')), line.slice(line.indexOf(' ') + 1)];
    if (kind2 === 'ready') readyResolve();
    if (kind2 === 'start') { const a = JSON.parse(body); started.set(a.value, a); }
    if (kind2 === 'done') {
      const a = JSON.parse(body);
      started.delete(a.value);
      done.push(a);
      if (killAfter && done.length === killAfter) child.kill('SIGKILL');
    }
  });
  const finished = new Promise((resolve) => child.once('close', (code, signal) =>
    resolve({ code, signal, stderr, done, inflight: [...started.values()] })));
  child.once('exit', () => readyResolve());
  return { ready, go: () => child.stdin.write('go\n'), finished };
}
