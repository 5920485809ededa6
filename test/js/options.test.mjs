// Options objects: every API that takes one refuses an option it does not
// have (a misspelt `{ waitMillis }`, say) with an InvalidArgumentError naming
// it, and changes nothing; every option it does have may be given as
// undefined (what TypeScript's exactOptionalPropertyTypes spells as
// `x?: T | undefined`). Only own enumerable string keys count: inherited
// properties and symbol keys are not options, and reading the keys runs no
// getter.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import {
  createManualClock, FenceGate, InvalidArgumentError, LeaseClient, LeaseCoordinator,
} from 'lease-fence';
import { LeaseServiceClient } from 'lease-fence/service-client';

const refused = (name, what) => (e) => e instanceof InvalidArgumentError && e.argument === `options.${name}` &&
  e.message.includes(`${what} has no option ${JSON.stringify(name)}`);

// A coordinator behind a fetch function, speaking the service's protocol
// closely enough for the client: the options checks must refuse before it
// is ever called.
function fakeService() {
  const coordinator = new LeaseCoordinator({ clock: createManualClock('coordinator'), ttlMillis: 60_000 });
  const calls = [];
  const fetch = async (url, init) => {
    calls.push(url);
    const body = JSON.parse(init.body);
    const op = url.slice(url.lastIndexOf('/') + 1);
    let answer;
    if (op === 'acquire') answer = coordinator.acquire({ ...body, secret: undefined });
    else if (op === 'renew') answer = coordinator.renew({ ...body, secret: undefined });
    else answer = { ok: coordinator.release({ resource: body.resource, holderId: body.holderId, fence: body.fence }) };
    if (answer.ok && answer.grant) answer = { ok: true, grant: answer.grant };
    return new Response(JSON.stringify(answer), { status: 200, headers: { 'content-type': 'application/json' } });
  };
  return { fetch, calls };
}

describe('unknown option names are refused, naming the option', () => {
  test('createManualClock', () => {
    assert.throws(() => createManualClock('c', { start: 5, stepPerread: 1 }), refused('stepPerread', 'createManualClock'));
    assert.equal(createManualClock('c', { start: undefined, stepPerRead: undefined }).now().millis, 0);
  });

  test('LeaseCoordinator', () => {
    const clock = createManualClock('c');
    assert.throws(() => new LeaseCoordinator({ clock, ttlMillis: 10, ttl: 10 }), refused('ttl', 'LeaseCoordinator'));
    assert.throws(() => new LeaseCoordinator({ clock, ttlMillis: 10, startFence: 0, waitMillis: 5 }), refused('waitMillis', 'LeaseCoordinator'));
    assert.equal(new LeaseCoordinator({ clock, ttlMillis: 10, startFence: undefined }).issuedFence, 0);
  });

  test('LeaseClient', () => {
    const clock = createManualClock('a');
    assert.throws(() => new LeaseClient({ clock, holderId: 'a', clockSkew: 5 }), refused('clockSkew', 'LeaseClient'));
    assert.equal(new LeaseClient({ clock, holderId: 'a', clockSkewMillis: undefined }).holderId, 'a');
  });

  test('FenceGate', () => {
    assert.throws(() => new FenceGate('r', { initialFloor: 3, floor: 4 }), refused('floor', 'FenceGate'));
    const gate = new FenceGate('r', { initialFloor: undefined, maxRejections: undefined });
    assert.equal(gate.floor, 0);
  });

  test('gate.commitAsync: rejects, fn never runs, nothing logged, the floor stays', async () => {
    const gate = new FenceGate('r');
    gate.admit({ resource: 'r', holderId: 'a', fence: 2 });
    let ran = false;
    await assert.rejects(gate.commitAsync({ resource: 'r', holderId: 'a', fence: 3 }, () => { ran = true; }, { timeoutMillis: 5 }),
      refused('timeoutMillis', 'gate.commitAsync'));
    await assert.rejects(gate.commitAsync({ resource: 'r', holderId: 'a', fence: 3 }, () => { ran = true; }, { signal: undefined, sginal: 1 }),
      refused('sginal', 'gate.commitAsync'));
    assert.equal(ran, false);
    assert.equal(gate.floor, 2);
    assert.equal(gate.rejectionCount, 0);
    assert.equal(await gate.commitAsync({ resource: 'r', holderId: 'a', fence: 3 }, () => 'ok', { signal: undefined }), 'ok');
  });

  test('only own enumerable string keys count, and no getter runs for the check', async () => {
    const gate = new FenceGate('r');
    const inherited = Object.create({ waitMillis: 5 });
    const withSymbol = { [Symbol('x')]: 1 };
    const hidden = Object.defineProperty({}, 'waitMillis', { value: 5, enumerable: false });
    for (const options of [inherited, withSymbol, hidden]) {
      assert.equal(await gate.commitAsync({ resource: 'r', holderId: 'a', fence: 1 }, () => 'ok', options), 'ok');
      assert.ok(new FenceGate('r', options));
      assert.ok(createManualClock('c', options));
    }
    let reads = 0;
    const getterUnknown = Object.defineProperty({}, 'extra', { get() { reads++; return 1; }, enumerable: true });
    assert.throws(() => new FenceGate('r', getterUnknown), refused('extra', 'FenceGate'));
    await assert.rejects(gate.commitAsync({ resource: 'r', holderId: 'a', fence: 1 }, () => {}, getterUnknown), refused('extra', 'gate.commitAsync'));
    assert.equal(reads, 0);
  });

  test('new LeaseServiceClient and each of its calls; nothing is sent', async () => {
    const { fetch, calls } = fakeService();
    const base = { baseURL: 'http://127.0.0.1:1', holderId: 'agent-a', fetch, attempts: 1 };
    assert.throws(() => new LeaseServiceClient({ ...base, waitMillis: 30_000 }), refused('waitMillis', 'new LeaseServiceClient'));
    assert.throws(() => new LeaseServiceClient({ ...base, timeout: 5 }), refused('timeout', 'new LeaseServiceClient'));
    const client = new LeaseServiceClient({
      ...base, clock: undefined, clockSkewMillis: undefined, leaseClient: undefined, attemptTimeoutMillis: undefined, timeoutMillis: undefined, backoff: undefined,
    });
    await assert.rejects(client.acquire('r', { waitMillis: 30_000 }), refused('waitMillis', 'client.acquire'));
    assert.equal(calls.length, 0);
    const lease = await client.acquire('r', { signal: undefined, timeoutMillis: undefined });
    assert.equal(calls.length, 1);
    await assert.rejects(client.renew(lease, { signl: AbortSignal.timeout(1000) }), refused('signl', 'client.renew'));
    await assert.rejects(client.release(lease, { retries: 3 }), refused('retries', 'client.release'));
    await assert.rejects(lease.dispose({ force: true }), refused('force', 'lease.dispose'));
    assert.equal(calls.length, 1, 'nothing was sent for the refused calls');
    const renewed = await client.renew(lease, { timeoutMillis: undefined });
    await client.release(renewed, { signal: undefined });
    assert.equal(calls.length, 3);
  });
});
