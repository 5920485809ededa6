// Commits per second through the gates in databases, each next to the same
// write unfenced on the same store, with 1 and 8 concurrent writers, Go and
// JavaScript side by side, interleaved in one run:
//   PostgreSQL (fsync on): Go gates/sqlfence and JS lease-fence/sql, against
//     BEGIN; INSERT; COMMIT without the gate;
//   SQLite (WAL, synchronous=FULL, as fence-proxy keeps its state): Go
//     gates/sqlfence, against the same transaction without the gate;
//   Redis (AOF, appendfsync always): Go gates/redisfence and JS
//     lease-fence/redis, against the RPUSH alone.
// Every fenced commit presents one token (all admitted): the figure is the
// price of the check. Each round measures every configuration once, in the
// same order; within a configuration the sides alternate in chunks of
// `chunk` commits (fenced, unfenced, fenced, ...) so that the noise of other
// processes falls on all alike, and each side's rate is its commits over its
// summed time. The cost unfenced/fenced (1.0 = free) is taken within a
// round, then min/median/max over rounds. Every side runs once unmeasured
// first, so that the connections it needs are open (and kept) before the
// first round.
//
// The Redis configurations have a side more: the fenced commits each with
// a deadline (Go: context.WithTimeout, a minute; JS: AbortSignal.timeout),
// as most callers' are ("deadline"; with --baseline also the baseline's,
// for JS, and for Go if its gatecli takes the deadline request).
// --baseline REV adds a third side to each configuration: the gates as they
// were at git revision REV (Go: test/rig/gatecli built from REV's tree; JS:
// REV's lease-fence/sql and lease-fence/redis modules), in the same
// alternation, so a change to a gate is measured against its predecessor in
// one run. --only REGEX keeps the configurations whose name matches.
// For the JavaScript configurations it also prints this process's CPU time
// per commit of each side (user + system, µs; min/median/max over rounds):
// the client's own work, which the load of other processes moves far less
// than it moves commits per second. For every configuration it prints the
// server's CPU per commit (PostgreSQL: the backends of the benchmark's
// connections, and apart the other processes; Redis: redis-server's; read
// from /proc), the client's (this process, or the Go
// gatecli's), and their sum's cost fenced/unfenced: with both cores busy,
// the ratio commits per second tends to.
// Usage: node scripts/bench-gates.mjs [rounds] [commits per side] [chunk] [--baseline REV] [--only REGEX]
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import os from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import pg from 'pg';
import { redisGate, sqlGate } from '../test/gates/adapters.mjs';
import { root, startRedis } from '../test/gates/servers.mjs';

const argv = process.argv.slice(2);
const flag = (name) => {
  const i = argv.indexOf(name);
  if (i < 0) return null;
  const [, v] = argv.splice(i, 2);
  return v;
};
const baseline = flag('--baseline');
const only = flag('--only');
const onlyRe = only ? new RegExp(only) : null;
const rounds = Number(argv[0] ?? 5);
const n = Number(argv[1] ?? 400);
const chunk = Number(argv[2] ?? 40);
const load = () => os.loadavg().map((x) => x.toFixed(2)).join(' ');
const git = (...a) => execFileSync('git', a, { cwd: root, encoding: 'utf8' }).trim();
const head = git('rev-parse', '--short', 'HEAD') + (git('status', '--porcelain', '--untracked-files=no') ? '+changes' : '');
console.log(`load before: ${load()}  (${os.cpus().length} cores)  rounds ${rounds}, ${n} commits a side in chunks of ${chunk}; gates at ${head}` +
  (baseline ? `, baseline ${baseline}` : ''));

// The baseline's gates: REV's tree exported under out/bench, its gatecli
// built there (its own go.mod), its JS gate modules copied beside this
// build (they import 'lease-fence', this build's, so the error classes are
// the same).
let base = null;
if (baseline) {
  const rev = git('rev-parse', '--short', baseline);
  const dir = join(root, 'out', 'bench', `baseline-${rev}`);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  execFileSync('sh', ['-c', `git archive ${rev} | tar -x -C ${dir}`], { cwd: root });
  // gatecli moved from internal/ to test/rig/; a baseline has one.
  const cli = ['test/rig/gatecli', 'internal/gatecli'].find((d) => existsSync(join(dir, d, 'main.go')));
  execFileSync(process.env.GO ?? 'go', ['build', '-o', join(dir, 'gatecli'), `./${cli}`], { cwd: dir, stdio: 'inherit' });
  const js = join(root, 'out', 'bench', `js-${rev}`);
  mkdirSync(js, { recursive: true });
  // A baseline whose modules import ./gate-texts.mjs gets it generated
  // from its own scripts and statements.
  const gen = join(dir, 'scripts', 'gate-texts.mjs');
  if (existsSync(gen)) execFileSync(process.execPath, [gen], { cwd: dir, stdio: 'inherit' });
  for (const f of ['sql.mjs', 'redis.mjs', 'gate-common.mjs', 'gate-texts.mjs']) {
    if (existsSync(join(dir, 'wasm', 'js', f))) writeFileSync(join(js, f), readFileSync(join(dir, 'wasm', 'js', f)));
  }
  // A baseline whose modules import ./errors.mjs gets this build's error
  // classes through it, so both sides' errors are the same classes.
  writeFileSync(join(js, 'errors.mjs'), `export * from ${JSON.stringify(pathToFileURL(join(root, 'wasm', 'js', 'errors.mjs')).href)};\n`);
  base = {
    rev, dir, cli,
    gatecli: join(dir, 'gatecli'),
    sql: await import(pathToFileURL(join(js, 'sql.mjs')).href),
    redis: await import(pathToFileURL(join(js, 'redis.mjs')).href),
  };
}

function lineProc(cmd, args) {
  const proc = spawn(cmd, args, { cwd: root, stdio: ['pipe', 'pipe', 'inherit'] });
  const waiting = [];
  createInterface({ input: proc.stdout }).on('line', (l) => waiting.shift()?.(l));
  return {
    proc,
    next: () => new Promise((resolve) => waiting.push(resolve)),
    send(line) { const p = this.next(); proc.stdin.write(`${line}\n`); return p; },
    stop: () => new Promise((resolve) => { proc.once('exit', resolve); proc.stdin.end(); }),
  };
}

const GO = process.env.GO ?? 'go';
const gatecli = join(root, 'out', 'bench', 'gatecli');
mkdirSync(join(root, 'out', 'bench'), { recursive: true });
execFileSync(GO, ['build', '-o', gatecli, './test/rig/gatecli'], { cwd: root, stdio: 'inherit' });

const pgProc = lineProc(GO, ['run', './test/rig/pgtest/pgserver', '-durable']);
const pgUrl = await pgProc.next();
const redisServer = await startRedis();
const admin = new pg.Client({ connectionString: pgUrl });
await admin.connect();
await admin.query('CREATE DATABASE bench');
await admin.end();
const sqlUrl = pgUrl.replace('/postgres?', '/bench?');
const redisAddr = `${redisServer.url} bench-`;
const tmp = mkdtempSync(join(os.tmpdir(), 'bench-gates-'));
const sqliteAddr = `sqlite:${join(tmp, 'bench.db')}`;

// CPU time (µs) of a process: the run time of each of its threads from
// /proc/PID/task/*/schedstat (nanoseconds, where /proc/PID/stat counts 10 ms
// ticks); with children, also that of its live children and, in ticks, of
// the children it reaped (PostgreSQL's short-lived autovacuum workers).
const tick = 1e6 / 100; // USER_HZ
const procCpu = (pid, children = false) => {
  try {
    let t = 0;
    for (const task of readdirSync(`/proc/${pid}/task`)) {
      t += Number(readFileSync(`/proc/${pid}/task/${task}/schedstat`, 'utf8').split(' ')[0]) / 1000;
    }
    if (children) {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      t += (Number(f[13]) + Number(f[14])) * tick;
      for (const c of readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(' ').filter(Boolean)) t += procCpu(c);
    }
    return t;
  } catch {
    return 0; // gone (a child that ended between the listing and the read)
  }
};
const pgPostmaster = await (async () => {
  const c = new pg.Client({ connectionString: sqlUrl });
  await c.connect();
  const { rows: [{ pid }] } = await c.query('SELECT pg_backend_pid() AS pid');
  // Its parent, read while the backend lives (it exits with the connection).
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  await c.end();
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
})();

const jsSql = await sqlGate(sqlUrl);
jsSql.pool.options.max = 10;
// The pool keeps its connections: one opened while a side is measured
// (pg's pool closes those idle 10 s, as they are while the other
// configurations run) charges that side the connection's start-up, the
// backend's and the client's, many commits' worth of CPU.
jsSql.pool.options.idleTimeoutMillis = 0;
const jsRedis = await redisGate(redisAddr);
const redisPid = Number(/process_id:(\d+)/.exec(await jsRedis.client.info('server'))[1]);
// PostgreSQL's CPU is taken apart: the backends of the benchmark's
// connections (listed before and after each chunk, from a connection to
// another database) do the commits' work; the other processes (WAL
// writer, checkpointer, autovacuum and its workers) work in the
// background, partly for the commits (the WAL they write) and partly by
// the clock, which would charge a slower side more per commit.
const monitor = new pg.Client({ connectionString: pgUrl });
await monitor.connect();
const backends = async () => (await monitor.query(
  "SELECT pid FROM pg_stat_activity WHERE datname = 'bench' AND backend_type = 'client backend'")).rows.map((r) => r.pid);
// serverStart reads the server's CPU before a chunk; its result's end()
// resolves with { server, other }: the CPU since, of the processes that
// serve the connections (all of redis-server) and of PostgreSQL's others.
async function serverStart(kind) {
  if (kind === 'redis') {
    const r0 = procCpu(redisPid);
    return { end: async () => ({ server: procCpu(redisPid) - r0, other: 0 }) };
  }
  if (kind !== 'sql') return { end: async () => ({ server: 0, other: 0 }) };
  const pids = await backends();
  const b0 = new Map(pids.map((p) => [p, procCpu(p)]));
  const all0 = procCpu(pgPostmaster, true);
  return {
    async end() {
      const all = procCpu(pgPostmaster, true) - all0;
      let server = 0;
      for (const [p, c] of b0) server += Math.max(0, procCpu(p) - c);
      // A connection opened during the chunk: all of its CPU.
      let opened = 0; // connections the warm-up did not open (see below)
      for (const p of await backends()) if (!b0.has(p)) { server += procCpu(p); opened++; }
      return { server, other: Math.max(0, all - server), opened };
    },
  };
}
const go = { sql: lineProc(gatecli, [sqlUrl]), sqlite: lineProc(gatecli, [sqliteAddr]), redis: lineProc(gatecli, [redisAddr]) };
// The baseline gatecli's source, for the requests it knows.
const baseCli = base && readFileSync(join(base.dir, base.cli, 'main.go'), 'utf8');
const goBase = base && {
  sql: lineProc(base.gatecli, [sqlUrl]), redis: lineProc(base.gatecli, [redisAddr]),
  // A baseline without SQLite in its gatecli has no SQLite side.
  sqlite: baseCli.includes('sqlite:') ? lineProc(base.gatecli, [sqliteAddr]) : null,
};
// A baseline gatecli that knows the deadline request (else it would run
// those commits with context.Background()).
const goBaseDeadline = base !== null && baseCli.includes('json:"deadline"');
const jsBase = base && {
  sql: await base.sql.openSqlFence(jsSql.pool),
  redis: base.redis.openRedisFence(jsRedis.client, { prefix: 'bench-' }),
};

const token = (resource) => ({ resource, holderId: 'bench', fence: 1 });
const DEADLINE_MS = 60_000;
// jsBench: count commits by `writers` concurrent writers; side is
// 'fenced', 'base', 'deadline', 'base-deadline' or 'unfenced'. Returns
// seconds.
async function jsBench(kind, writers, side, count) {
  const resource = `bench-${kind}`;
  let left = count;
  const one = async (w, i) => {
    const v = `bench#${w}#${i}`;
    if (kind === 'sql') {
      if (side === 'fenced') return jsSql.commit(token(resource), { value: v });
      if (side === 'base') {
        return jsBase.sql.commit(token(resource), (client) =>
          client.query('INSERT INTO gatetest_values (resource, value) VALUES ($1, $2)', [resource, v]));
      }
      const c = await jsSql.pool.connect();
      try {
        await c.query('BEGIN');
        await c.query('INSERT INTO gatetest_values (resource, value) VALUES ($1, $2)', [resource, v]);
        await c.query('COMMIT');
      } finally { c.release(); }
      return undefined;
    }
    if (side === 'fenced') return jsRedis.commit(token(resource), { value: v });
    if (side === 'deadline') return jsRedis.commit(token(resource), { value: v, signal: AbortSignal.timeout(DEADLINE_MS) });
    const k = jsRedis.key(resource);
    if (side === 'base') return jsBase.redis.commit(token(resource), { keys: [k], commands: [['RPUSH', k, v]] });
    if (side === 'base-deadline') {
      return jsBase.redis.commit(token(resource), { keys: [k], commands: [['RPUSH', k, v]] }, { signal: AbortSignal.timeout(DEADLINE_MS) });
    }
    return jsRedis.client.rPush(k, v);
  };
  const start = performance.now();
  await Promise.all(Array.from({ length: writers }, async (_, w) => {
    for (let i = 0; left-- > 0; i++) await one(w, i);
  }));
  return (performance.now() - start) / 1000;
}
// goBench returns the seconds the Go writer took (its own clock).
async function goBench(kind, writers, side, count) {
  const p = side.startsWith('base') ? goBase[kind] : go[kind];
  const deadline = side.endsWith('deadline');
  const ans = JSON.parse(await p.send(JSON.stringify({ op: 'bench', resource: `bench-${kind}`, writers, n: count, fenced: side !== 'unfenced', deadline })));
  if (ans.error) throw new Error(ans.error);
  return count / ans.rate;
}

const names = { sql: 'PostgreSQL', sqlite: 'SQLite', redis: 'Redis' };
const configs = [];
for (const kind of ['sql', 'sqlite', 'redis']) {
  for (const writers of [1, 8]) {
    for (const lang of kind === 'sqlite' ? ['go'] : ['go', 'js']) {
      const name = `${names[kind]} ${lang === 'go' ? 'Go' : 'JS'} w=${writers}`;
      if (onlyRe && !onlyRe.test(name)) continue;
      const sides = ['fenced', 'unfenced'];
      if (base && !(lang === 'go' && !goBase[kind])) sides.splice(1, 0, 'base');
      if (kind === 'redis') {
        sides.splice(-1, 0, 'deadline');
        if (base && (lang === 'js' || goBaseDeadline)) sides.splice(-1, 0, 'base-deadline');
      }
      configs.push({ kind, writers, lang, name, sides });
    }
  }
}
// A warm-up of every side of every configuration, not measured: each
// opens its connections (and the gates prepare their statements on them)
// before the first round.
for (const c of configs) {
  for (const s of c.sides) await (c.lang === 'go' ? goBench : jsBench)(c.kind, c.writers, s, Math.max(chunk, 2 * c.writers));
}
const rates = new Map(); // name -> { side: [rate per round], cost: [...], baseCost: [...] }
for (let r = 0; r < rounds; r++) {
  for (const c of configs) {
    const f = c.lang === 'go' ? goBench : jsBench;
    const t = Object.fromEntries(c.sides.map((s) => [s, 0]));
    const cpu = Object.fromEntries(c.sides.map((s) => [s, 0]));
    const srv = Object.fromEntries(c.sides.map((s) => [s, 0]));
    const bg = Object.fromEntries(c.sides.map((s) => [s, 0]));
    for (let done = 0; done < n; done += chunk) {
      const k = Math.min(chunk, n - done);
      // Rotate the order chunk by chunk, so no side always follows another.
      const order = c.sides.map((_, i) => c.sides[(i + done / chunk) % c.sides.length]);
      for (const s of order) {
        const goPid = c.lang === 'go' ? (s.startsWith('base') ? goBase : go)[c.kind].proc.pid : 0;
        const s0 = await serverStart(c.kind);
        const u = process.cpuUsage();
        const g0 = goPid ? procCpu(goPid) : 0;
        t[s] += await f(c.kind, c.writers, s, k);
        const d = process.cpuUsage(u);
        const g1 = goPid ? procCpu(goPid) : 0;
        const sc = await s0.end();
        srv[s] += sc.server;
        if (sc.opened) process.stderr.write(`${c.name} ${s}: ${sc.opened} connections opened while measured (their start-up counted)\n`);
        bg[s] += sc.other;
        cpu[s] += goPid ? g1 - g0 : d.user + d.system;
      }
    }
    const e = rates.get(c.name) ?? {
      fenced: [], base: [], unfenced: [], deadline: [], 'base-deadline': [], cost: [], baseCost: [], baseOverNew: [],
      deadlineCost: [], baseDeadlineCost: [], deadlineOverFenced: [], cpu: {}, client: {}, server: {}, other: {}, cpuCost: [],
    };
    for (const s of c.sides) e[s].push(n / t[s]);
    if (c.lang === 'js') for (const s of c.sides) (e.cpu[s] ??= []).push(cpu[s] / n);
    for (const s of c.sides) {
      (e.client[s] ??= []).push(cpu[s] / n);
      (e.server[s] ??= []).push(srv[s] / n);
      (e.other[s] ??= []).push(bg[s] / n);
    }
    e.cpuCost.push((cpu.fenced + srv.fenced) / (cpu.unfenced + srv.unfenced));
    e.cost.push(t.fenced / t.unfenced);
    if ('base' in t) {
      e.baseCost.push(t.base / t.unfenced);
      e.baseOverNew.push(t.base / t.fenced);
    }
    if ('deadline' in t) {
      e.deadlineCost.push(t.deadline / t.unfenced);
      e.deadlineOverFenced.push(t.deadline / t.fenced);
    }
    if ('base-deadline' in t) e.baseDeadlineCost.push(t['base-deadline'] / t.unfenced);
    rates.set(c.name, e);
  }
  process.stderr.write(`round ${r + 1}/${rounds} done, load ${load()}\n`);
}
const mmm = (xs, d = 0) => {
  if (xs.length === 0) return '-';
  const s = [...xs].sort((a, b) => a - b);
  const med = s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
  return [s[0], med, s[s.length - 1]].map((x) => x.toLocaleString('en-US', { maximumFractionDigits: d, minimumFractionDigits: d })).join(' / ');
};
const mx = (xs) => (xs.length ? `${mmm(xs, 2)}x` : '-');
if (base) {
  console.log(`\n| commits/s (min / median / max) | fenced (${head}) | fenced (${base.rev}) | unfenced | cost (${head}) | cost (${base.rev}) | speed-up: time ${base.rev} / time ${head} |`);
  console.log('|---|---|---|---|---|---|---|');
  for (const [key, e] of rates) {
    console.log(`| ${key} | ${mmm(e.fenced)} | ${mmm(e.base)} | ${mmm(e.unfenced)} | ${mx(e.cost)} | ${mx(e.baseCost)} | ${mx(e.baseOverNew)} |`);
  }
} else {
  console.log('\n| commits/s (min / median / max) | fenced | unfenced | cost: unfenced/fenced |');
  console.log('|---|---|---|---|');
  for (const [key, e] of rates) console.log(`| ${key} | ${mmm(e.fenced)} | ${mmm(e.unfenced)} | ${mx(e.cost)} |`);
}
// sideLabel names a side in the tables: the baseline's by its revision.
const sideLabel = (s) => (s === 'base' ? `fenced (${base.rev})` : s === 'base-deadline' ? `deadline (${base.rev})` : s);
const deadlineRows = [...rates].filter(([, e]) => e.deadlineCost.length > 0);
if (deadlineRows.length > 0) {
  const b = base ? ` | cost with a deadline (${base.rev}) |` : ' |';
  console.log(`\n| with a deadline (min / median / max) | commits/s | cost with a deadline: its time / unfenced | its time / fenced's${b}`);
  console.log(`|---|---|---|---|${base ? '---|' : ''}`);
  for (const [key, e] of deadlineRows) {
    console.log(`| ${key} | ${mmm(e.deadline)} | ${mx(e.deadlineCost)} | ${mx(e.deadlineOverFenced)}${base ? ` | ${mx(e.baseDeadlineCost)} |` : ' |'}`);
  }
}
const cpuRows = [...rates].filter(([, e]) => e.cpu.fenced);
if (cpuRows.length > 0) {
  const sides = [...new Set(cpuRows.flatMap(([, e]) => Object.keys(e.cpu)))];
  console.log(`\n| JS process CPU, µs per commit (min / median / max) | ${sides.map(sideLabel).join(' | ')} |`);
  console.log(`|---|${sides.map(() => '---|').join('')}`);
  for (const [key, e] of cpuRows) console.log(`| ${key} | ${sides.map((s) => mmm(e.cpu[s] ?? [])).join(' | ')} |`);
}
{
  const anyDeadline = [...rates.values()].some((e) => e.deadline.length > 0);
  const anyBaseDeadline = [...rates.values()].some((e) => e['base-deadline'].length > 0);
  const sides = ['fenced', ...(base ? ['base'] : []), ...(anyDeadline ? ['deadline'] : []), ...(anyBaseDeadline ? ['base-deadline'] : []), 'unfenced'];
  console.log(`\n| CPU µs per commit, client + server (min / median / max) | ${sides.map((s) => `${sideLabel(s)}: client | ${sideLabel(s)}: server`).join(' | ')} | cost: fenced/unfenced client + server |`);
  console.log(`|---|${sides.map(() => '---|---|').join('')}---|`);
  for (const [key, e] of rates) {
    console.log(`| ${key} | ${sides.map((s) => `${mmm(e.client[s] ?? [])} | ${mmm(e.server[s] ?? [])}`).join(' | ')} | ${mx(e.cpuCost)} |`);
  }
  const pgRows = [...rates].filter(([key]) => key.startsWith('PostgreSQL'));
  if (pgRows.length > 0) {
    console.log(`\n| PostgreSQL's other processes, CPU µs per commit (min / median / max) | ${sides.map(sideLabel).join(' | ')} |`);
    console.log(`|---|${sides.map(() => '---|').join('')}`);
    for (const [key, e] of pgRows) console.log(`| ${key} | ${sides.map((s) => mmm(e.other[s] ?? [])).join(' | ')} |`);
  }
}
console.log(`\nload after: ${load()}`);

await Promise.all([...Object.values(go), ...Object.values(goBase ?? {})].filter(Boolean).map((p) => p.stop()));
await jsSql.close();
await jsRedis.close();
await monitor.end();
await pgProc.stop();
await redisServer.stop();
rmSync(tmp, { recursive: true, force: true });
