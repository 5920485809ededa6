// Shared set-up for the node --test suite: a coordinator and clients on
// manual clocks, a seeded random source, and promise helpers for async writes.
import assert from 'node:assert/strict';
import { createManualClock, LeaseClient, LeaseCoordinator } from 'lease-fence';

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
