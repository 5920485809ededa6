// Per-call cost, from JavaScript, of the wasm library's hot calls, beside a
// pure-JavaScript reference of the gate check. Run by `make bench-js`:
//
//   node scripts/bench-js.mjs [--json]
//
// Each figure is the median of 7 timed rounds (after a warm-up) of a loop of
// calls, in nanoseconds per call. The machine is shared, so compare figures
// from one run; ratios are more stable than absolute numbers.
import { createManualClock, createMonotonicClock, FenceGate, LeaseClient, LeaseCoordinator } from 'lease-fence';

const ROUNDS = 7;

function bench(name, n, setup, body) {
  const times = [];
  for (let r = 0; r <= ROUNDS; r++) {
    const state = setup(n);
    const t0 = process.hrtime.bigint();
    body(state, n);
    const ns = Number(process.hrtime.bigint() - t0) / n;
    if (r > 0) times.push(ns); // round 0 warms up
  }
  times.sort((a, b) => a - b);
  return { name, nsPerCall: times[times.length >> 1], min: times[0], n };
}

// The reference: the same check and raise as FenceGate, in plain JavaScript,
// including argument checks and the rejections log, with the write callback.
class JsGate {
  constructor(resource) {
    this.resource = resource;
    this.floor = 0;
    this.floorHolder = '';
    this.claimed = false;
    this.rejections = [];
  }

  commit(token, fn) {
    if (typeof fn !== 'function') throw new TypeError('fn must be a function');
    if (typeof token !== 'object' || token === null) throw new TypeError('token must be an object');
    const { resource, holderId, fence } = token;
    if (typeof resource !== 'string' || resource !== this.resource) throw new TypeError('token.resource');
    if (typeof holderId !== 'string' || holderId === '') throw new TypeError('token.holderId');
    if (!Number.isSafeInteger(fence) || fence < 1) throw new TypeError('token.fence');
    if (fence < this.floor) {
      const r = { seq: this.rejections.length + 1, resource, refusedHolderId: holderId, refusedFence: fence,
        admittedHolderId: this.floorHolder || null, admittedFence: this.floor };
      this.rejections.push(r);
      throw new Error('stale');
    }
    if (fence > this.floor || !this.claimed) {
      this.floor = fence;
      this.floorHolder = holderId;
      this.claimed = true;
    }
    return fn();
  }
}

let sink = 0;
const write = () => { sink++; return sink; };
const token = { resource: 'deploy-slot', holderId: 'agent-a', fence: 1 };

const results = [
  bench('pure-JS reference gate.commit (admitted)', 1_000_000, () => new JsGate('deploy-slot'), (g, n) => {
    for (let i = 0; i < n; i++) g.commit(token, write);
  }),
  bench('gate.commit (admitted, same fence)', 300_000, () => new FenceGate('deploy-slot'), (g, n) => {
    for (let i = 0; i < n; i++) g.commit(token, write);
  }),
  bench('gate.commit (admitted, rising fence)', 300_000, () => new FenceGate('deploy-slot'), (g, n) => {
    for (let i = 1; i <= n; i++) g.commit({ resource: 'deploy-slot', holderId: 'agent-a', fence: i }, write);
  }),
  bench('gate.floor (smallest crossing)', 300_000, () => new FenceGate('deploy-slot'), (g, n) => {
    for (let i = 0; i < n; i++) sink += g.floor;
  }),
  // A fresh client per round, and fewer requests than it keeps pending
  // (4096), so the figure is the call, not the eviction of old requests.
  bench('client.beginAcquire', 4_000, () => new LeaseClient({ clock: createMonotonicClock('agent-a'), holderId: 'agent-a' }), (c, n) => {
    for (let i = 0; i < n; i++) sink += c.beginAcquire('deploy-slot').sentAt.millis;
  }),
  bench('coordinator.acquire (granted, fresh resource)', 4_000, (n) => {
    const client = new LeaseClient({ clock: createManualClock('agent-a'), holderId: 'agent-a' });
    const requests = Array.from({ length: n }, (_, i) => client.beginAcquire(`r${i}`));
    return { coordinator: new LeaseCoordinator({ clock: createMonotonicClock('c'), ttlMillis: 30_000 }), requests };
  }, ({ coordinator, requests }, n) => {
    for (let i = 0; i < n; i++) sink += coordinator.acquire(requests[i]).ok ? 1 : 0;
  }),
  bench('coordinator.acquire (denied, held)', 4_000, (n) => {
    const clock = createManualClock('agent-b');
    const coordinator = new LeaseCoordinator({ clock: createMonotonicClock('c'), ttlMillis: 3_600_000 });
    const a = new LeaseClient({ clock: createManualClock('agent-a'), holderId: 'agent-a' });
    coordinator.acquire(a.beginAcquire('deploy-slot'));
    const b = new LeaseClient({ clock, holderId: 'agent-b' });
    return { coordinator, requests: Array.from({ length: n }, () => b.beginAcquire('deploy-slot')) };
  }, ({ coordinator, requests }, n) => {
    for (let i = 0; i < n; i++) sink += coordinator.acquire(requests[i]).ok ? 1 : 0;
  }),
  // A whole lease: begin, acquire, complete, one write, release.
  bench('cycle: beginAcquire+acquire+completeAcquire+commit+release', 4_000, () => ({
    coordinator: new LeaseCoordinator({ clock: createMonotonicClock('c'), ttlMillis: 30_000 }),
    client: new LeaseClient({ clock: createMonotonicClock('agent-a'), holderId: 'agent-a' }),
    gate: new FenceGate('deploy-slot'),
  }), ({ coordinator, client, gate }, n) => {
    for (let i = 0; i < n; i++) {
      const request = client.beginAcquire('deploy-slot');
      const lease = client.completeAcquire(request, coordinator.acquire(request).grant);
      gate.commit(lease.token, write);
      coordinator.release(lease.token);
    }
  }),
];

const ref = results[0].nsPerCall;
if (process.argv.includes('--json')) {
  console.log(JSON.stringify({ results, sink }, null, 2));
} else {
  console.log('lease-fence from JavaScript, ns per call (median of 7 rounds; min in brackets)');
  for (const r of results) {
    const ratio = r === results[0] ? '' : `  ${(r.nsPerCall / ref).toFixed(1)}x the JS reference`;
    console.log(`  ${r.name.padEnd(60)} ${r.nsPerCall.toFixed(0).padStart(7)} ns  [${r.min.toFixed(0)}]${ratio}`);
  }
  const commit = results[1].nsPerCall;
  console.log(`goal: gate.commit within 20x of the JS reference: ${(commit / ref).toFixed(1)}x (${commit <= 20 * ref ? 'met' : 'NOT met'})`);
  if (sink === -1) console.log(sink);
}
