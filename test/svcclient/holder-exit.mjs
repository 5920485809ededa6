// A holder as a process of its own, for hold.test.mjs:
//
//   node holder-exit.mjs BASE_URL RESOURCE MODE
//
// MODE release: hold, print "held", release, print "released", then "active
// [...]": what keeps Node's event loop alive (nothing: the process must then
// end by itself). MODE lost: hold, end the lease at the coordinator behind
// the hold's back, print "lost" when the hold finds out, then "active
// [...]" once its release is answered (nothing). MODE keep:
// hold, print "renewed" at each renewal (it must not end by itself; the
// test kills it). MODE crash: hold, and at the first renewal throw an
// uncaught exception (the process dies with exit code 1, releasing
// nothing).
import { LeaseServiceClient } from './transport.mjs';

const [baseURL, resource, mode] = process.argv.slice(2);
const client = new LeaseServiceClient({ baseURL, holderId: `exit-${mode}`, backoff: () => 0 });
const held = await client.hold(resource, { renewEveryMillis: 200 });
console.log('held');
// What keeps Node's event loop alive once the hold is over, but for this
// process's own stdout and stderr (pipes): nothing.
const active = () => setImmediate(() => console.log(`active ${JSON.stringify(process.getActiveResourcesInfo().filter((r) => r !== 'PipeWrap'))}`));
if (mode === 'release') {
  await held.release();
  console.log('released');
  active();
} else if (mode === 'lost') {
  const lost = new Promise((resolve) => held.addEventListener('lost', resolve, { once: true }));
  // The release behind the hold's back; its answer can come after the
  // hold found the loss (another connection), so both are awaited before
  // asking what is left.
  await client.release(held.lease);
  await lost;
  console.log('lost');
  await held.release(); // resolves once the release sent at the loss is answered
  active();
} else if (mode === 'crash') {
  held.addEventListener('renewed', () => {
    setTimeout(() => {
      throw new Error('the agent crashed');
    });
  }, { once: true });
} else {
  held.addEventListener('renewed', () => console.log('renewed'));
}
