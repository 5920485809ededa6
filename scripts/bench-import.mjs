// Cold import of lease-fence in Node, beside the floor for Go wasm: a Go
// program that does nothing (main blocks, one no-op //go:wasmexport), built
// with the same flags and started the same way (read the file, instantiate
// with wasm/js/wasm_exec.mjs, run main). Run by `make bench-js` after
// `make build-wasm`:
//
//   node scripts/bench-import.mjs [runs]
//
// Each run starts a fresh node process per side, rotating the order, and
// measures inside it from just before the import (or the floor's load) to
// when the module is usable: the wall-clock time, and the CPU time the
// process spent meanwhile (all threads, so V8's background compilation
// counts), which other load on the machine disturbs less. Reports
// min/median/max in milliseconds and the ratio of the medians, with the load
// average: the machine is shared.
//
// A third side, for reference only (the goal is against the floor): the same
// do-nothing program importing the standard library's time package (its
// no-op reads time.Now), loaded as the floor is. Importing time links
// syscall, syscall/js and internal/godebug and runs their init, which any Go
// program that uses time pays; lease-fence's core uses it.
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freshNode, load, stats } from './bench-kit.mjs';

const runs = Number(process.argv[2] ?? 10);
const root = fileURLToPath(new URL('..', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'lease-fence-floor-'));

try {
  writeFileSync(join(dir, 'go.mod'), 'module floor\n\ngo 1.24\n');
  writeFileSync(join(dir, 'main.go'), `package main

//go:wasmexport noop
func noop() {}

func main() { select {} }
`);
  const floorWasm = join(dir, 'floor.wasm');
  const build = (out, cwd) => execFileSync('go', ['build', '-trimpath', '-ldflags=-s -w', '-o', out, '.'], {
    cwd, env: { ...process.env, GOOS: 'js', GOARCH: 'wasm' }, stdio: 'inherit',
  });
  build(floorWasm, dir);
  const timeDir = join(dir, 'time');
  mkdirSync(timeDir);
  writeFileSync(join(timeDir, 'go.mod'), 'module floortime\n\ngo 1.24\n');
  writeFileSync(join(timeDir, 'main.go'), `package main

import "time"

var t time.Time

//go:wasmexport noop
func noop() { t = time.Now() }

func main() { select {} }
`);
  const timeWasm = join(dir, 'time.wasm');
  build(timeWasm, timeDir);
  const shim = new URL('../wasm/js/wasm_exec.mjs', import.meta.url).href;

  const ours = "await import('lease-fence');";
  const goWasm = (file) => `
const { Go } = await import(${JSON.stringify(shim)});
const { readFile } = await import('node:fs/promises');
const go = new Go();
const { instance } = await WebAssembly.instantiate(await readFile(${JSON.stringify(file)}), go.importObject);
go.run(instance);
instance.exports.noop();`;
  const sides = {
    ours: { code: ours, label: "import('lease-fence')", wasm: join(root, 'wasm/js/lease-fence.wasm') },
    floor: { code: goWasm(floorWasm), label: 'minimal Go wasm (the floor)', wasm: floorWasm },
    time: { code: goWasm(timeWasm), label: 'the same importing time', wasm: timeWasm },
  };
  const loadBefore = load();
  const wall = { ours: [], floor: [], time: [] };
  const cpu = { ours: [], floor: [], time: [] };
  const order = Object.keys(sides);
  for (let i = 0; i < runs; i++) {
    // Each run starts with the next side, so none is always first.
    for (let j = 0; j < order.length; j++) {
      const k = order[(i + j) % order.length];
      const [w, c] = freshNode(sides[k].code, root);
      wall[k].push(w);
      cpu[k].push(c);
    }
  }
  const fmt = ({ min, median, max }) => `min ${min.toFixed(1)}  median ${median.toFixed(1)}  max ${max.toFixed(1)} ms`;
  const kib = (p) => `${(statSync(p).size / 1024).toFixed(0)} KiB`;
  const ratio = (m, k) => (stats(m[k]).median / stats(m.floor).median).toFixed(2);
  console.log(`cold import in node ${process.version}, ${runs} fresh processes per side, in rotating order; load average before: ${loadBefore}`);
  for (const [title, m] of [['wall clock', wall], ['CPU time  ', cpu]]) {
    for (const [k, side] of Object.entries(sides)) {
      const head = k === 'ours' ? `  ${title}  ` : '              ';
      console.log(`${head}${side.label.padEnd(31)}${fmt(stats(m[k]))}${m === wall ? `   (wasm ${kib(side.wasm)})` : ''}`);
    }
    console.log(`              ratio of medians to the floor: ${ratio(m, 'ours')}x (goal: within 1.3x); importing time alone: ${ratio(m, 'time')}x`);
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
