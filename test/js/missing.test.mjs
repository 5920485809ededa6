// A package or checkout without its build outputs (lease-fence.wasm,
// wasm_exec.mjs: git ignores both, make build-wasm makes them): npm pack
// refuses to pack it (the prepack script), and importing it rejects with a
// LeaseFenceError that says how to build them, through every entry. Each
// case copies the package's files (package.json and its "files") into a
// temporary folder, leaves one out, and imports the package by its own name
// from a child Node.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../../', import.meta.url));
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));

// copy makes a folder with the package's files but those in without.
function copy(without = []) {
  const dir = mkdtempSync(join(tmpdir(), 'lease-fence-missing-'));
  for (const f of ['package.json', 'scripts/prepack.mjs', ...pkg.files]) {
    if (without.includes(f)) continue;
    mkdirSync(dirname(join(dir, f)), { recursive: true });
    cpSync(join(root, f), join(dir, f));
  }
  return dir;
}

// load imports specifier (or requires it and calls load(), for cjs) in a
// child Node in dir and returns what the import did.
function load(dir, specifier, how = 'import') {
  const code = how === 'import'
    ? `try { await import(${JSON.stringify(specifier)}); console.log(JSON.stringify({ ok: true })); } catch (e) { console.log(JSON.stringify({ name: e.name, message: e.message, isError: e instanceof Error })); }`
    : `const { createRequire } = await import('node:module'); const require = createRequire(${JSON.stringify(join(dir, 'x.cjs'))});
       try { await require(${JSON.stringify(specifier)}).load(); console.log(JSON.stringify({ ok: true })); } catch (e) { console.log(JSON.stringify({ name: e.name, message: e.message, isError: e instanceof Error })); }`;
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', code], { cwd: dir, encoding: 'utf8' });
  assert.equal(r.status, 0, `${specifier}: exit ${r.status}\n${r.stderr}`);
  return JSON.parse(r.stdout.trim().split('\n').pop());
}

// The entries a user loads, each with how: import or require.
const ENTRIES = [['lease-fence', 'import'], ['lease-fence/service-client', 'import'], ['./wasm/js/lease-fence.mjs', 'import'], ['lease-fence', 'require']];

const FIX = /in a checkout of lease-fence, build it with `make build-wasm`/;

test('without lease-fence.wasm, every entry rejects with a LeaseFenceError that says how to build it', () => {
  const dir = copy(['wasm/js/lease-fence.wasm']);
  try {
    for (const [specifier, how] of ENTRIES) {
      const got = load(dir, specifier, how);
      assert.equal(got.name, 'LeaseFenceError', `${how} ${specifier}: ${JSON.stringify(got)}`);
      assert.ok(got.isError);
      assert.match(got.message, /lease-fence\.wasm/);
      assert.match(got.message, /the file is not there/);
      assert.match(got.message, FIX);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('without wasm_exec.mjs, the import rejects with a LeaseFenceError that says how to build it', () => {
  const dir = copy(['wasm/js/wasm_exec.mjs']);
  try {
    for (const [specifier, how] of ENTRIES) {
      const got = load(dir, specifier, how);
      assert.equal(got.name, 'LeaseFenceError', `${how} ${specifier}: ${JSON.stringify(got)}`);
      assert.match(got.message, /^lease-fence: loading wasm_exec\.mjs \(the Go runtime's glue, beside lease-fence\.mjs\) failed: /);
      assert.match(got.message, FIX);
    }
    // With both there, the same copy loads.
    cpSync(join(root, 'wasm/js/wasm_exec.mjs'), join(dir, 'wasm/js/wasm_exec.mjs'));
    assert.deepEqual(load(dir, 'lease-fence'), { ok: true });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('npm pack refuses a checkout without the built wasm, or with one older than its Go', () => {
  const pack = (dir) => spawnSync('npm', ['pack', '--json', '--pack-destination', join(dir, 'out')], { cwd: dir, encoding: 'utf8' });
  for (const left of ['wasm/js/lease-fence.wasm', 'wasm/js/wasm_exec.mjs']) {
    const dir = copy([left]);
    try {
      mkdirSync(join(dir, 'out'));
      const r = pack(dir);
      assert.notEqual(r.status, 0, `npm pack without ${left} succeeded`);
      assert.match(r.stderr, new RegExp(`lease-fence: npm pack refused: ${left.replace('.', '\\.')} is missing: run \`make build-wasm\``));
      assert.deepEqual(execFileSync('ls', [join(dir, 'out')], { encoding: 'utf8' }), '', 'a tarball was written');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }
  // A Go source newer than the wasm: stale, refused.
  const dir = copy();
  try {
    mkdirSync(join(dir, 'out'));
    mkdirSync(join(dir, 'core'));
    writeFileSync(join(dir, 'core', 'changed.go'), 'package core\n');
    const later = new Date(Date.now() + 60_000);
    utimesSync(join(dir, 'core', 'changed.go'), later, later);
    const r = pack(dir);
    assert.notEqual(r.status, 0, 'npm pack with a stale wasm succeeded');
    assert.match(r.stderr, /wasm\/js\/lease-fence\.wasm is older than core\/changed\.go/);
    // Built again (here: touched), it packs.
    const newer = new Date(Date.now() + 120_000);
    utimesSync(join(dir, 'wasm/js/lease-fence.wasm'), newer, newer);
    const ok = pack(dir);
    assert.equal(ok.status, 0, ok.stderr);
    assert.equal(JSON.parse(ok.stdout)[0].files.some((f) => f.path === 'wasm/js/lease-fence.wasm'), true);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
