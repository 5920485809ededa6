// The examples of docs/fencing.md for lease-fence/sql and lease-fence/redis, run
// as written (each block is read from the page into a module inside the
// repository, so 'lease-fence/sql' and 'pg' resolve as for the tests)
// against real servers, with leases from the library: the newer holder's
// write lands, the stalled holder's is refused and logged.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import pg from 'pg';
import { createClient } from 'redis';
import { createManualClock, LeaseClient, LeaseCoordinator, StaleFenceError } from 'lease-fence';
import { root, startPostgres, startRedis } from './servers.mjs';

function loadExample(name) {
  const doc = readFileSync(join(root, 'docs', 'fencing.md'), 'utf8');
  const m = doc.match(new RegExp(`<!-- ${name}:start -->\\n\`\`\`js\\n([\\s\\S]*?)\`\`\`\\n<!-- ${name}:end -->`));
  assert.ok(m, `docs/fencing.md has the ${name} block`);
  const dir = join(root, 'out', 'test');
  mkdirSync(dir, { recursive: true });
  const file = join(dir, `${name}.mjs`);
  writeFileSync(file, m[1]);
  return import(pathToFileURL(file).href);
}

// Holder A's lease expires and B gets fence 2, on one timeline.
function twoLeases(resource) {
  const clocks = Object.fromEntries(['coordinator', 'agent-a', 'agent-b'].map((d) => [d, createManualClock(d)]));
  const at = (ms) => { for (const c of Object.values(clocks)) c.set(ms); };
  const coordinator = new LeaseCoordinator({ clock: clocks.coordinator, ttlMillis: 1000 });
  const acquire = (holder) => {
    const client = new LeaseClient({ clock: clocks[holder], holderId: holder });
    const req = client.beginAcquire(resource);
    const out = coordinator.acquire(req);
    assert.equal(out.ok, true);
    return client.completeAcquire(req, out.grant);
  };
  at(0);
  const a = acquire('agent-a');
  at(1000);
  return { a, b: acquire('agent-b') };
}

let pgServer;
let redisServer;
before(async () => { [pgServer, redisServer] = await Promise.all([startPostgres(), startRedis()]); });
after(async () => {
  assert.equal(await pgServer.stop(), 0);
  assert.equal(await redisServer.stop(), 0);
});

test('docs/fencing.md: lease-fence/sql example', async () => {
  const { shipOrder } = await loadExample('sql-example');
  const pool = new pg.Pool({ connectionString: pgServer.url, max: 2 });
  try {
    await pool.query(`CREATE TABLE orders (id INT PRIMARY KEY, status TEXT NOT NULL, fence BIGINT NOT NULL)`);
    await pool.query(`INSERT INTO orders VALUES (7, 'new', 0)`);
    const { a, b } = twoLeases('orders');
    assert.deepEqual(await shipOrder(pool, b, 7), []);
    await assert.rejects(shipOrder(pool, a, 7), (err) => {
      assert.ok(err instanceof StaleFenceError);
      assert.deepEqual(err.rejection, { seq: 1, resource: 'orders', refusedHolderId: 'agent-a', refusedFence: 1, admittedHolderId: 'agent-b', admittedFence: 2 });
      return true;
    });
    const { rows: [order] } = await pool.query('SELECT status, fence FROM orders WHERE id = 7');
    assert.deepEqual(order, { status: 'shipped', fence: '2' });
  } finally {
    await pool.end();
  }
});

test('docs/fencing.md: lease-fence/redis example', async () => {
  const { publishConfig } = await loadExample('redis-example');
  const client = createClient({ url: redisServer.url });
  await client.connect();
  try {
    const { a, b } = twoLeases('deploy-slot');
    assert.equal(await publishConfig(client, b, '42'), 2);
    await assert.rejects(publishConfig(client, a, '41'), StaleFenceError);
    assert.equal(await client.hGet('{deploy-slot}:config', 'version'), '42');
  } finally {
    await client.quit();
  }
});
