// TypeScript with module nodenext in a CommonJS project: compiled to
// require('lease-fence'), which gives load(). (lease-fence.d.cts itself is
// checked without skipLibCheck by make test-js, wasm/js/tsconfig.json.)
import { load } from 'lease-fence';

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
  console.log(JSON.stringify({ added: [], fence: lease.token.fence, written, refused, rejections: gate.rejections.length }));
}

main();
