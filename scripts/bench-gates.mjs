// Commits per second through the gates in databases, each next to the same
// write unfenced on the same store, with 1 and 8 concurrent writers, Go and
// JavaScript side by side, interleaved in one run:
//   PostgreSQL (fsync on): Go gates/sqlfence and JS lease-fence/sql, against
//     BEGIN; INSERT; COMMIT without the gate;
//   Redis (AOF, appendfsync always): Go gates/redisfence and JS
//     lease-fence/redis, against the RPUSH alone.
// Every fenced commit presents one token (all admitted): the figure is the
// price of the check. Each round measures every configuration once, in the
// same order; within a configuration the two sides alternate in chunks of
// `chunk` commits (fenced, unfenced, fenced, ...) so that the noise of other
// processes falls on both alike, and each side's rate is its commits over
// its summed time. The ratio unfenced/fenced (the cost of fencing, 1.0 =
// free) is taken within a round, then min/median/max over rounds.
// Usage: node scripts/bench-gates.mjs [rounds] [commits per side] [chunk]
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import os from 'node:os';
import pg from 'pg';
import { redisGate, sqlGate } from '../test/gates/adapters.mjs';
import { root, startRedis } from '../test/gates/servers.mjs';

const rounds = Number(process.argv[2] ?? 5);
const n = Number(process.argv[3] ?? 400);
const chunk = Number(process.argv[4] ?? 40);
const load = () => os.loadavg().map((x) => x.toFixed(2)).join(' ');
console.log(`load before: ${load()}  (${os.cpus().length} cores)  rounds ${rounds}, ${n} commits a side in chunks of ${chunk}`);

function lineProc(args) {
  const proc = spawn(process.env.GO ?? 'go', args, { cwd: root, stdio: ['pipe', 'pipe', 'inherit'] });
  const waiting = [];
  createInterface({ input: proc.stdout }).on('line', (l) => waiting.shift()?.(l));
  return {
    proc,
    next: () => new Promise((resolve) => waiting.push(resolve)),
    send(line) { const p = this.next(); proc.stdin.write(`${line}\n`); return p; },
    stop: () => new Promise((resolve) => { proc.once('exit', resolve); proc.stdin.end(); }),
  };
}

const pgProc = lineProc(['run', './internal/pgtest/pgserver', '-durable']);
const pgUrl = await pgProc.next();
const redisServer = await startRedis();
const admin = new pg.Client({ connectionString: pgUrl });
await admin.connect();
await admin.query('CREATE DATABASE bench');
await admin.end();
const sqlUrl = pgUrl.replace('/postgres?', '/bench?');
const redisAddr = `${redisServer.url} bench-`;

const jsSql = await sqlGate(sqlUrl);
jsSql.pool.options.max = 10;
const jsRedis = await redisGate(redisAddr);
const goSql = lineProc(['run', './internal/gatecli', sqlUrl]);
const goRedis = lineProc(['run', './internal/gatecli', redisAddr]);

const token = (resource) => ({ resource, holderId: 'bench', fence: 1 });
async function jsBench(kind, writers, fenced, count) {
  const resource = `bench-${kind}`;
  let left = count;
  const one = async (w, i) => {
    const v = `bench#${w}#${i}`;
    if (kind === 'sql') {
      if (fenced) return jsSql.commit(token(resource), { value: v });
      const c = await jsSql.pool.connect();
      try {
        await c.query('BEGIN');
        await c.query('INSERT INTO gatetest_values (resource, value) VALUES ($1, $2)', [resource, v]);
        await c.query('COMMIT');
      } finally { c.release(); }
      return undefined;
    }
    if (fenced) return jsRedis.commit(token(resource), { value: v });
    return jsRedis.client.rPush(jsRedis.key(resource), v);
  };
  const start = performance.now();
  await Promise.all(Array.from({ length: writers }, async (_, w) => {
    for (let i = 0; left-- > 0; i++) await one(w, i);
  }));
  return (performance.now() - start) / 1000;
}
// goBench returns the seconds the Go writer took (its own clock).
async function goBench(kind, writers, fenced, count) {
  const p = kind === 'sql' ? goSql : goRedis;
  const ans = JSON.parse(await p.send(JSON.stringify({ op: 'bench', resource: `bench-${kind}`, writers, n: count, fenced })));
  if (ans.error) throw new Error(ans.error);
  return count / ans.rate;
}

const configs = [];
for (const kind of ['sql', 'redis']) {
  for (const writers of [1, 8]) {
    for (const lang of ['go', 'js']) configs.push({ kind, writers, lang });
  }
}
const rates = new Map(); // key -> { fenced: [], unfenced: [], ratio: [] }
for (let r = 0; r < rounds; r++) {
  for (const c of configs) {
    const f = c.lang === 'go' ? goBench : jsBench;
    let tf = 0;
    let tu = 0;
    for (let done = 0; done < n; done += chunk) {
      const k = Math.min(chunk, n - done);
      tf += await f(c.kind, c.writers, true, k);
      tu += await f(c.kind, c.writers, false, k);
    }
    const fenced = n / tf;
    const unfenced = n / tu;
    const key = `${c.kind === 'sql' ? 'PostgreSQL' : 'Redis'} ${c.lang === 'go' ? 'Go' : 'JS'} w=${c.writers}`;
    const e = rates.get(key) ?? { fenced: [], unfenced: [], ratio: [] };
    e.fenced.push(fenced);
    e.unfenced.push(unfenced);
    e.ratio.push(unfenced / fenced);
    rates.set(key, e);
  }
  process.stderr.write(`round ${r + 1}/${rounds} done, load ${load()}\n`);
}
const mmm = (xs, d = 0) => {
  const s = [...xs].sort((a, b) => a - b);
  const med = s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
  return [s[0], med, s[s.length - 1]].map((x) => x.toFixed(d)).join(' / ');
};
console.log('\n| commits/s (min / median / max) | fenced | unfenced | cost: unfenced/fenced |');
console.log('|---|---|---|---|');
for (const [key, e] of rates) console.log(`| ${key} | ${mmm(e.fenced)} | ${mmm(e.unfenced)} | ${mmm(e.ratio, 2)}x |`);
console.log(`\nload after: ${load()}`);

await Promise.all([goSql.stop(), goRedis.stop()]);
await jsSql.close();
await jsRedis.close();
await pgProc.stop();
await redisServer.stop();
