// lease-fence/sql beyond the conformance suite: bad options, retried
// deadlocks, a COMMIT whose connection breaks (settled with pg_xact_status),
// a database that is down, all against a real PostgreSQL server.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import pg from 'pg';
import { InvalidArgumentError, StaleFenceError } from 'lease-fence';
import { FenceStoreError, openSqlFence } from 'lease-fence/sql';
import { cutProxy } from './cutproxy.mjs';
import { createDatabase, startPostgres } from './servers.mjs';

let server;
let dbSeq = 0;
const pools = [];
before(async () => { server = await startPostgres(); });
after(async () => {
  await Promise.all(pools.map((p) => p.end().catch(() => {})));
  assert.equal(await server.stop(), 0);
});

const freshUrl = () => createDatabase(server.url, `sq${++dbSeq}`);
function pool(url, opts = {}) {
  const p = new pg.Pool({ connectionString: url, max: 4, ...opts });
  p.on('error', () => {}); // a cut connection
  pools.push(p);
  return p;
}
const tk = (holderId, fence, resource = 'r') => ({ resource, holderId, fence });

test('openSqlFence refuses bad arguments before touching the database', async () => {
  const p = pool(await freshUrl());
  for (const [args, argument] of [
    [[null], 'pool'], [[{}], 'pool'], [[p, 'x'], 'options'], [[p, { dialect: 'sqlite' }], 'options.dialect'],
    [[p, { table: '1abc' }], 'options.table'], [[p, { table: 'a'.repeat(42) }], 'options.table'], [[p, { table: 'x; DROP' }], 'options.table'],
    [[p, { exclusive: 'yes' }], 'options.exclusive'],
  ]) {
    await assert.rejects(openSqlFence(...args), (e) => e instanceof InvalidArgumentError && e.argument === argument, JSON.stringify(argument));
  }
  const { rows } = await p.query(`SELECT count(*)::int AS n FROM information_schema.tables WHERE table_schema = 'public'`);
  assert.equal(rows[0].n, 0, 'no table was created');
  const store = await openSqlFence(p, { table: 'my_fence' });
  await store.admit(tk('a', 3));
  assert.equal((await p.query('SELECT fence FROM my_fence_floor')).rows[0].fence, '3');
  await assert.rejects(store.floor(''), InvalidArgumentError);
  await assert.rejects(store.rejections(42), InvalidArgumentError);
  await assert.rejects(store.commit(tk('a', 3), 'not a function'), (e) => e instanceof InvalidArgumentError && e.argument === 'write');
});

test('a deadlock between two commits is retried: both land once', async () => {
  const p = pool(await freshUrl());
  const store = await openSqlFence(p);
  await p.query('CREATE TABLE rows (id INT PRIMARY KEY, n INT NOT NULL)');
  await p.query('INSERT INTO rows VALUES (1, 0), (2, 0)');
  let aHas;
  let bHas;
  const aLocked = new Promise((resolve) => { aHas = resolve; });
  const bLocked = new Promise((resolve) => { bHas = resolve; });
  let runs = 0;
  // Two resources, so the floor rows do not serialize them; each locks
  // one row, waits for the other, then takes the other's row.
  const write = (first, second, mine, theirs) => async (client) => {
    runs++;
    await client.query('UPDATE rows SET n = n + 1 WHERE id = $1', [first]);
    mine();
    await theirs;
    await client.query('UPDATE rows SET n = n + 1 WHERE id = $1', [second]);
  };
  await Promise.all([
    store.commit(tk('a', 1, 'ra'), write(1, 2, aHas, bLocked)),
    store.commit(tk('b', 1, 'rb'), write(2, 1, bHas, aLocked)),
  ]);
  assert.ok(runs >= 3, `one write ran again after the deadlock (${runs} runs)`);
  const { rows } = await p.query('SELECT n FROM rows ORDER BY id');
  assert.deepEqual(rows.map((r) => r.n), [2, 2], 'each commit landed exactly once');
});

test('a COMMIT whose connection breaks is settled with pg_xact_status', async () => {
  const url = await freshUrl();
  const u = new URL(url);
  for (const forward of [true, false]) {
    const proxy = await cutProxy([u.hostname, Number(u.port)], /COMMIT/, { forward });
    const pu = new URL(url);
    pu.port = String(proxy.port);
    const p = pool(pu.toString());
    const store = await openSqlFence(p);
    await p.query('CREATE TABLE IF NOT EXISTS t (v TEXT)');
    const v = `forward=${forward}`;
    const result = store.commit(tk('a', 5, v), async (client) => {
      await client.query('INSERT INTO t VALUES ($1)', [v]);
      return 'written';
    });
    if (forward) {
      assert.equal(await result, 'written', 'the commit happened and Commit says so');
    } else {
      await assert.rejects(result, (e) => e instanceof FenceStoreError && e.written === false && e.op === 'commit');
    }
    assert.ok(proxy.cut, 'the proxy cut the COMMIT');
    const { rows } = await p.query('SELECT count(*)::int AS n FROM t WHERE v = $1', [v]);
    assert.equal(rows[0].n, forward ? 1 : 0);
    assert.equal(await store.floor(v), forward ? 5 : 0);
    await proxy.close();
  }
});

test('a database that is down gives FenceStoreError, nothing written', async () => {
  const p = pool('postgres://postgres@127.0.0.1:1/x', { connectionTimeoutMillis: 2000 });
  await assert.rejects(openSqlFence(p), (e) => e instanceof FenceStoreError && e.written === false);
});

test('a stale commit never runs its write, and Go-compatible rows record it', async () => {
  const p = pool(await freshUrl());
  const store = await openSqlFence(p);
  await store.admit(tk('b', 9));
  let ran = false;
  await assert.rejects(store.commit(tk('a', 8), () => { ran = true; }), StaleFenceError);
  assert.equal(ran, false);
  const { rows } = await p.query('SELECT resource, seq, refused_holder_id, refused_fence, admitted_holder_id, admitted_fence FROM lease_fence_rejection');
  assert.deepEqual(rows, [{ resource: 'r', seq: '1', refused_holder_id: 'a', refused_fence: '8', admitted_holder_id: 'b', admitted_fence: '9' }]);
});

test('tables of an earlier version (refused_holder, admitted_holder) are upgraded at open, their rows kept', async () => {
  const p = pool(await freshUrl());
  await p.query('CREATE TABLE lease_fence_floor (resource TEXT PRIMARY KEY, fence BIGINT NOT NULL, holder TEXT NOT NULL, rejections BIGINT NOT NULL)');
  await p.query('CREATE TABLE lease_fence_rejection (resource TEXT NOT NULL, seq BIGINT NOT NULL, refused_holder TEXT NOT NULL, ' +
    'refused_fence BIGINT NOT NULL, admitted_holder TEXT NOT NULL, admitted_fence BIGINT NOT NULL, PRIMARY KEY (resource, seq))');
  await p.query(`INSERT INTO lease_fence_floor VALUES ('r', 5, 'b', 1)`);
  await p.query(`INSERT INTO lease_fence_rejection VALUES ('r', 1, 'a', 4, 'b', 5)`);
  const [s1, s2] = await Promise.all([openSqlFence(p), openSqlFence(p)]);
  await assert.rejects(s1.commit(tk('c', 3), () => {}), StaleFenceError);
  const want = [
    { seq: 1, resource: 'r', refusedHolderId: 'a', refusedFence: 4, admittedHolderId: 'b', admittedFence: 5 },
    { seq: 2, resource: 'r', refusedHolderId: 'c', refusedFence: 3, admittedHolderId: 'b', admittedFence: 5 },
  ];
  assert.deepEqual(await s2.rejections('r'), want);
  assert.deepEqual(await (await openSqlFence(p)).rejections('r'), want, 'a later open changes nothing');
});

test('a signal that aborts while the commit waits for the floor row gives up: nothing written or logged', async () => {
  const p = pool(await freshUrl());
  const store = await openSqlFence(p);
  let inside;
  let release;
  const entered = new Promise((resolve) => { inside = resolve; });
  const held = new Promise((resolve) => { release = resolve; });
  const first = store.commit(tk('a', 2), async () => { inside(); await held; });
  await entered;
  const ac = new AbortController();
  let ran = false;
  // Stale (fence 1 < 2 once the first commits): aborted, it must not even be logged.
  const second = store.commit(tk('b', 1), () => { ran = true; }, { signal: ac.signal });
  // Wait until the second commit is blocked on the floor row's lock.
  for (let i = 0; ; i++) {
    const { rows } = await p.query(`SELECT count(*)::int AS n FROM pg_locks WHERE NOT granted`);
    if (rows[0].n > 0) break;
    assert.ok(i < 2000, 'the second commit never waited for the lock');
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  ac.abort(new Error('gave up'));
  release();
  await first;
  await assert.rejects(second, /gave up/);
  assert.equal(ran, false);
  assert.deepEqual(await store.rejections('r'), []);
  assert.equal(await store.floor('r'), 2);
});

test('a connection the server ended before the transaction is replaced: the commit runs on a fresh one', async () => {
  const p = pool(await freshUrl());
  const store = await openSqlFence(p);
  await p.query('CREATE TABLE t (v TEXT)');
  // A client whose backend the server ended (as a restart ends them all),
  // handed out once more by the pool before it noticed.
  const dead = await p.connect();
  const { rows: [{ pid }] } = await dead.query('SELECT pg_backend_pid() AS pid');
  dead.on('error', () => {}); // the FATAL, then the connection's end
  const ended = new Promise((resolve) => dead.once('end', resolve));
  await p.query('SELECT pg_terminate_backend($1, 5000)', [pid]);
  await ended;
  const connect = p.connect;
  let connects = 0;
  p.connect = function (...args) {
    connects++;
    if (connects === 1) return Promise.resolve(dead);
    return connect.apply(this, args); // pool.query calls it with a callback
  };
  let runs = 0;
  assert.equal(await store.commit(tk('a', 3), async (client) => {
    runs++;
    await client.query('INSERT INTO t VALUES ($1)', ['a3']);
    return 'written';
  }), 'written');
  assert.equal(runs, 1, 'the write ran once: the dead connection failed at BEGIN');
  assert.equal(connects, 2, 'a second connection was taken');
  p.connect = connect;
  const { rows } = await p.query('SELECT v FROM t');
  assert.deepEqual(rows, [{ v: 'a3' }]);
  assert.equal(await store.floor('r'), 3);
});

test('pages of the rejection log: bad options refused, the SQL reads Go-compatible rows', async () => {
  const p = pool(await freshUrl());
  const store = await openSqlFence(p);
  for (const [options, argument] of [[{ limit: 0 }, 'options.limit'], [{ limit: 10001 }, 'options.limit'], [{ afterSeq: 1 }, 'options.limit'],
    [{ afterSeq: -1, limit: 1 }, 'options.afterSeq'], [{ afterSeq: 2 ** 53, limit: 1 }, 'options.afterSeq'], [{ limit: 1, after: 1 }, 'options.after'], [7, 'options']]) {
    await assert.rejects(store.rejections('r', options), (e) => e instanceof InvalidArgumentError && e.argument === argument, JSON.stringify(options));
  }
  await store.admit(tk('b', 9));
  for (let i = 1; i <= 4; i++) await assert.rejects(store.admit(tk('a', i)), StaleFenceError);
  assert.deepEqual((await store.rejections('r', { afterSeq: 1, limit: 2 })).map((r) => r.seq), [2, 3]);
  assert.deepEqual((await store.rejections('r', { limit: 10 })).map((r) => r.refusedFence), [1, 2, 3, 4]);
});

// recording is p as a store sees it, each statement's text pushed to sent.
function recording(p, sent) {
  const wrappers = new WeakMap();
  return {
    query: (text, values) => p.query(text, values),
    async connect() {
      const c = await p.connect();
      if (!wrappers.has(c)) {
        wrappers.set(c, new Proxy(c, {
          get(target, k) {
            if (k === 'query') return (text, values) => { sent.push(text); return target.query(text, values); };
            const v = Reflect.get(target, k);
            return typeof v === 'function' ? v.bind(target) : v;
          },
        }));
      }
      return wrappers.get(c);
    },
  };
}
const shareSent = /^(PREPARE lease_fence_lease_fence_share AS SELECT [^]*;\n)?BEGIN;\nEXECUTE lease_fence_lease_fence_share\(([^]*), (\d+)\)$/;

test('resource names that are SQL are only names: each commit takes the share path of its own floor row', async () => {
  const p = pool(await freshUrl());
  // The statements each commit sends, as the server gets them.
  const sent = [];
  const store = await openSqlFence(recording(p, sent));
  await p.query('CREATE TABLE vals (resource TEXT NOT NULL, value TEXT NOT NULL)');
  const hostile = [
    "x'; DROP TABLE lease_fence_floor; --", "'", "''", '\\', "\\'", "a\\'b", "\\\\'); SELECT 1; --", "E'x'", '$1', '$2',
    '$$ $x$ $$', "'||pg_sleep(5)||'", '--', '/* x', 'résumé 😀', '\u2019', ' E\'\\\'', 'r\nr',
  ];
  for (const r of hostile) {
    await store.admit(tk('h', 2, r));
    sent.length = 0;
    await store.commit(tk('h', 2, r), (c) => c.query('INSERT INTO vals VALUES ($1, $2)', [r, 'v']));
    assert.equal(sent.length, 3, `${JSON.stringify(r)}: BEGIN and the share statement, the write, COMMIT: ${JSON.stringify(sent)}`);
    assert.ok(shareSent.test(sent[0]) && !sent.some((t) => t.includes('INSERT INTO lease_fence_floor')), `${JSON.stringify(r)}: ${JSON.stringify(sent)}`);
    await assert.rejects(store.commit(tk('h', 1, r), () => {}), (e) => e instanceof StaleFenceError && e.rejection.resource === r);
    assert.equal(await store.floor(r), 2);
  }
  const { rows } = await p.query('SELECT resource, fence, rejections FROM lease_fence_floor');
  assert.deepEqual(rows.map((x) => [x.resource, x.fence, x.rejections]).sort(), hostile.map((r) => [r, '2', '1']).sort());
  assert.deepEqual((await p.query('SELECT resource FROM vals')).rows.map((x) => x.resource).sort(), [...hostile].sort());
  // A NUL cannot be in a query's text: such a resource goes as a parameter,
  // which PostgreSQL refuses, and nothing is written.
  await assert.rejects(store.commit(tk('h', 2, 'a\0b'), () => assert.fail('ran')), (e) => e instanceof FenceStoreError && e.written === false);
  assert.equal((await p.query('SELECT count(*)::int AS n FROM lease_fence_floor')).rows[0].n, hostile.length);
});

test('the share statement is prepared once a connection, again once the connection lost it, not twice', async () => {
  const p = pool(await freshUrl(), { max: 1 }); // one connection for both stores
  const sent = [];
  const [a, b] = [await openSqlFence(recording(p, sent)), await openSqlFence(recording(p, sent))];
  await p.query('CREATE TABLE vals (value TEXT NOT NULL)');
  const commit = async (store, value, expect) => {
    sent.length = 0;
    if (value === 'admit') await store.admit(tk('h', 1));
    else await store.commit(tk('h', 1), (c) => c.query(value === 'deallocate' ? 'DEALLOCATE ALL' : 'INSERT INTO vals VALUES ($1)', [value].filter((v) => v !== 'deallocate')));
    const shares = sent.filter((t) => shareSent.test(t)).map((t) => (shareSent.exec(t)[1] ? 'prepare' : 'execute'));
    assert.deepEqual(shares, expect, `${value}: ${JSON.stringify(sent)}`);
    if (value !== 'admit') assert.ok(!sent.some((t) => t.includes('INSERT INTO lease_fence_floor')), `${value}: took the share path`);
  };
  // The first admit upserts the row, after the share statement found none.
  await commit(a, 'admit', ['prepare']);
  await commit(a, 'a1', ['execute']);
  await commit(a, 'a2', ['execute']);
  // b finds the connection prepared by a: its PREPARE fails (42P05), it executes.
  await commit(b, 'b1', ['prepare', 'execute']);
  await commit(b, 'b2', ['execute']);
  // The write deallocates it; the next commit's EXECUTE fails (26000), it prepares again.
  await commit(a, 'deallocate', ['execute']);
  await commit(a, 'a3', ['execute', 'prepare']);
  await commit(b, 'b3', ['execute']);
  assert.deepEqual((await p.query('SELECT value FROM vals')).rows.map((x) => x.value), ['a1', 'a2', 'b1', 'b2', 'a3', 'b3']);
  assert.equal(await a.floor('r'), 1);
});

test("the server parses and plans the share check once a connection: PostgreSQL's own counters", async () => {
  const p = pool(await freshUrl(), { max: 1 }); // the commits' connection is the one asked
  const store = await openSqlFence(p);
  await store.admit(tk('h', 1));
  for (let i = 0; i < 12; i++) await store.commit(tk('h', 1), () => {});
  // Every check ran the statement the connection prepared (no Parse of its
  // own); after PostgreSQL's five custom plans, from the one cached plan.
  const { rows } = await p.query('SELECT name, generic_plans::int AS generic, custom_plans::int AS custom FROM pg_prepared_statements');
  assert.deepEqual(rows.map((r) => [r.name, r.generic + r.custom]), [['lease_fence_lease_fence_share', 13]]);
  assert.ok(rows[0].custom <= 5 && rows[0].generic >= 8, JSON.stringify(rows));
});

test('connections that do not keep the share statement (a pooler): the check goes with parameters', async () => {
  const p = pool(await freshUrl(), { max: 1 });
  const sent = [];
  const rec = recording(p, sent);
  // As a pooler that hands each transaction another server connection
  // would: a statement just prepared is there already, one executed is gone.
  const pooled = {
    query: rec.query,
    async connect() {
      const c = await rec.connect();
      return {
        query: async (text, values) => {
          if (typeof text === 'string' && text.startsWith('PREPARE lease_fence_')) await c.query(text.slice(0, text.indexOf(';\nBEGIN;')));
          else if (typeof text === 'string' && text.startsWith('BEGIN;\nEXECUTE lease_fence_')) await c.query('DEALLOCATE ALL');
          return c.query(text, values);
        },
        release: (e) => c.release(e),
        on: (...a) => c.on(...a),
        off: (...a) => c.off(...a),
      };
    },
  };
  const store = await openSqlFence(pooled);
  await p.query('CREATE TABLE vals (value TEXT NOT NULL)');
  await store.admit(tk('h', 1));
  for (const v of ['a', 'b']) {
    sent.length = 0;
    await store.commit(tk('h', 1), (c) => c.query('INSERT INTO vals VALUES ($1)', [v]));
    assert.ok(sent.some((t) => t.startsWith('SELECT fence, holder, rejections') && t.includes('$1')), `${v}: the share statement with parameters: ${JSON.stringify(sent)}`);
    assert.ok(!sent.some((t) => t.includes('INSERT INTO lease_fence_floor')), `${v}: took the share path`);
  }
  // Once seen, the store no longer tries the prepared statement.
  assert.ok(!sent.some((t) => shareSent.test(t)), JSON.stringify(sent));
  await assert.rejects(store.commit(tk('h', 1), () => { throw new Error('the write failed'); }), /the write failed/);
  assert.deepEqual((await p.query('SELECT value FROM vals')).rows.map((x) => x.value), ['a', 'b']);
});
