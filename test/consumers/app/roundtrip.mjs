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

// The service client's round trip, with the coordinator service played by
// the library's own LeaseCoordinator behind a fetch function (the protocol's
// bodies and answers; no server): acquire, write through a gate, release.
export async function serviceRoundTrip(lf, sc) {
  const coordinator = new lf.LeaseCoordinator({ clock: lf.createManualClock('coordinator'), ttlMillis: 10_000 });
  const fetch = async (url, init) => {
    const b = JSON.parse(init.body);
    let answer;
    if (url.endsWith('/v1/acquire')) {
      answer = coordinator.acquire({ kind: 'acquire', requestId: b.requestId, resource: b.resource, holderId: b.holderId, sentAt: b.sentAt });
    } else if (url.endsWith('/v1/release')) {
      answer = { ok: coordinator.release({ resource: b.resource, holderId: b.holderId, fence: b.fence }) };
    }
    return new Response(JSON.stringify(answer), { status: 200, headers: { 'content-type': 'application/json' } });
  };
  const client = new sc.LeaseServiceClient({ baseURL: 'http://127.0.0.1:8787', holderId: 'agent-a', clock: lf.createManualClock('agent-a'), fetch });
  const gate = new lf.FenceGate('deploy-slot');
  const lease = await client.acquire('deploy-slot');
  const written = gate.commit(lease.token, () => 'written');
  await client.release(lease);
  return { service: { fence: lease.token.fence, written, released: coordinator.release(lease.token) === false } };
}
