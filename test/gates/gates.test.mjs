// The JavaScript gates against the conformance suite (conformance.mjs):
// FenceGate in this process, lease-fence/sql on a real PostgreSQL server and
// lease-fence/redis on a real redis-server (both started here), with writer
// processes, a SIGKILLed writer and the server restarted (Redis: killed
// with SIGKILL and restarted from its AOF; PostgreSQL: stopped as a crash
// would stop it and started again). Each gate also fails the suite when broken on
// purpose.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { failures, runConformance } from './conformance.mjs';
import { memoryGate, redisGate, sqlGate } from './adapters.mjs';
import { createDatabase, startPostgres, startRedis, startRedisCluster } from './servers.mjs';

let pgServer;
let redisServer;
let redisCluster;
const open = [];
let dbSeq = 0;
let nsSeq = 0;

before(async () => {
  [pgServer, redisServer, redisCluster] = await Promise.all([startPostgres(), startRedis(), startRedisCluster()]);
});

after(async () => {
  await Promise.all(open.map((g) => g.close().catch(() => {})));
  assert.equal(await pgServer?.stop(), 0);
  assert.equal(await redisServer?.stop(), 0);
  assert.equal(await redisCluster?.stop(), 0);
});

const freshDatabase = () => createDatabase(pgServer.url, `js${++dbSeq}`);

const keep = (g) => { open.push(g); return g; };

// broken: true (raise after the write) or 'noWait' (a raise that does not
// wait for the writes in flight).
const memory = (broken, { exclusive = false } = {}) => ({
  create: async (opts) => ({ gate: memoryGate(opts, { brokenRaiseAfter: broken === true, brokenNoWait: broken === 'noWait', exclusive }), addr: '' }),
  failedWrite: 'keepsFloor', capped: true, inside: true, shared: !exclusive,
});

// broken: true (the write outside the transaction) or 'noWait' (a raise
// that takes the share statement: it neither waits nor raises).
const sql = (broken, { exclusive = false } = {}) => ({
  create: async () => {
    const url = await freshDatabase();
    const rewrite = broken === 'noWait' ? (text) => text.replace('AND fence = $2 FOR SHARE', 'AND fence <= $2 FOR SHARE') : undefined;
    const g = keep(await sqlGate(url, { exclusive, rewrite }));
    if (broken === true) {
      // The deliberate break: a write that commits on its own connection
      // instead of the gate's transaction (fenced in name only).
      const commit = g.commit;
      g.commit = async (token, w) => {
        if (w.nil || w.fail || w.inside) return commit(token, w);
        await g.pool.query('INSERT INTO gatetest_values (resource, value) VALUES ($1, $2)', [token.resource, w.value]);
        return commit(token, { ...w, value: `${w.value}-ghost` }).then(() => g.pool.query(`DELETE FROM gatetest_values WHERE value = $1`, [`${w.value}-ghost`]));
      };
    }
    return { gate: g, addr: url };
  },
  kind: broken || exclusive ? undefined : 'sql', failedWrite: 'rollsBack', capped: false, inside: true, paged: true,
  // Writes with the floor's fence share the floor row; a write with the
  // old fence that arrives after a raise queues behind it on the advisory
  // lock. exclusive: one at a time, and writers waiting for the row's lock
  // are woken in any order.
  shared: !exclusive, unordered: exclusive,
  // The server stopped as a crash would (pg_ctl stop -m immediate) and
  // started again; the pools' old connections break and are replaced.
  restart: broken || exclusive ? undefined : () => pgServer.restart(),
});

const redis = (broken) => ({
  create: async (opts) => {
    const addr = `${redisServer.url} js${++nsSeq}-`;
    const g = keep(await redisGate(addr, opts));
    if (broken) {
      // The deliberate break: the write sent as plain commands after the
      // script (check, then act: a stale write lands, a refusal still writes).
      const commit = g.commit;
      g.commit = async (token, w) => {
        if (w.nil || w.fail) return commit(token, w);
        await g.client.rPush(`{${token.resource}}:${addr.split(' ')[1]}values`, w.value);
        return g.store.admit(token);
      };
    }
    return { gate: g, addr };
  },
  kind: broken ? undefined : 'redis', failedWrite: 'keepsFloor', capped: true, inside: false, paged: true,
  restart: broken ? undefined : () => redisServer.restart(),
});

describe('FenceGate', () => runConformance('FenceGate', memory(false)));
describe('FenceGate exclusive', () => runConformance('FenceGate (exclusive)', memory(false, { exclusive: true })));
describe('lease-fence/sql', () => runConformance('lease-fence/sql', sql(false)));
describe('lease-fence/sql exclusive', () => runConformance('lease-fence/sql (exclusive)', sql(false, { exclusive: true })));
describe('lease-fence/redis', () => runConformance('lease-fence/redis', redis(false)));

// The same on a Redis Cluster of three masters (the redis package's
// createCluster routes each script by its first key).
describe('lease-fence/redis on Redis Cluster', () => runConformance('lease-fence/redis (cluster)', {
  create: async (opts) => {
    const addr = `${redisCluster.url} jsc${++nsSeq}-`;
    return { gate: keep(await redisGate(addr, opts)), addr };
  },
  kind: 'redis', failedWrite: 'keepsFloor', capped: true, inside: false, paged: true,
}));

describe('the suite catches a broken gate', () => {
  test('FenceGate raising the floor after the write', async () => {
    const got = await failures(memory(true));
    for (const rule of ['floorRaisedBeforeWrite', 'failedWrite']) assert.ok(got[rule], `${rule} caught it: ${JSON.stringify(got)}`);
    assert.deepEqual(await failures(memory(false)), {});
  });
  for (const [title, broken, rule] of [
    ['FenceGate with a raise that does not wait', memory('noWait'), 'raiseWaitsForEqualWrites'],
    ['lease-fence/sql with the write outside the transaction', sql(true), 'lowerFenceRefused'],
    ['lease-fence/sql with a raise that does not wait', sql('noWait'), 'raiseWaitsForEqualWrites'],
    ['lease-fence/redis with the write outside the script', redis(true), 'lowerFenceRefused'],
  ]) {
    test(title, async () => {
      const got = await failures(broken);
      assert.ok(got[rule], `${rule} caught it: ${JSON.stringify(got)}`);
    });
  }
});
