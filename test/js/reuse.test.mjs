// coordinator.acquire and client.completeAcquire have a path that sends no
// arguments: when the request is the one the last beginAcquire returned and
// the grant the one the last acquire of it returned, both unchanged, Go
// uses its own copies (Bridge.last and Bridge.lastGrant). It must be
// indistinguishable from encoding them: every scenario below runs twice, on
// twin worlds whose manual clocks read the same, once passing the objects
// the library returned (or those objects altered in place) and once passing
// copies (which always take the encoding path), and the results and errors
// must be equal.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { FenceGate, LeaseClient, LeaseFenceError } from 'lease-fence';
import { world } from './helpers.mjs';

const reused = () => LeaseClient[Symbol.for('lease-fence.reusedCalls')];

const copy = (v) => (typeof v === 'object' && v !== null ? { ...v, ...(v.sentAt ? { sentAt: { ...v.sentAt } } : {}),
  ...(v.coordinatorExpiresAt ? { coordinatorExpiresAt: { ...v.coordinatorExpiresAt } } : {}) } : v);

// play runs steps in a fresh world. Each step gets the context and returns a
// value to log. On the reuse side the steps pass the objects the library
// returned (altered in place by some steps); on the other side they pass
// copies made as soon as the library returned them. Request ids are random:
// the log names them by order of appearance.
function play(reuse, steps) {
  const w = world({ stepPerRead: 1 });
  const ctx = { ...w, own: (v) => (reuse ? v : copy(v)) };
  const ids = [];
  const name = (s) => {
    for (const [i, id] of ids.entries()) s = s.replaceAll(id, `<id${i}>`);
    return s;
  };
  const log = [];
  const before = reused();
  for (const step of steps) {
    try {
      const v = step(ctx);
      if (v && typeof v === 'object' && typeof v.requestId === 'string' && !ids.includes(v.requestId)) ids.push(v.requestId);
      log.push(JSON.parse(name(JSON.stringify(v ?? null))));
    } catch (e) {
      log.push({ error: e.name, message: name(e.message), argument: e.argument, field: e.field,
        expected: e.expected && name(String(e.expected)), actual: e.actual && name(String(e.actual)) });
    }
  }
  return { log, reused: reused() - before };
}

const begin = (resource = 'slot', client = 'a') => (c) => (c.req = c.own(c[client].beginAcquire(resource)));
const acquire = (alter) => (c) => {
  alter?.(c.req);
  const out = c.coordinator.acquire(c.req);
  if (out.ok) c.grant = c.own(out.grant);
  return out;
};
const complete = (alterReq, alterGrant, client = 'a') => (c) => {
  alterReq?.(c.req);
  alterGrant?.(c.grant);
  return c[client].completeAcquire(c.req, c.grant);
};

const scenarios = {
  'a whole cycle': [begin(), acquire(), complete()],
  'a retried acquire is answered from the replay cache': [begin(), acquire(), acquire(), complete()],
  'a second completion': [begin(), acquire(), complete(), complete()],
  'a denial, then a grant of another resource': [begin(), acquire(), complete(), begin(), acquire(), begin('other'), acquire(), complete()],
  'a grant from an older request': [begin(), acquire(), begin('other'), complete()],
  'completed by another client': [begin(), acquire(), complete(undefined, undefined, 'b')],
  'another client began a request in between': [begin(), acquire(), (c) => c.b.beginAcquire('x'), complete()],
};
const requestChanges = {
  resource: (r) => { r.resource = 'other'; },
  holderId: (r) => { r.holderId = 'agent-b'; },
  requestId: (r) => { r.requestId = 'zzz'; },
  kind: (r) => { r.kind = 'renew'; },
  fence: (r) => { r.fence = 3; },
  'sentAt.millis': (r) => { r.sentAt.millis -= 5; },
  'sentAt.domain': (r) => { r.sentAt.domain = 'agent-b'; },
  'sentAt replaced by an equal object': (r) => { r.sentAt = { millis: r.sentAt.millis, domain: r.sentAt.domain }; },
  'sentAt removed': (r) => { delete r.sentAt; },
};
for (const [field, alter] of Object.entries(requestChanges)) {
  scenarios[`request.${field} changed before acquire`] = [begin(), acquire(alter), complete()];
  scenarios[`request.${field} changed before complete`] = [begin(), acquire(), complete(alter), complete()];
}
const grantChanges = {
  requestId: (g) => { g.requestId = 'zzz'; },
  resource: (g) => { g.resource = 'other'; },
  holderId: (g) => { g.holderId = 'agent-b'; },
  fence: (g) => { g.fence += 1; },
  'fence (not a number)': (g) => { g.fence = String(g.fence); },
  ttlMillis: (g) => { g.ttlMillis = 5; },
  'coordinatorExpiresAt.millis': (g) => { g.coordinatorExpiresAt.millis += 1; },
  'coordinatorExpiresAt.domain': (g) => { g.coordinatorExpiresAt.domain = 'agent-a'; },
  'coordinatorExpiresAt replaced by an equal object': (g) => { g.coordinatorExpiresAt = { ...g.coordinatorExpiresAt }; },
};
for (const [field, alter] of Object.entries(grantChanges)) {
  scenarios[`grant.${field} changed before complete`] = [begin(), acquire(), complete(undefined, alter), complete()];
}

describe('acquire and completeAcquire with the last request and grant', () => {
  for (const [name, steps] of Object.entries(scenarios)) {
    test(`${name}: the same results and errors by both paths`, () => {
      const fast = play(true, steps);
      const slow = play(false, steps);
      assert.deepEqual(fast.log, slow.log);
      assert.equal(slow.reused, 0);
    });
  }

  test('the objects the library returned, unchanged, are reused; anything else is encoded', () => {
    assert.equal(play(true, scenarios['a whole cycle']).reused, 2);
    assert.equal(play(true, scenarios['request.resource changed before acquire']).reused, 0);
    assert.equal(play(true, scenarios['grant.ttlMillis changed before complete']).reused, 1); // acquire only; the second complete sees the changed grant
    assert.equal(play(true, scenarios['a grant from an older request']).reused, 1);
    const { log } = play(true, scenarios['a whole cycle']);
    assert.equal(log[2].token.fence, 1);
    assert.equal(log[2].deadline.millis, log[0].sentAt.millis + 1000);
  });

  test('a getter that calls into the library while the request is read refuses the call, as on the encoding path', () => {
    for (const reuse of [true, false]) {
      const { coordinator, a, b } = world();
      const req = a.beginAcquire('slot');
      const r = reuse ? req : copy(req);
      const resource = r.resource;
      Object.defineProperty(r, 'resource', { get: () => { b.beginAcquire('x'); return resource; } });
      assert.throws(() => coordinator.acquire(r), (e) => e instanceof LeaseFenceError && /getter called into lease-fence/.test(e.message));
      // Nothing was acquired: a plain request for the resource is granted fence 1.
      assert.equal(coordinator.acquire(a.beginAcquire('slot')).grant.fence, 1);
    }
  });

  test('each field is read once', () => {
    for (const reuse of [true, false]) {
      const { coordinator, a } = world();
      const req = a.beginAcquire('slot');
      const r = reuse ? req : copy(req);
      const reads = {};
      for (const k of ['kind', 'requestId', 'resource', 'holderId', 'sentAt']) {
        const v = r[k];
        Object.defineProperty(r, k, { get: () => { reads[k] = (reads[k] ?? 0) + 1; return v; } });
      }
      assert.equal(coordinator.acquire(r).ok, true);
      assert.deepEqual(reads, { kind: 1, requestId: 1, resource: 1, holderId: 1, sentAt: 1 });
    }
  });

  test('beginAcquire passes a resource that can be interned by id and encodes any other: the same requests and errors', () => {
    const { a } = world();
    for (const resource of ['slot', 'é-slot', 'x'.repeat(64), 'x'.repeat(65), 'y'.repeat(2000)]) {
      const req = a.beginAcquire(resource);
      assert.equal(req.resource, resource);
      assert.equal(req.kind, 'acquire');
    }
    for (const [resource, argument] of [['', 'resource'], ['x\ud800', 'resource'], [5, 'resource'], [undefined, 'resource']]) {
      assert.throws(() => a.beginAcquire(resource), (e) => e.argument === argument, String(resource));
    }
    // Interned or not, a request is granted and completed the same way.
    const { coordinator, a: c } = world();
    for (const resource of ['r1', 'r'.repeat(100)]) {
      const req = c.beginAcquire(resource);
      const out = coordinator.acquire(req);
      assert.equal(c.completeAcquire(req, out.grant).token.resource, resource);
    }
  });

  test('Go gets a turn of its own (lf_yield) in a microtask after every 1,024 calls into it, and only then', async () => {
    const wasmCalls = () => FenceGate[Symbol.for('lease-fence.wasmCalls')];
    const { coordinator, a } = world();
    await Promise.resolve(); // let a yield already queued run
    const gate = new FenceGate('slot');
    const start = wasmCalls();
    let calls = 0;
    while ((start + calls) % 1024 !== 1023) {
      gate.floor; // one call into Go
      calls++;
    }
    await Promise.resolve();
    assert.equal(wasmCalls(), start + calls, 'no yield before the 1,024th call');
    gate.floor; // the 1,024th
    assert.equal(wasmCalls(), start + calls + 1, 'the yield waits for a microtask');
    await Promise.resolve();
    assert.equal(wasmCalls(), start + calls + 2, 'one yield after the 1,024th call');
    // Everything still works after it.
    const req = a.beginAcquire('slot');
    assert.equal(a.completeAcquire(req, coordinator.acquire(req).grant).token.fence, 1);
  });
});

