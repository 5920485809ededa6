// The JavaScript client's side of `bench-hold -mode cost -client js`: holds
// leases with LeaseServiceClient.hold and says when each phase begins, one
// line each, so that bench-hold reads this process's CPU time and the
// server's at the same moments:
//
//   node holder.mjs BASE_URL HOLDS DURATION_MS TTL_MS [one|many] [node|fetch]
//
// With "one", every lease is held through one LeaseServiceClient (one
// process holding them all, whose renewals share calls); otherwise each
// through its own. The last argument is the clients' transport (node, the
// default: node:http; fetch).
//
// "idle" (nothing held for DURATION_MS), "taking" (HOLDS leases taken
// evenly over a third of the TTL, so their renewals are spread as
// independent holders' are), "held" (held for DURATION_MS), then
// "end RENEWALS LOST TRIED_AGAIN" (RENEWALS: those of the held phase) once
// every lease is released.
import { setTimeout as sleep } from 'node:timers/promises';
import { LeaseServiceClient } from 'lease-fence/service-client';

const [baseURL, holdsArg, durationArg, ttlArg, oneArg = 'many', transport = 'node'] = process.argv.slice(2);
const holds = Number(holdsArg);
const duration = Number(durationArg);
const ttl = Number(ttlArg);
if (!baseURL || !(holds > 0) || !(duration > 0) || !(ttl > 0) || !['one', 'many'].includes(oneArg) || !['node', 'fetch'].includes(transport)) {
  console.error('usage: node holder.mjs BASE_URL HOLDS DURATION_MS TTL_MS [one|many] [node|fetch]');
  process.exit(2);
}
const say = (line) => process.stdout.write(`${line}\n`);

say('idle');
await sleep(duration);
say('taking');
const held = [];
let triedAgain = 0;
const taking = [];
const pace = ttl / 3 / holds;
const shared = oneArg === 'one' ? new LeaseServiceClient({ baseURL, holderId: 'js-h', attemptTimeoutMillis: 30_000, transport }) : undefined;
for (let i = 0; i < holds; i++) {
  const client = shared ?? new LeaseServiceClient({ baseURL, holderId: `js-h${i}`, attemptTimeoutMillis: 30_000, transport });
  taking.push((async () => {
    for (let attempt = 1; ; attempt++) {
      try {
        held.push(await client.hold(`cost-js-${i}`));
        return;
      } catch (e) {
        if (attempt === 3) throw new Error(`taking lease ${i}, three times: ${e}`);
        triedAgain++;
      }
    }
  })());
  await sleep(pace);
}
await Promise.all(taking);
// The renewals of the held phase only (those made while the leases were
// being taken, over seconds on a loaded machine, are not in its time).
const before = held.reduce((n, h) => n + h.renewals, 0);
say('held');
await sleep(duration);
const lost = held.filter((h) => h.signal.aborted);
const renewals = held.reduce((n, h) => n + h.renewals, 0) - before;
say(`end ${renewals} ${lost.length} ${triedAgain}`);
await Promise.all(held.map((h) => h.release().catch(() => {})));
if (lost.length > 0) {
  console.error(`${lost.length} of ${holds} holds were lost: ${lost[0].signal.reason}`);
  process.exit(1);
}
