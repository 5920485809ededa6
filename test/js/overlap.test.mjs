// The failure the library exists for, driven from JavaScript: a naive lease
// lets two holders both pass their check and both write, with nothing
// recorded; the fenced lease refuses the stale write and logs it.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createManualClock, createNaiveLease, FenceGate, LeaseClient, LeaseCoordinator, StaleFenceError } from 'lease-fence';

// A timeline every participant's clock follows; each clock has its own domain.
function timeline(...domains) {
  const clocks = Object.fromEntries(domains.map((d) => [d, createManualClock(d)]));
  return { clocks, at(ms) { for (const c of Object.values(clocks)) c.set(ms); } };
}

describe('naive versus fenced', () => {
  test('naive: both agents pass their own check, both writes land, no conflict is recorded', () => {
    const { clocks, at } = timeline('agent-a', 'agent-b');
    const resource = { value: 'initial', writes: [] };
    const write = (who) => { resource.value = who; resource.writes.push(who); };

    at(0);
    const leaseA = createNaiveLease(clocks['agent-a'], 1000); // t=0 A acquires, ttl 1000
    at(950);
    assert.equal(leaseA.valid(), true); // t=950 A checks: 950 < 1000, begins its slow write
    at(1000);
    const leaseB = createNaiveLease(clocks['agent-b'], 1000); // t=1000 reassigned to B
    assert.equal(leaseB.valid(), true);
    write('agent-b');
    at(1400);
    write('agent-a'); // t=1400 A's write lands

    assert.deepEqual(resource.writes, ['agent-b', 'agent-a'], 'both writes landed');
    assert.equal(resource.value, 'agent-a', 'the stale write won, silently');
    assert.ok(leaseA.expiresAt.millis <= 1400, 'A wrote after its own expiresAt');
  });

  test('fenced: the same sequence refuses the stale write and logs both holders', () => {
    const { clocks, at } = timeline('coordinator', 'agent-a', 'agent-b');
    const coordinator = new LeaseCoordinator({ clock: clocks.coordinator, ttlMillis: 1000 });
    const a = new LeaseClient({ clock: clocks['agent-a'], holderId: 'agent-a' });
    const b = new LeaseClient({ clock: clocks['agent-b'], holderId: 'agent-b' });
    const gate = new FenceGate('deploy-slot');
    const resource = { value: 'initial', writes: [] };
    const write = (who) => () => { resource.value = who; resource.writes.push(who); };

    at(0);
    const reqA = a.beginAcquire('deploy-slot');
    const leaseA = a.completeAcquire(reqA, coordinator.acquire(reqA).grant);
    at(950);
    assert.equal(leaseA.hasExpired(), false); // A's advisory check passes, A begins its slow write
    at(1000);
    const reqB = b.beginAcquire('deploy-slot');
    const outB = coordinator.acquire(reqB);
    assert.equal(outB.ok, true, 'the coordinator expired A and reassigned');
    const leaseB = b.completeAcquire(reqB, outB.grant);
    gate.commit(leaseB.token, write('agent-b'));
    at(1400);
    assert.throws(() => gate.commit(leaseA.token, write('agent-a')), StaleFenceError);

    assert.deepEqual(resource.writes, ['agent-b']);
    assert.equal(resource.value, 'agent-b');
    assert.deepEqual(gate.rejections, [{
      seq: 1, resource: 'deploy-slot',
      refusedHolderId: 'agent-a', refusedFence: leaseA.token.fence,
      admittedHolderId: 'agent-b', admittedFence: leaseB.token.fence,
    }]);
  });

  test('a clock stepping per read puts the check and the write at different instants', () => {
    // With a clock that only moves between calls, the check and the write
    // would see the same instant and the gap could not be written down.
    const clock = createManualClock('agent-a', { stepPerRead: 60 });
    const naive = createNaiveLease(clock, 100); // read 0: expiresAt = 100
    assert.equal(naive.expiresAt.millis, 100);
    assert.equal(naive.valid(), true); // read 60: 60 < 100
    const landedAt = clock.now(); // the write lands at the next reading
    assert.ok(landedAt.since(naive.expiresAt) > 0, `write landed at ${landedAt.millis}, after expiresAt 100`);
    assert.equal(naive.valid(), false);
  });

  test('the naive renewal dates the lease from the reply, not from the coordinator', () => {
    const clock = createManualClock('agent-a');
    const naive = createNaiveLease(clock, 1000);
    // t=0 A sends a renewal; the coordinator extends its copy to 1040 at t=40; the reply lands at t=900.
    clock.set(900);
    naive.renewed();
    assert.equal(naive.expiresAt.millis, 1900, 'A now believes it holds the lease 860 ms longer than the coordinator');
  });

  test('createNaiveLease checks its arguments', () => {
    assert.throws(() => createNaiveLease({}, 10), (e) => e.name === 'InvalidArgumentError' && e.argument === 'clock');
    assert.throws(() => createNaiveLease(createManualClock('c'), 0), (e) => e.argument === 'ttlMillis');
  });
});
