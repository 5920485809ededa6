// lease-fence/sql and lease-fence/redis as users get them: from the npm
// pack tarball installed into an empty folder WITHOUT pg or redis (optional
// peer dependencies), both entries import, refuse bad input with the
// package's own error classes, and their StaleFenceError is the one users
// import from 'lease-fence' (instanceof holds across entries).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { root } from './servers.mjs';

test('the gate entries install without pg or redis, and share the main entry\'s errors', () => {
  const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
  assert.deepEqual(pkg.peerDependenciesMeta, { pg: { optional: true }, redis: { optional: true } });
  assert.ok(!('pg' in (pkg.dependencies ?? {})) && !('redis' in (pkg.dependencies ?? {})));
  const dir = mkdtempSync(join(tmpdir(), 'lease-fence-gates-pack-'));
  try {
    const [packed] = JSON.parse(execFileSync('npm', ['pack', '--json', '--pack-destination', dir], { cwd: root, encoding: 'utf8' }));
    const app = join(dir, 'app');
    execFileSync('mkdir', [app]);
    writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'app', private: true, type: 'module' }));
    execFileSync('npm', ['install', '--offline', '--no-audit', '--no-fund', '--loglevel=error', join(dir, packed.filename)], { cwd: app });
    assert.ok(!existsSync(join(app, 'node_modules', 'pg')) && !existsSync(join(app, 'node_modules', 'redis')), 'pg and redis were not installed');
    writeFileSync(join(app, 'main.mjs'), `
      import { InvalidArgumentError, StaleFenceError } from 'lease-fence';
      import { isStaleFence, openSqlFence } from 'lease-fence/sql';
      import { openRedisFence, redisKey } from 'lease-fence/redis';
      const out = {};
      try { await openSqlFence({}); } catch (e) { out.sql = e instanceof InvalidArgumentError && e.argument; }
      try { openRedisFence(null); } catch (e) { out.redis = e instanceof InvalidArgumentError && e.argument; }
      out.key = redisKey('deploy-slot', 'config');
      // A fake pool whose floor is 5 (the check returns it, the refusal
      // counted): the refusal is the main entry's class.
      const rows = { fence: '5', holder: 'b', rejections: '1', xid: '1' };
      const client = { query: async (q) => ({ rows: q.includes('RETURNING fence, holder, rejections') ? [rows] : [] }), release() {} };
      const store = await openSqlFence({ connect: async () => client, query: async () => ({ rows: [] }) });
      try { await store.commit({ resource: 'r', holderId: 'a', fence: 4 }, () => {}); } catch (e) { out.stale = e instanceof StaleFenceError && e.message; out.wrapped = isStaleFence(new AggregateError([new Error('x', { cause: e })])); }
      console.log(JSON.stringify(out));
    `);
    const out = JSON.parse(execFileSync(process.execPath, ['main.mjs'], { cwd: app, encoding: 'utf8' }));
    assert.deepEqual(out, {
      sql: 'pool', redis: 'client', key: '{deploy-slot}:config',
      stale: 'fence: stale write to "r" refused (rejection #1): holder "a" has fence 4 but holder "b" was admitted at fence 5',
      wrapped: true,
    });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
