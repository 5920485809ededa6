// The first check of the module: it loads, and the spec's round trip works.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createManualClock, FenceGate, LeaseClient, LeaseCoordinator } from 'lease-fence';

test('acquire, complete and commit through the wasm module', () => {
  const coordinator = new LeaseCoordinator({ clock: createManualClock('coordinator'), ttlMillis: 1000 });
  const client = new LeaseClient({ clock: createManualClock('agent-a'), holderId: 'agent-a' });
  const gate = new FenceGate('slot');
  const request = client.beginAcquire('slot');
  const outcome = coordinator.acquire(request);
  assert.equal(outcome.ok, true);
  const lease = client.completeAcquire(request, outcome.grant);
  assert.equal(gate.commit(lease.token, () => 'written'), 'written');
  assert.equal(gate.floor, 1);
});
