// One campaigner of an election, as a process of its own (hold.test.mjs
// kills it with SIGKILL to take its lead away):
//
//   node campaigner.mjs BASE_URL HOLDER_ID ELECTION
//
// It observes the election and campaigns in it, and prints one JSON line
// per event: {"ev":"observed","holderId","fence"}, {"ev":"elected","fence"},
// {"ev":"renewed","fence"}, {"ev":"lost"}, {"ev":"resigned"} (when it
// begins to release the lead). A line "resign" on stdin releases it.
import { createInterface } from 'node:readline';
import { LeaseServiceClient } from './transport.mjs';

const [baseURL, holderId, name] = process.argv.slice(2);
const client = new LeaseServiceClient({ baseURL, holderId, backoff: () => 0, attemptTimeoutMillis: 30_000 });
const out = (o) => process.stdout.write(`${JSON.stringify(o)}\n`);
const election = client.election(name);

(async () => {
  for await (const leader of election.observe()) out({ ev: 'observed', ...leader });
})().catch((e) => out({ ev: 'error', error: String(e) }));

const held = await election.campaign();
const { fence } = held.token;
out({ ev: 'elected', fence });
held.addEventListener('renewed', () => out({ ev: 'renewed', fence }));
held.addEventListener('lost', (e) => out({ ev: 'lost', fence, error: e.error.message }));
// Dispatched when release() is called, before the release is sent.
held.addEventListener('released', () => out({ ev: 'resigned', fence }));
createInterface({ input: process.stdin }).on('line', (line) => {
  if (line === 'resign') held.release().catch((e) => out({ ev: 'error', error: String(e) }));
});
