// Revoke and election values with LeaseServiceClient against the real
// coordinators: the native server (no -auth: this process is a loopback
// caller, so it may revoke) and the Worker under `wrangler dev` (no tokens:
// a revoke is refused, 403, as docs/service.md says).
//
// The TTL is a minute, so that no lease here runs out while a loaded
// machine stalls the test between its calls: at 2 s the waiter's holder
// (acquired, never renewed) could expire before the revoke found the
// waiter, and a hold could lose its lease to a late renewal. The hold that
// a revoke ends renews every 100 ms instead, so it meets the revoke soon.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { InvalidArgumentError } from 'lease-fence';
import {
  LeaseExpiredError,
  LeaseLostError,
  LeaseRevokedError,
  LeaseServiceError,
  isLeaseLost,
} from 'lease-fence/service-client';
import { LeaseServiceClient } from './transport.mjs';
import { TARGETS, changed, startNative, startWorker, stopAll, tracked, until } from './harness.mjs';

const TTL = 60_000;
// The revoked hold's renewals: often, so that it meets the revoke soon.
const RENEW_EVERY = 100;
const targets = {};

before(async () => {
  const started = await Promise.all(TARGETS.map((kind) => (kind === 'native' ? startNative({ ttl: TTL }) : startWorker({ ttl: TTL }))));
  for (const t of started) targets[t.kind] = t;
});

after(() => stopAll());

let seq = 0;
const resourceName = (what) => `revoke-${what}-${process.pid}-${++seq}`;

function client(t, holderId) {
  return new LeaseServiceClient({ baseURL: t.url, holderId, backoff: () => 0, attemptTimeoutMillis: 30_000 });
}

async function rejection(promise) {
  try {
    await promise;
  } catch (e) {
    return e;
  }
  assert.fail('expected a rejection');
}

describe('native coordinator', () => {
  test('revoke ends a hold: its signal aborts with a LeaseRevokedError, the next fence is above', async () => {
    const T = targets.native;
    const r = resourceName('hold');
    const a = client(T, 'rv-a');
    const ops = client(T, 'ops');
    const held = await a.hold(r, { renewEveryMillis: RENEW_EVERY });
    const fence = held.token.fence;
    assert.deepEqual(await ops.revoke(r), { holderId: 'rv-a', fence });
    await until(() => held.signal.aborted, 'the hold ends at its next renewal', 30_000, [held.signal, 'abort']);
    const reason = held.signal.reason;
    assert.ok(reason instanceof LeaseRevokedError, String(reason));
    assert.ok(reason instanceof LeaseLostError && isLeaseLost(reason));
    assert.equal(reason.code, 'lease_lost');
    assert.ok(reason.cause instanceof LeaseExpiredError && reason.cause.revoked === true, String(reason.cause));
    assert.match(reason.message, /revoked/);
    const again = await rejection(ops.revoke(r, { fence }));
    assert.ok(again instanceof LeaseServiceError && again.code === 'not_held' && again.status === 409, String(again));
    const b = await client(T, 'rv-b').acquire(r);
    assert.ok(b.token.fence > fence, `${b.token.fence} after ${fence}`);
    // Holder and fence narrow it: another holder's or fence's is not held.
    assert.equal((await rejection(ops.revoke(r, { holderId: 'rv-a' }))).code, 'not_held');
    assert.equal((await rejection(ops.revoke(r, { fence: b.token.fence + 1 }))).code, 'not_held');
    assert.deepEqual(await ops.revoke(r, { holderId: 'rv-b', fence: b.token.fence }), { holderId: 'rv-b', fence: b.token.fence });
  });

  test('a renewal and a release of a revoked lease are LeaseExpiredError with revoked', async () => {
    const T = targets.native;
    const r = resourceName('renew');
    const a = client(T, 'rv-c');
    const lease = await a.acquire(r);
    await client(T, 'ops').revoke(r);
    const e = await rejection(a.renew(lease));
    assert.ok(e instanceof LeaseExpiredError && e.revoked === true, String(e));
    const plain = await a.acquire(resourceName('plain'));
    await a.release(plain);
    assert.equal((await rejection(a.release(plain))).revoked, false);
  });

  test('revoke removes a waiter: its hold rejects with code revoked', async () => {
    const T = targets.native;
    const r = resourceName('waiter');
    const holder = await client(T, 'rv-d').acquire(r);
    const ops = client(T, 'ops');
    // The waiter is revoked once the coordinator says it joined the queue.
    const stopWatching = new AbortController();
    const events = ops.watch({ prefix: r, signal: stopWatching.signal })[Symbol.asyncIterator]();
    assert.equal((await events.next()).value.type, 'hello');
    const waiting = tracked(client(T, 'rv-e').hold(r, { waitMillis: 60_000 }));
    const joined = (ev) => ev.type === 'waiting' && ev.resource === r && ev.holderId === 'rv-e';
    while (!joined((await events.next()).value));
    stopWatching.abort();
    assert.deepEqual(await ops.revoke(r, { holderId: 'rv-e' }), { removedWaiter: 'rv-e' });
    await waiting.promise;
    assert.ok(waiting.error instanceof LeaseServiceError && waiting.error.code === 'revoked', String(waiting.error));
    const st = await ops.inspect(r);
    assert.equal(st.fence, holder.token.fence);
  });
});

if (TARGETS.includes('worker')) describe('Worker under wrangler dev', () => {
  test('a revoke without an admin token is refused: 403 forbidden', async () => {
    const T = targets.worker;
    const r = resourceName('worker');
    const lease = await client(T, 'rv-w').acquire(r);
    const e = await rejection(client(T, 'ops').revoke(r));
    assert.ok(e instanceof LeaseServiceError && e.code === 'forbidden' && e.status === 403, String(e));
    await client(T, 'rv-w').inspect(r).then((st) => assert.equal(st.fence, lease.token.fence));
  });
});

for (const kind of TARGETS) {
  describe(`election values (${kind})`, () => {
    test('campaign(value), proclaim(value), leaders with their values', async () => {
      const T = targets[kind];
      const name = resourceName(`election-${kind}`);
      const e = client(T, 'ev-a').election(name);
      await assert.rejects(e.proclaim('x'), InvalidArgumentError);
      const big = 'é'.repeat(2049);
      await assert.rejects(e.campaign(big), InvalidArgumentError);
      const h = await e.campaign('10.0.0.1:80');
      const fence = h.token.fence;
      assert.deepEqual(await e.leader(), { holderId: 'ev-a', fence, value: '10.0.0.1:80' });
      // Aborted however the test ends: an observer left running after a
      // failure kept retrying its stopped server, and the file never ended.
      const ac = new AbortController();
      const seen = [];
      const observed = tracked((async () => {
        for await (const l of client(T, 'ev-o').election(name).observe({ signal: ac.signal })) {
          seen.push(l);
          changed();
          if (seen.length === 2) break;
        }
      })());
      try {
        await until(() => seen.length === 1, 'the first leader observed', 30_000);
        await e.proclaim('10.0.0.2:80');
        await observed.promise;
      } finally {
        ac.abort();
      }
      assert.equal(observed.error, undefined, String(observed.error));
      assert.deepEqual(seen, [{ holderId: 'ev-a', fence, value: '10.0.0.1:80' }, { holderId: 'ev-a', fence, value: '10.0.0.2:80' }]);
      await h.release();
      const late = await rejection(e.proclaim('late'));
      assert.ok(late instanceof LeaseExpiredError, String(late));
      const plain = await client(T, 'ev-b').election(name).campaign();
      assert.deepEqual(await e.leader(), { holderId: 'ev-b', fence: plain.token.fence });
      await plain.release();
    });
  });
}
