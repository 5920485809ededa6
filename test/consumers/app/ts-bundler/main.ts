// TypeScript with moduleResolution bundler: lease-fence/init and its
// WasmSource type, the service client's types, then a round trip in Node.
import { FenceGate, LeaseClient, LeaseCoordinator, StaleFenceError, createManualClock, init, type WasmSource } from 'lease-fence/init';
import { LeaseServiceClient } from 'lease-fence/service-client';

const source: WasmSource = new URL('../../node_modules/lease-fence/wasm/js/lease-fence.wasm', import.meta.url);
await init(source);
const coordinator = new LeaseCoordinator({ clock: createManualClock('c'), ttlMillis: 100 });
const client = new LeaseClient({ clock: createManualClock('a'), holderId: 'a' });
const gate = new FenceGate('r');
const request = client.beginAcquire('r');
const outcome = coordinator.acquire(request);
if (!outcome.ok) throw new Error(`denied: held by ${outcome.heldBy}`);
const lease = client.completeAcquire(request, outcome.grant);
const written: string = gate.commit(lease.token, () => 'written');
gate.admit({ resource: 'r', holderId: 'b', fence: lease.token.fence + 1 });
let refused = false;
try {
  gate.commit(lease.token, () => 'not written');
} catch (e) {
  refused = e instanceof StaleFenceError;
}
const serviceClient: typeof LeaseServiceClient = LeaseServiceClient;
console.log(JSON.stringify({ added: [], fence: lease.token.fence, written, refused, rejections: gate.rejections.length, serviceClient: typeof serviceClient }));
