// A holder as a process of its own, for hold.test.mjs:
//
//   node holder-exit.mjs BASE_URL RESOURCE MODE
//
// MODE release: hold, print "held", release, print "released" (the process
// must then end by itself, promptly). MODE lost: hold, end the lease at the
// coordinator behind the hold's back, print "lost" when the hold finds out
// (it must then end by itself, having released nothing more). MODE keep:
// hold, print "renewed" at each renewal (it must not end by itself; the
// test kills it). MODE crash: hold, and at the first renewal throw an
// uncaught exception (the process dies with exit code 1, releasing
// nothing).
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
} else if (mode === 'crash') {
  held.addEventListener('renewed', () => {
    setTimeout(() => {
      throw new Error('the agent crashed');
    });
  }, { once: true });
} else {
  held.addEventListener('renewed', () => console.log('renewed'));
}
