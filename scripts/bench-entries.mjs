// Cold import of each entry of the package in Node, this checkout beside
// git revision REV, interleaved in one run:
//
//   node scripts/bench-entries.mjs [--baseline REV] [--runs N] [--only REGEX]
//
// REV (default main) is the package's JavaScript at that revision (its
// package.json and wasm/js, from git archive), with this checkout's build
// outputs copied in (lease-fence.wasm, wasm_exec.mjs and the generated
// modules: make build-wasm first), so that only the JavaScript differs.
// Each run starts one fresh node process per side and entry, alternating
// which side goes first, and measures inside it from just before the
// import to when it resolved: the wall-clock time, and the CPU time of the
// process meanwhile (all threads), which other load disturbs less. Prints,
// per entry, min/median/max in milliseconds of each side and the ratio of
// the medians (this checkout / REV), with the load average.
import { execFileSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const { values: opts } = parseArgs({
  options: { baseline: { type: 'string', default: 'main' }, runs: { type: 'string', default: '10' }, only: { type: 'string', default: '' } },
});
const runs = Number(opts.runs);
const root = fileURLToPath(new URL('..', import.meta.url));

// What an app does to get each entry ready: the import, or for CommonJS
// the require and its load().
const entries = {
  'lease-fence': "await import('lease-fence');",
  'lease-fence/init + init(bytes)': "const lf = await import('lease-fence/init'); await lf.init((await import('node:fs')).readFileSync('wasm/js/lease-fence.wasm'));",
  'lease-fence/service-client': "await import('lease-fence/service-client');",
  'lease-fence/sql': "await import('lease-fence/sql');",
  'lease-fence/redis': "await import('lease-fence/redis');",
  "require('lease-fence').load()": "await (await import('node:module')).createRequire(process.cwd() + '/x.cjs')('lease-fence').load();",
};
const only = new RegExp(opts.only);

const base = mkdtempSync(join(tmpdir(), 'lease-fence-entries-'));
try {
  execFileSync('sh', ['-c', `git -C "${root}" archive "${opts.baseline}" package.json wasm/js | tar -x -C "${base}"`], { stdio: 'inherit' });
  for (const f of ['lease-fence.wasm', 'wasm_exec.mjs', 'gate-texts.mjs']) {
    if (existsSync(join(root, 'wasm/js', f))) copyFileSync(join(root, 'wasm/js', f), join(base, 'wasm/js', f));
  }
  const sides = { ours: root, [opts.baseline]: base };
  const once = (cwd, code) => execFileSync(process.execPath, ['--input-type=module', '-e', `
const c0 = process.cpuUsage();
const t0 = performance.now();
${code}
const c = process.cpuUsage(c0);
console.log(performance.now() - t0, (c.user + c.system) / 1000);
`], { cwd, encoding: 'utf8' }).trim().split(' ').map(Number);
  const stats = (xs) => {
    const s = [...xs].sort((a, b) => a - b);
    return { min: s[0], median: s.length % 2 ? s[s.length >> 1] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2, max: s[s.length - 1] };
  };
  const fmt = ({ min, median, max }) => `${min.toFixed(1)} / ${median.toFixed(1)} / ${max.toFixed(1)}`;
  console.log(`cold import in node ${process.version}, ${runs} fresh processes per side and entry, alternating; load average before: ${loadavg().map((n) => n.toFixed(2)).join(' ')}`);
  console.log(`${'entry'.padEnd(34)}${'side'.padEnd(8)}${'wall min / median / max ms'.padEnd(30)}CPU min / median / max ms`);
  for (const [name, code] of Object.entries(entries)) {
    if (!only.test(name)) continue;
    const wall = { ours: [], base: [] };
    const cpu = { ours: [], base: [] };
    for (let i = 0; i < runs; i++) {
      const order = i % 2 ? ['base', 'ours'] : ['ours', 'base'];
      for (const k of order) {
        const [w, c] = once(k === 'ours' ? sides.ours : base, code);
        wall[k].push(w);
        cpu[k].push(c);
      }
    }
    for (const k of ['ours', 'base']) {
      console.log(`${(k === 'ours' ? name : '').padEnd(34)}${(k === 'ours' ? 'ours' : opts.baseline).padEnd(8)}${fmt(stats(wall[k])).padEnd(30)}${fmt(stats(cpu[k]))}`);
    }
    const r = (m) => (stats(m.ours).median / stats(m.base).median).toFixed(2);
    console.log(`${''.padEnd(34)}ratio of medians (ours / ${opts.baseline}): wall ${r(wall)}, CPU ${r(cpu)}`);
  }
  console.log(`load average after: ${loadavg().map((n) => n.toFixed(2)).join(' ')}`);
} finally {
  rmSync(base, { recursive: true, force: true });
}
