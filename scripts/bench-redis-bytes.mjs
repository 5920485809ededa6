// What one commit of one RPUSH costs Redis through lease-fence/redis, 8
// writers of one holder on one resource, against the RPUSH alone: bytes
// the server reads (INFO stats total_net_input_bytes), bytes appended to
// the AOF (INFO persistence aof_current_size; the test server runs with
// appendfsync always) and the server's CPU (INFO cpu), per commit, for the
// gate as it is, the gate with atMostOnce (a marker per commit) and the
// RPUSH alone. The sides alternate round by round; bytes are exact, CPU and
// commits per second are min / median / max over the rounds.
// Usage: node scripts/bench-redis-bytes.mjs [rounds] [commits per side]
import { createClient } from 'redis';
import { openRedisFence, redisKey } from '../wasm/js/redis.mjs';
import { startRedis } from '../test/gates/servers.mjs';
import { load, stats } from './bench-kit.mjs';

const rounds = Number(process.argv[2] ?? 5);
const n = Number(process.argv[3] ?? 2000);
const writers = 8;
console.log(`load before: ${load()}; ${rounds} rounds of ${n} commits a side, ${writers} writers`);
const server = await startRedis();
const c = createClient({ url: server.url, RESP: 2 });
await c.connect();
const info = async () => {
  const t = await c.info();
  const g = (k) => Number(new RegExp(`^${k}:([0-9.]+)`, 'm').exec(t)[1]);
  return { in: g('total_net_input_bytes'), aof: g('aof_current_size'), cpu: (g('used_cpu_user') + g('used_cpu_sys')) * 1e6 };
};
// name -> [the gate, or null for the RPUSH alone; its list's key]
const sides = {
  'lease-fence/redis': [openRedisFence(c, { prefix: 'b1-' }), redisKey('r', 'gate-list')],
  'lease-fence/redis, atMostOnce': [openRedisFence(c, { prefix: 'b2-', atMostOnce: true }), redisKey('r', 'once-list')],
  'RPUSH alone': [null, redisKey('r', 'plain-list')],
};
const tok = { resource: 'r', holderId: 'h', fence: 1 };
const res = {};
for (let round = 0; round < rounds; round++) {
  const order = Object.entries(sides);
  for (let i = 0; i < round % order.length; i++) order.push(order.shift());
  for (const [name, [s, k]] of order) {
    const one = () => (s ? s.commit(tok, { keys: [k], commands: [['RPUSH', k, 'v']] }) : c.rPush(k, 'v'));
    if (round === 0) await one(); // the script loaded, the floor raised
    const a = await info();
    let left = n;
    const t0 = performance.now();
    await Promise.all(Array.from({ length: writers }, async () => {
      while (left-- > 0) await one();
    }));
    const ms = performance.now() - t0;
    const b = await info();
    (res[name] ??= []).push({ rate: (n / ms) * 1000, in: (b.in - a.in) / n, aof: (b.aof - a.aof) / n, cpu: (b.cpu - a.cpu) / n });
  }
}
const mmm = (xs, d = 0) => {
  const { min, median, max } = stats(xs);
  return [min, median, max].map((x) => x.toLocaleString('en-US', { maximumFractionDigits: d, minimumFractionDigits: d })).join(' / ');
};
console.log('\n| per commit, 8 writers of one holder | bytes to the server | bytes to the AOF | server CPU, µs | commits/s |');
console.log('|---|---|---|---|---|');
for (const [k, v] of Object.entries(res)) {
  console.log(`| ${k} | ${mmm(v.map((x) => x.in))} | ${mmm(v.map((x) => x.aof))} | ${mmm(v.map((x) => x.cpu), 1)} | ${mmm(v.map((x) => x.rate))} |`);
}
console.log(`\nload after: ${load()}`);
await c.quit();
await server.stop();
