// `npm pack` gives a tarball that installs into an empty folder and works
// there: the published file list is complete and the module finds its wasm.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../../', import.meta.url));

test('npm pack installs into an empty folder and runs under this node', () => {
  const dir = mkdtempSync(join(tmpdir(), 'lease-fence-pack-'));
  try {
    const [packed] = JSON.parse(execFileSync('npm', ['pack', '--json', '--pack-destination', dir], { cwd: root, encoding: 'utf8' }));
    const files = packed.files.map((f) => f.path);
    const needed = ['package.json', ...JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')).files];
    for (const f of needed) assert.ok(files.includes(f), `${f} is missing from the tarball`);
    // npm always adds the README and licence; nothing else may ride along.
    assert.deepEqual(files.filter((f) => !needed.includes(f) && !/^(README|LICEN[CS]E)/i.test(f)), []);
    const app = join(dir, 'app');
    execFileSync('mkdir', [app]);
    writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'app', private: true, type: 'module' }));
    execFileSync('npm', ['install', '--offline', '--no-audit', '--no-fund', '--loglevel=error', join(dir, packed.filename)], { cwd: app });
    writeFileSync(join(app, 'main.mjs'), `
      import { createManualClock, FenceGate, LeaseClient, LeaseCoordinator, StaleFenceError } from 'lease-fence';
      import { LeaseServiceClient } from 'lease-fence/service-client';
      new LeaseServiceClient({ baseURL: 'http://127.0.0.1:1', holderId: 'a' });
      const coordinator = new LeaseCoordinator({ clock: createManualClock('c'), ttlMillis: 100 });
      const client = new LeaseClient({ clock: createManualClock('a'), holderId: 'a' });
      const gate = new FenceGate('r');
      const request = client.beginAcquire('r');
      const lease = client.completeAcquire(request, coordinator.acquire(request).grant);
      gate.admit({ resource: 'r', holderId: 'b', fence: 2 });
      let refused = false;
      try { gate.commit(lease.token, () => {}); } catch (e) { refused = e instanceof StaleFenceError; }
      console.log(JSON.stringify({ fence: lease.token.fence, refused, rejections: gate.rejections.length }));
    `);
    const out = execFileSync(process.execPath, ['main.mjs'], { cwd: app, encoding: 'utf8' });
    assert.deepEqual(JSON.parse(out), { fence: 1, refused: true, rejections: 1 });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

// The entries for browsers and Workers (and lease-fence/init, which
// bundlers use for the browser) reach no node: module through any import,
// static or dynamic; only the node and require entries may.
test('the browser, workerd, default and init entries import nothing from node:', () => {
  const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
  const dot = pkg.exports['.'];
  const entries = [dot.browser, dot.workerd, dot.default, pkg.exports['./init'].default];
  const specifiers = /\b(?:import|export)\s*(?:[\w*{}\s,]*?\s*from\s*)?\(?\s*['"]([^'"]+)['"]/g;
  const seen = new Set();
  const walk = (file) => {
    if (seen.has(file)) return;
    seen.add(file);
    const src = readFileSync(join(root, file), 'utf8').replace(/^\s*\/\/.*$/gm, '');
    for (const [, spec] of src.matchAll(specifiers)) {
      assert.ok(!spec.startsWith('node:') && spec.startsWith('./'), `${file} imports ${spec}`);
      if (spec.endsWith('.mjs')) walk(join(file, '..', spec));
    }
  };
  for (const e of entries) walk(e.replace(/^\.\//, ''));
  assert.ok(seen.has('wasm/js/loader.mjs') && seen.has('wasm/js/wasm_exec.mjs'), 'the walk follows the imports');
  // The node entry does import node:fs, so the pattern finds such imports.
  const nodeEntry = readFileSync(join(root, dot.node), 'utf8');
  assert.ok([...nodeEntry.matchAll(specifiers)].some(([, spec]) => spec === 'node:fs/promises'));
});
