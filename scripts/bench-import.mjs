// Cold import of lease-fence in Node, beside the floor for Go wasm: a Go
// program that does nothing (main blocks, one no-op //go:wasmexport), built
// with the same flags and started the same way (read the file, instantiate
// with wasm/js/wasm_exec.mjs, run main). Run by `make bench-js` after
// `make build-wasm`:
//
//   node scripts/bench-import.mjs [runs]
//
// Each run starts a fresh node process per side, alternating the two sides,
// and measures inside it from just before the import (or the floor's load)
// to when the module is usable: the wall-clock time, and the CPU time the
// process spent meanwhile (all threads, so V8's background compilation
// counts), which other load on the machine disturbs less. Reports
// min/median/max in milliseconds and the ratio of the medians, with the load
// average: the machine is shared.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

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
  execFileSync('go', ['build', '-trimpath', '-ldflags=-s -w', '-o', floorWasm, '.'], {
    cwd: dir, env: { ...process.env, GOOS: 'js', GOARCH: 'wasm' }, stdio: 'inherit',
  });
  const shim = new URL('../wasm/js/wasm_exec.mjs', import.meta.url).href;

  const ours = `
const c0 = process.cpuUsage();
const t0 = performance.now();
await import('lease-fence');
const c = process.cpuUsage(c0);
console.log(performance.now() - t0, (c.user + c.system) / 1000);
`;
  const floor = `
const c0 = process.cpuUsage();
const t0 = performance.now();
const { Go } = await import(${JSON.stringify(shim)});
const { readFile } = await import('node:fs/promises');
const go = new Go();
const { instance } = await WebAssembly.instantiate(await readFile(${JSON.stringify(floorWasm)}), go.importObject);
go.run(instance);
instance.exports.noop();
const c = process.cpuUsage(c0);
console.log(performance.now() - t0, (c.user + c.system) / 1000);
`;
  const once = (code) => execFileSync(process.execPath, ['--input-type=module', '-e', code], { cwd: root, encoding: 'utf8' }).trim().split(' ').map(Number);

  const load = loadavg().map((n) => n.toFixed(2)).join(' ');
  const t = { ours: [], floor: [], oursCPU: [], floorCPU: [] };
  for (let i = 0; i < runs; i++) {
    const [ow, oc] = once(ours);
    const [fw, fc] = once(floor);
    t.ours.push(ow);
    t.oursCPU.push(oc);
    t.floor.push(fw);
    t.floorCPU.push(fc);
  }
  const stats = (xs) => {
    const s = [...xs].sort((a, b) => a - b);
    return { min: s[0], median: s.length % 2 ? s[s.length >> 1] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2, max: s[s.length - 1] };
  };
  const fmt = ({ min, median, max }) => `min ${min.toFixed(1)}  median ${median.toFixed(1)}  max ${max.toFixed(1)} ms`;
  const o = stats(t.ours);
  const f = stats(t.floor);
  const kib = (p) => `${(statSync(p).size / 1024).toFixed(0)} KiB`;
  console.log(`cold import in node ${process.version}, ${runs} fresh processes per side, alternating; load average before: ${load}`);
  const oc = stats(t.oursCPU);
  const fc = stats(t.floorCPU);
  console.log(`  wall clock  import('lease-fence')          ${fmt(o)}   (wasm ${kib(join(root, 'wasm/js/lease-fence.wasm'))})`);
  console.log(`              minimal Go wasm (the floor)    ${fmt(f)}   (wasm ${kib(floorWasm)})`);
  console.log(`              ratio of medians: ${(o.median / f.median).toFixed(2)}x (goal: within 1.3x)`);
  console.log(`  CPU time    import('lease-fence')          ${fmt(oc)}`);
  console.log(`              minimal Go wasm (the floor)    ${fmt(fc)}`);
  console.log(`              ratio of medians: ${(oc.median / fc.median).toFixed(2)}x`);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
