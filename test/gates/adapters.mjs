// Adapters from the gates to the conformance suite's gate: the suite's
// values go into the store the gate guards (an array beside a FenceGate, a
// table in the same database, a list in the resource's hash slot), written
// by the gate's own kind of write.
import pg from 'pg';
import { createClient, createCluster } from 'redis';
import { FenceGate } from 'lease-fence';
import { openSqlFence } from 'lease-fence/sql';
import { openRedisFence, redisKey } from 'lease-fence/redis';

// opts: the options a suite write asks the gate's commit to get.
const opts = (w) => w.options ?? (w.signal ? { signal: w.signal } : undefined);

/** A FenceGate per resource, made on first use; writes through commitAsync. */
export function memoryGate({ maxRejections } = {}, { brokenRaiseAfter = false } = {}) {
  const gates = new Map();
  const values = new Map();
  const gate = (r) => {
    if (!gates.has(r)) {
      let g;
      try {
        g = new FenceGate(r, { maxRejections });
      } catch {
        // Not a resource a gate can have: a gate of another resource
        // refuses the token for what is wrong with it.
        return new FenceGate('probe');
      }
      gates.set(r, g);
    }
    return gates.get(r);
  };
  return {
    async commit(token, w) {
      const g = gate(token?.resource);
      const fn = w.nil ? null : async () => {
        values.set(token.resource, [...(values.get(token.resource) ?? []), w.value]);
        await w.inside?.();
        if (w.fail) throw new Error('the write failed after its first half');
      };
      if (brokenRaiseAfter && fn) {
        // The deliberate break: check, write, then raise (check-then-act).
        if (!g.wouldAdmit?.(token) && token.fence < g.floor) return g.admit(token);
        await fn();
        return g.admit(token);
      }
      return g.commitAsync(token, fn, opts(w));
    },
    async admit(token) { return gate(token?.resource).admit(token); },
    async floor(r) { return gate(r).floor; },
    async rejections(r) { return gate(r).rejections; },
    async values(r) { return [...(values.get(r) ?? [])]; },
    async close() {},
  };
}

/** lease-fence/sql on the database at url; values in gatetest_values. */
export async function sqlGate(url) {
  const pool = new pg.Pool({ connectionString: url, max: 4 });
  const store = await openSqlFence(pool, { dialect: 'postgres', table: 'lease_fence' });
  await pool.query('CREATE TABLE IF NOT EXISTS gatetest_values (id BIGSERIAL PRIMARY KEY, resource TEXT NOT NULL, value TEXT NOT NULL)')
    .catch((err) => { if (err.code !== '23505') throw err; });
  return {
    store, pool,
    commit(token, w) {
      if (w.nil) return store.commit(token, null);
      return store.commit(token, async (client) => {
        await client.query('INSERT INTO gatetest_values (resource, value) VALUES ($1, $2)', [token.resource, w.value]);
        await w.inside?.();
        if (w.fail) throw new Error('the write failed after its INSERT');
      }, opts(w));
    },
    admit: (t) => store.admit(t),
    floor: (r) => store.floor(r),
    rejections: (r) => store.rejections(r),
    async values(r) {
      const { rows } = await pool.query('SELECT value FROM gatetest_values WHERE resource = $1 ORDER BY id', [r]);
      return rows.map((x) => x.value);
    },
    close: () => pool.end(),
  };
}

/**
 * lease-fence/redis at "url prefix" (a cluster: "url,url,... prefix");
 * values in a list in the resource's slot.
 */
export async function redisGate(addr, { maxRejections } = {}) {
  const [url, ns] = addr.split(' ');
  const client = url.includes(',')
    ? createCluster({ rootNodes: url.split(',').map((u) => ({ url: u })), defaults: { RESP: 2 } })
    : createClient({ url, RESP: 2 });
  client.on('error', () => {}); // reconnects after a restart
  await client.connect();
  const store = openRedisFence(client, { prefix: ns, maxRejections });
  const key = (r) => redisKey(r, `${ns}values`);
  return {
    store, client, key,
    commit(token, w) {
      if (w.nil) return store.commit(token, { keys: [], commands: [] });
      let k = 'x'; // a token the gate will refuse needs no real key
      try { k = key(token.resource); } catch { /* refused below */ }
      const commands = [['RPUSH', k, w.value]];
      if (w.fail) commands.push(['INCR', k]);
      return store.commit(token, { keys: [k], commands }, opts(w));
    },
    admit: (t) => store.admit(t),
    floor: (r) => store.floor(r),
    rejections: (r) => store.rejections(r),
    values: (r) => client.lRange(key(r), 0, -1),
    close: () => (client.close ?? client.quit).call(client),
  };
}

/** Another handle on the store at addr, for writer processes. */
export async function attach(kind, addr) {
  if (kind === 'sql') return sqlGate(addr);
  if (kind === 'redis') return redisGate(addr);
  throw new Error(`unknown kind ${kind}`);
}
