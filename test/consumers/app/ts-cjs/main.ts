// TypeScript with module nodenext in a CommonJS project: compiled to
// require('lease-fence'), which gives load(), and
// require('lease-fence/service-client'), which gives its own load().
// (lease-fence.d.cts and service-client.d.cts themselves are checked without
// skipLibCheck by make test-js, wasm/js/tsconfig.json.)
import { load } from 'lease-fence';
import { load as loadServiceClient } from 'lease-fence/service-client';

async function main(): Promise<void> {
  const lf = await load();
  const coordinator = new lf.LeaseCoordinator({ clock: lf.createManualClock('c'), ttlMillis: 100 });
  const client = new lf.LeaseClient({ clock: lf.createManualClock('a'), holderId: 'a' });
  const gate = new lf.FenceGate('r');
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
    refused = e instanceof lf.StaleFenceError;
  }
  const sc = await loadServiceClient();
  const svc = new sc.LeaseServiceClient({ baseURL: 'http://127.0.0.1:8787', holderId: 'a', timeoutMillis: 1000 });
  console.log(JSON.stringify({ added: [], fence: lease.token.fence, written, refused, rejections: gate.rejections.length, serviceClient: svc.holderId }));
}

main();
