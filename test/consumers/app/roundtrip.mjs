// The round trip every consumer app runs with the library it was built
// against: acquire a lease, commit through a gate, see a stale fence refused.
export function roundTrip(lf) {
  const coordinator = new lf.LeaseCoordinator({ clock: lf.createManualClock('c'), ttlMillis: 100 });
  const client = new lf.LeaseClient({ clock: lf.createManualClock('a'), holderId: 'a' });
  const gate = new lf.FenceGate('r');
  const request = client.beginAcquire('r');
  const lease = client.completeAcquire(request, coordinator.acquire(request).grant);
  const written = gate.commit(lease.token, () => 'written');
  gate.admit({ resource: 'r', holderId: 'b', fence: lease.token.fence + 1 });
  let refused = false;
  try {
    gate.commit(lease.token, () => 'not written');
  } catch (e) {
    refused = e instanceof lf.StaleFenceError;
  }
  return { fence: lease.token.fence, written, refused, rejections: gate.rejections.length };
}

// Runs load (which imports the library) and reports the round trip and the
// global object's own properties that appeared meanwhile.
export async function report(load) {
  const before = Object.getOwnPropertyNames(globalThis);
  const lf = await load();
  const added = Object.getOwnPropertyNames(globalThis).filter((k) => !before.includes(k));
  return { added, ...roundTrip(lf) };
}
