// Shared set-up for the node --test suite: a coordinator and clients on
// manual clocks, a seeded random source, and promise helpers for async writes.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createManualClock, FenceGate, LeaseClient, LeaseCoordinator } from 'lease-fence';

/** A coordinator and two clients, each on its own manual clock. */
export function world({ ttlMillis = 1000, skew = 0, stepPerRead = 0, startFence } = {}) {
  const coordClock = createManualClock('coordinator', { stepPerRead });
  const aClock = createManualClock('agent-a', { stepPerRead });
  const bClock = createManualClock('agent-b', { stepPerRead });
  const coordinator = new LeaseCoordinator({ clock: coordClock, ttlMillis, startFence });
  const a = new LeaseClient({ clock: aClock, holderId: 'agent-a', clockSkewMillis: skew });
  const b = new LeaseClient({ clock: bClock, holderId: 'agent-b', clockSkewMillis: skew });
  return { coordClock, aClock, bClock, coordinator, a, b };
}

/** Acquires resource for client and returns the lease; fails the test if denied. */
export function acquire(coordinator, client, resource = 'slot') {
  const request = client.beginAcquire(resource);
  const outcome = coordinator.acquire(request);
  assert.equal(outcome.ok, true, `acquire denied: ${JSON.stringify(outcome)}`);
  return client.completeAcquire(request, outcome.grant);
}

/** A seeded generator (mulberry32): the same seed gives the same run. */
export function rng(seed) {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * What a property schedule of seed draws from and reports to: random (rng),
 * pick(n) an integer below n, chance(p) true with probability p, and
 * fail(msg), which adds msg, with the seed, to violations.
 */
export function scheduleOf(seed) {
  const random = rng(seed);
  const violations = [];
  return {
    random,
    pick: (n) => Math.floor(random() * n),
    chance: (p) => random() < p,
    violations,
    fail: (msg) => violations.push(`seed ${seed}: ${msg}`),
  };
}

/** A promise settled from outside, for writes that wait on something. */
export function deferred() {
  let resolve, reject;
  const promise = new Promise((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/** Lets every pending promise reaction run (waits one macrotask). */
export const settle = () => new Promise((resolve) => setImmediate(resolve));

/**
 * The tests of a seeded schedule checker, runSchedule(seed, newGate) →
 * { counts, violations }: `schedules` seeds on exclusive FenceGates show no
 * violation and every kind of outcome at least once per ten schedules; each
 * of the broken gate classes is caught in at least 10 of 100 seeds.
 */
export function scheduleTests(name, schedules, runSchedule, broken) {
  test(name, async (t) => {
    const total = {};
    const violations = [];
    for (let seed = 1; seed <= schedules; seed++) {
      const r = await runSchedule(seed, (resource) => new FenceGate(resource, { exclusive: true }));
      for (const [k, v] of Object.entries(r.counts)) total[k] = (total[k] ?? 0) + v;
      violations.push(...r.violations);
    }
    t.diagnostic(`outcomes over ${schedules} schedules: ${JSON.stringify(total)}`);
    assert.deepEqual(violations.slice(0, 10), []);
    // The schedules exercise what they claim to: every kind of outcome, often.
    for (const [k, v] of Object.entries(total)) assert.ok(v >= schedules / 10, `only ${v} calls ended ${k}`);
  });
  for (const Broken of broken) {
    test(`the checker catches a broken gate: ${Broken.name}`, async (t) => {
      let caught = 0;
      for (let seed = 1; seed <= 100; seed++) {
        if ((await runSchedule(seed, (resource) => new Broken(resource))).violations.length) caught++;
      }
      t.diagnostic(`${caught} of 100 schedules caught ${Broken.name}`);
      assert.ok(caught >= 10, `only ${caught} of 100 schedules caught ${Broken.name}`);
    });
  }
}
