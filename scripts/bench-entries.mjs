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
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { freshNode, load, stats } from './bench-kit.mjs';

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
  const fmt = ({ min, median, max }) => `${min.toFixed(1)} / ${median.toFixed(1)} / ${max.toFixed(1)}`;
  console.log(`cold import in node ${process.version}, ${runs} fresh processes per side and entry, alternating; load average before: ${load()}`);
  console.log(`${'entry'.padEnd(34)}${'side'.padEnd(8)}${'wall min / median / max ms'.padEnd(30)}CPU min / median / max ms`);
  for (const [name, code] of Object.entries(entries)) {
    if (!only.test(name)) continue;
    const wall = { ours: [], base: [] };
    const cpu = { ours: [], base: [] };
    for (let i = 0; i < runs; i++) {
      const order = i % 2 ? ['base', 'ours'] : ['ours', 'base'];
      for (const k of order) {
        const [w, c] = freshNode(code, k === 'ours' ? root : base);
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
  console.log(`load average after: ${load()}`);
} finally {
  rmSync(base, { recursive: true, force: true });
}
