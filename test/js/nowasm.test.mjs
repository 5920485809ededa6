// lease-fence/sql, lease-fence/redis and the fence header load no
// WebAssembly: their errors come from errors.mjs. Each case copies the
// package's files (package.json and its "files") into a temporary folder
// without lease-fence.wasm and wasm_exec.mjs, and uses the entries from a
// child Node by the package's own name.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../../', import.meta.url));
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
const WASM = ['wasm/js/lease-fence.wasm', 'wasm/js/wasm_exec.mjs'];

function copyWithoutWasm() {
  const dir = mkdtempSync(join(tmpdir(), 'lease-fence-nowasm-'));
  for (const f of ['package.json', ...pkg.files]) {
    if (WASM.includes(f)) continue;
    mkdirSync(dirname(join(dir, f)), { recursive: true });
    cpSync(join(root, f), join(dir, f));
  }
  for (const f of WASM) assert.equal(existsSync(join(dir, f)), false, f);
  return dir;
}

// run runs code as an ES module in a child Node in dir; it prints one JSON line.
function run(dir, code) {
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', code], { cwd: dir, encoding: 'utf8' });
  assert.equal(r.status, 0, `exit ${r.status}\n${r.stderr}`);
  return JSON.parse(r.stdout.trim().split('\n').pop());
}

test('errors.mjs is in the package files', () => {
  assert.ok(pkg.files.includes('wasm/js/errors.mjs'));
});

test('without the wasm, lease-fence/sql, lease-fence/redis and the fence header import and work', async () => {
  const dir = copyWithoutWasm();
  try {
    const got = run(dir, `
      const sql = await import('lease-fence/sql');
      const redis = await import('lease-fence/redis');
      const header = await import('./wasm/js/fence-header.mjs');
      const errors = await import('./wasm/js/errors.mjs');
      const out = {};
      try { await sql.openSqlFence({}); } catch (e) { out.sql = [e.name, e.argument, e instanceof errors.InvalidArgumentError, e instanceof errors.LeaseFenceError]; }
      try { redis.openRedisFence({}); } catch (e) { out.redis = [e.name, e instanceof errors.InvalidArgumentError]; }
      out.header = header.leaseFenceHeader({ resource: 'deploy-slot', holderId: 'agent-a', fence: 7 });
      const body = { error: { rejection: { seq: 1, resource: 'r', refusedHolderId: 'b', refusedFence: 3, admittedHolderId: 'a', admittedFence: 5 } } };
      const res = new Response(JSON.stringify(body), { status: 409, headers: { 'Lease-Fence-Error': 'stale_fence' } });
      const stale = await header.staleFenceError(res);
      out.stale = [stale.name, stale instanceof errors.StaleFenceError, stale.rejection.refusedFence,
        sql.isStaleFence(new Error('wrapped', { cause: stale })), redis.isStaleFence(stale), header.isStaleFence(new Error('x'))];
      out.same = sql.isStaleFence === errors.isStaleFence && redis.isStaleFence === errors.isStaleFence;
      console.log(JSON.stringify(out));`);
    assert.deepEqual(got, {
      sql: ['InvalidArgumentError', 'pool', true, true],
      redis: ['InvalidArgumentError', true],
      header: 'resource="deploy-slot", holder="agent-a", fence=7',
      stale: ['StaleFenceError', true, 3, true, true, false],
      same: true,
    });
    // The main entry still needs the wasm, and says so.
    const main = run(dir, `try { await import('lease-fence'); console.log('{"ok":true}'); } catch (e) { console.log(JSON.stringify({ name: e.name })); }`);
    assert.deepEqual(main, { name: 'LeaseFenceError' });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('lease-fence re-exports the same error classes as errors.mjs', async () => {
  const main = await import('lease-fence');
  const errors = await import('../../wasm/js/errors.mjs');
  const names = Object.keys(errors).sort();
  assert.ok(names.length >= 10, names.join());
  for (const n of names) assert.equal(main[n], errors[n], n);
});
