// A holder as a process of its own, for hold.test.mjs's check that a hold's
// timers keep Node alive while it holds, and nothing after:
//
//   node holder-exit.mjs BASE_URL RESOURCE MODE
//
// MODE release: hold, print "held", release, print "released" (the process
// must then end by itself). MODE lost: hold, end the lease at the
// coordinator behind the hold's back, print "lost" when the hold finds out
// (it must then end by itself, having released nothing more). MODE keep:
// hold, print "renewed" at each renewal (it must not end by itself).
import { LeaseServiceClient } from 'lease-fence/service-client';

const [baseURL, resource, mode] = process.argv.slice(2);
const client = new LeaseServiceClient({ baseURL, holderId: `exit-${mode}`, backoff: () => 0 });
const held = await client.hold(resource, { renewEveryMillis: 200 });
console.log('held');
if (mode === 'release') {
  await held.release();
  console.log('released');
} else if (mode === 'lost') {
  held.addEventListener('lost', () => console.log('lost'));
  await client.release(held.lease);
} else {
  held.addEventListener('renewed', () => console.log('renewed'));
}
