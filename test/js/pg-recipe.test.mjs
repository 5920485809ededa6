// The PostgreSQL recipe of docs/js.md, run as written (the code block is read
// from the doc) against a real PostgreSQL server that this test starts with
// internal/pgtest (go run ./internal/pgtest/pgserver: initdb in a temporary
// directory, 127.0.0.1 on a free port, stopped at the end). Leases come from
// the wasm library; the fence goes into the SQL statements.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { createInterface } from 'node:readline';
import pg from 'pg';
import { createManualClock, LeaseClient, LeaseCoordinator, StaleFenceError } from 'lease-fence';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

// The recipe, extracted from docs/js.md into a module inside the repository
// (so that 'lease-fence' and 'pg' resolve as they do for the tests).
function loadRecipe() {
  const doc = readFileSync(join(root, 'docs', 'js.md'), 'utf8');
  const m = doc.match(/<!-- pg-recipe:start -->\n```js\n([\s\S]*?)```\n<!-- pg-recipe:end -->/);
  assert.ok(m, 'docs/js.md has the pg recipe block');
  const dir = join(root, 'out', 'test');
  mkdirSync(dir, { recursive: true });
  const file = join(dir, 'pg-recipe.mjs');
  writeFileSync(file, m[1]);
  return import(pathToFileURL(file).href);
}

let server; // the pgserver process
let url;
let pools = [];
let recipe;

before(async () => {
  recipe = await loadRecipe();
  server = spawn(process.env.GO ?? 'go', ['run', './internal/pgtest/pgserver'], { cwd: root, stdio: ['pipe', 'pipe', 'inherit'] });
  const lines = createInterface({ input: server.stdout });
  url = await new Promise((resolve, reject) => {
    lines.once('line', resolve);
    server.once('exit', (code) => reject(new Error(`pgserver exited with ${code} before printing its URL (is PostgreSQL installed? scripts/setup.sh)`)));
  });
  assert.match(url, /^postgres:\/\/postgres@127\.0\.0\.1:\d+\/postgres/);
});

after(async () => {
  await Promise.all(pools.map((p) => p.end()));
  if (server && server.exitCode === null) {
    const exited = new Promise((resolve) => server.once('exit', resolve));
    server.stdin.end(); // pgserver stops the server when its stdin closes
    assert.equal(await exited, 0, 'pgserver stopped the server cleanly');
  }
});

async function freshDatabase(name) {
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const pool = new pg.Pool({ connectionString: url.replace('/postgres?', `/${name}?`), max: 4 });
  pools.push(pool);
  await pool.query(recipe.schema);
  await pool.query('CREATE TABLE docs (id INT PRIMARY KEY, body TEXT NOT NULL, fence BIGINT NOT NULL)');
  await pool.query(`INSERT INTO docs VALUES (1, 'initial', 0)`);
  return pool;
}

// Holder A's lease expires and B gets fence 2, on one timeline.
function twoLeases() {
  const clocks = Object.fromEntries(['coordinator', 'agent-a', 'agent-b'].map((d) => [d, createManualClock(d)]));
  const at = (ms) => { for (const c of Object.values(clocks)) c.set(ms); };
  const coordinator = new LeaseCoordinator({ clock: clocks.coordinator, ttlMillis: 1000 });
  const acquire = (holder) => {
    const client = new LeaseClient({ clock: clocks[holder], holderId: holder });
    const req = client.beginAcquire('doc-1');
    const out = coordinator.acquire(req);
    assert.equal(out.ok, true);
    return client.completeAcquire(req, out.grant);
  };
  at(0);
  const a = acquire('agent-a');
  at(1000);
  const b = acquire('agent-b');
  assert.equal(a.token.fence, 1);
  assert.equal(b.token.fence, 2);
  return { a, b };
}

const writeBody = (body, fence) => (db) => db.query('UPDATE docs SET body = $1, fence = $2 WHERE id = 1', [body, fence]);

async function state(pool) {
  const { rows: [doc] } = await pool.query('SELECT body, fence FROM docs WHERE id = 1');
  const { rows: floors } = await pool.query(`SELECT fence, holder FROM lease_fence_floor WHERE resource = 'doc-1'`);
  const { rows: rejections } = await pool.query(
    `SELECT seq, refused_holder, refused_fence, admitted_holder, admitted_fence FROM lease_fence_rejection WHERE resource = 'doc-1' ORDER BY seq`);
  return { body: doc.body, floor: floors.length ? Number(floors[0].fence) : 0, rejections };
}

// A promise and its resolve, to hold a write open.
function gate() {
  let open;
  const p = new Promise((resolve) => { open = resolve; });
  return { p, open };
}

describe('the fence checked by PostgreSQL, from JavaScript', () => {
  test('a stale holder writing after the new one is refused, in the database, and logged', async () => {
    const pool = await freshDatabase('stale');
    const { a, b } = twoLeases();
    await recipe.fencedWrite(pool, b.token, writeBody('from b', 2));
    await assert.rejects(recipe.fencedWrite(pool, a.token, writeBody('from a', 1)), (err) => {
      assert.ok(err instanceof StaleFenceError);
      assert.deepEqual(err.rejection, { seq: 1, resource: 'doc-1', refusedHolderId: 'agent-a', refusedFence: 1, admittedHolderId: 'agent-b', admittedFence: 2 });
      return true;
    });
    const s = await state(pool);
    assert.equal(s.body, 'from b');
    assert.equal(s.floor, 2);
    assert.deepEqual(s.rejections, [{ seq: '1', refused_holder: 'agent-a', refused_fence: '1', admitted_holder: 'agent-b', admitted_fence: '2' }]);
  });

  test('the issue\'s async overlap: B commits while A\'s write is still waiting; A is refused when it gets the row', async () => {
    const pool = await freshDatabase('overlap');
    const { a, b } = twoLeases();
    const inside = gate();
    const release = gate();
    // B's transaction holds the floor row while its write awaits something.
    const bDone = recipe.fencedWrite(pool, b.token, async (db) => {
      inside.open();
      await release.p;
      return writeBody('from b', 2)(db);
    });
    await inside.p;
    // A (stale, fence 1) starts its write meanwhile: it waits for the row.
    const aDone = recipe.fencedWrite(pool, a.token, writeBody('from a', 1));
    release.open();
    await bDone;
    await assert.rejects(aDone, StaleFenceError);
    const s = await state(pool);
    assert.equal(s.body, 'from b', 'the stale write did not land after the newer one');
    assert.equal(s.rejections.length, 1);
  });

  test('an older holder that got the row first commits first; the newer one follows', async () => {
    const pool = await freshDatabase('commit_order');
    const { a, b } = twoLeases();
    const inside = gate();
    const release = gate();
    const aDone = recipe.fencedWrite(pool, a.token, async (db) => {
      inside.open();
      await release.p;
      return writeBody('from a', 1)(db);
    });
    await inside.p;
    const bDone = recipe.fencedWrite(pool, b.token, writeBody('from b', 2));
    release.open();
    await aDone;
    await bDone;
    const s = await state(pool);
    assert.equal(s.body, 'from b');
    assert.equal(s.floor, 2);
    assert.equal(s.rejections.length, 0, 'fencing does not make the handover atomic: A wrote before B, which is allowed');
    await assert.rejects(recipe.fencedWrite(pool, a.token, writeBody('late a', 1)), StaleFenceError);
  });

  test('a write that throws rolls everything back, the raise of the floor included', async () => {
    const pool = await freshDatabase('rollback');
    const { a, b } = twoLeases();
    await recipe.fencedWrite(pool, a.token, writeBody('from a', 1));
    await assert.rejects(recipe.fencedWrite(pool, b.token, async (db) => {
      await writeBody('half of b', 2)(db);
      throw new Error('the rest of the write failed');
    }), /the rest of the write failed/);
    const s = await state(pool);
    assert.equal(s.body, 'from a', 'nothing of the failed write is in the database');
    assert.equal(s.floor, 1, 'the floor rolled back with it');
    assert.equal(s.rejections.length, 0);
  });
});
