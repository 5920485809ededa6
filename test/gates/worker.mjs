// A writer process of the conformance suite: attaches to the store at addr
// (adapters.mjs), says "ready", waits for a line on stdin, then commits
// random fences, printing "start <json>" and "done <json>" for each.
import { createInterface } from 'node:readline';
import { attach } from './adapters.mjs';
import { writeRandom } from './conformance.mjs';

const [kind, addr, resource, holder, seed, n] = process.argv.slice(2);
const g = await attach(kind, addr);
console.log('ready');
const rl = createInterface({ input: process.stdin });
await new Promise((resolve) => rl.once('line', resolve));
rl.close();
await writeRandom(g, resource, holder, Number(seed), Number(n), (what, a) => console.log(`${what} ${JSON.stringify(a)}`));
await g.close();
