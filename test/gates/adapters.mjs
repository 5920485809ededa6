// Adapters from the gates to the conformance suite's gate: the suite's
// values go into the store the gate guards (an array beside a FenceGate, a
// table in the same database, a list in the resource's hash slot), written
// by the gate's own kind of write.
import assert from 'node:assert/strict';
import pg from 'pg';
import { createClient, createCluster } from 'redis';
import { FenceGate, InvalidArgumentError } from 'lease-fence';
import { LEASE_FENCE_HEADER, leaseFenceHeader, staleFenceError } from 'lease-fence/service-client';
import { rejection, signalOf } from '../../wasm/js/gate-common.mjs';
import { openSqlFence } from 'lease-fence/sql';
import { openRedisFence, redisKey } from 'lease-fence/redis';

// opts: the options a suite write asks the gate's commit to get.
const opts = (w) => w.options ?? (w.signal ? { signal: w.signal } : undefined);

/**
 * A FenceGate per resource, made on first use; writes through commitAsync.
 * exclusive: the gates' option. brokenRaiseAfter and brokenNoWait are
 * deliberate breaks.
 */
export function memoryGate({ maxRejections } = {}, { brokenRaiseAfter = false, brokenNoWait = false, exclusive = false } = {}) {
  const gates = new Map();
  const values = new Map();
  const gate = (r) => {
    if (!gates.has(r)) {
      let g;
      try {
        g = new FenceGate(r, { maxRejections, exclusive });
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
      if (brokenNoWait && fn && token.fence > g.floor) {
        // The deliberate break: a raise that does not wait for the writes
        // in flight (admitted at once, then written).
        g.admit(token);
        return fn();
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

/**
 * lease-fence/sql on the database at url; values in gatetest_values.
 * options: { exclusive } for openSqlFence, and rewrite(text), when given,
 * changes the text of every statement the store sends (a deliberate break).
 * The pool's clients are in pg's pipeline mode (pipeline: true) unless
 * exclusive: the gate sends BEGIN and its check in one round trip.
 */
export async function sqlGate(url, { exclusive = false, rewrite, pipeline = !exclusive } = {}) {
  // Room for 8 writes in flight, a raise and a late write.
  const pool = new pg.Pool({ connectionString: url, max: 12, pipeline });
  pool.on('error', () => {}); // an idle connection a server restart ended
  const store = await openSqlFence(rewrite ? rewritten(pool, rewrite) : pool, { dialect: 'postgres', table: 'lease_fence', exclusive });
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
    rejectionsPage: (r, afterSeq, limit) => store.rejections(r, { afterSeq, limit }),
    async values(r) {
      const { rows } = await pool.query('SELECT value FROM gatetest_values WHERE resource = $1 ORDER BY id', [r]);
      return rows.map((x) => x.value);
    },
    close: () => pool.end(),
  };
}

// rewritten is pool as the store sees it, with rewrite applied to the text
// of each statement.
function rewritten(pool, rewrite) {
  // One wrapper per client, as the pool hands out one object per connection.
  const wrappers = new WeakMap();
  const wrap = (client) => wrappers.get(client) ?? wrappers.set(client, new Proxy(client, {
    get(target, k) {
      if (k === 'query') return (text, values) => target.query(typeof text === 'string' ? rewrite(text) : text, values);
      const v = Reflect.get(target, k);
      return typeof v === 'function' ? v.bind(target) : v;
    },
  })).get(client);
  return {
    connect: async () => wrap(await pool.connect()),
    query: (text, values) => pool.query(typeof text === 'string' ? rewrite(text) : text, values),
  };
}

/**
 * lease-fence/redis at "url prefix" (a cluster, with atMostOnce:
 * "url,url,... prefix"); values in a list in the resource's slot.
 */
export async function redisGate(addr, { maxRejections } = {}) {
  const [url, ns] = addr.split(' ');
  const client = url.includes(',')
    ? createCluster({ rootNodes: url.split(',').map((u) => ({ url: u })), defaults: { RESP: 2 } })
    : createClient({ url, RESP: 2 });
  client.on('error', () => {}); // reconnects after a restart
  await client.connect();
  // The cluster runs the suite with commit markers, the single server
  // without: both of the script's paths meet every rule.
  const store = openRedisFence(client, { prefix: ns, maxRejections, atMostOnce: url.includes(',') });
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
    rejectionsPage: (r, afterSeq, limit) => store.rejections(r, { afterSeq, limit }),
    values: (r) => client.lRange(key(r), 0, -1),
    close: () => (client.close ?? client.quit).call(client),
  };
}

const utf8 = new TextEncoder();
// A Lease-Fence value written without any check, so that the proxy, not
// the client, is what refuses a bad token (a 16-digit fence included).
function rawHeader(t) {
  const id = (v) => {
    const s = String(v);
    if (/^[\x20-\x7e]*$/.test(s)) return `"${s.replace(/["\\]/g, '\\$&')}"`;
    let out = '%"';
    for (const b of utf8.encode(s)) out += b < 0x20 || b > 0x7e || b === 0x25 || b === 0x22 ? `%${b.toString(16).padStart(2, '0')}` : String.fromCharCode(b);
    return `${out}"`;
  };
  const f = typeof t.fence === 'number' ? String(t.fence) : JSON.stringify(String(t.fence));
  return `resource=${id(t.resource)}, holder=${id(t.holderId)}, fence=${f}`;
}

/**
 * fence-proxy at "proxyURL upstreamURL ns" (the upstream of test/proxy: POST
 * /append?resource=r appends the body, X-Fail then answers 500, X-Inside
 * names a function it runs while it holds the request; GET /values lists):
 * a write is a POST through the proxy with leaseFenceHeader's header to
 * the list of ns + resource, read back from the upstream directly. A token
 * the helper refuses is also sent as it is, and the proxy must refuse it
 * (400) too. inside(fn) registers fn with the upstream and returns its key
 * (only the process that runs the upstream can).
 */
export function proxyGate(addr, { inside } = {}) {
  const [proxy, upstream, ns] = addr.split(' ');
  const json = async (res) => {
    if (!res.ok) throw new Error(`${res.status} ${await res.text()}`);
    return res.json();
  };
  // One page of GET /.lease-fence/rejections; a 400 (a bad after or limit)
  // is an InvalidArgumentError.
  const page = async (r, after, limit) => {
    const res = await fetch(`${proxy}/.lease-fence/rejections?resource=${encodeURIComponent(r)}&after=${after}${limit === undefined ? '' : `&limit=${limit}`}`);
    if (res.status === 400) throw new InvalidArgumentError(`fence-proxy: ${(await res.json()).error.message}`, 'limit');
    const { rejections, more } = await json(res);
    return { more, rejections: rejections.map((x) => rejection(x.seq, x.resource, x.refusedHolderId, x.refusedFence, x.admittedHolderId, x.admittedFence)) };
  };
  const send = async (path, token, init = {}) => {
    let header;
    try {
      header = leaseFenceHeader(token);
    } catch (err) {
      if (!(err instanceof InvalidArgumentError) || typeof token !== 'object' || token === null) throw err;
      const res = await fetch(`${proxy}${path}`, { method: 'POST', ...init, headers: { ...init.headers, [LEASE_FENCE_HEADER]: rawHeader(token) } });
      const code = res.headers.get('Lease-Fence-Error');
      await res.arrayBuffer();
      if (res.status !== 400 || code !== 'bad_fence_header') {
        throw new Error(`fence-proxy answered ${res.status} ${code} to a token the helper refuses (${err.message})`);
      }
      throw err;
    }
    const res = await fetch(`${proxy}${path}`, { method: 'POST', ...init, headers: { ...init.headers, [LEASE_FENCE_HEADER]: header } });
    const stale = await staleFenceError(res);
    if (stale) throw stale;
    if (!res.ok) throw new Error(`fence-proxy answered ${res.status}: ${await res.text()}`);
    await res.arrayBuffer();
  };
  return {
    async commit(token, w) {
      if (w.nil) {
        // An HTTP write is a request: with no request there is nothing to
        // send, and nothing to refuse but the call itself.
        throw new InvalidArgumentError('lease-fence: a write through fence-proxy needs a request', 'write');
      }
      // fetch's own signal: aborted before the request is sent, nothing
      // reaches the proxy.
      const signal = signalOf(opts(w), 'fence-proxy: commit');
      const headers = {};
      if (w.fail) headers['X-Fail'] = '1';
      if (w.inside) headers['X-Inside'] = inside(w.inside);
      return send(`/append?resource=${encodeURIComponent(ns + token?.resource)}`, token, { body: w.value, headers, signal });
    },
    admit: async (token) => send('/.lease-fence/admit', token),
    floor: async (r) => (await json(await fetch(`${proxy}/.lease-fence/floor?resource=${encodeURIComponent(r)}`))).floor,
    // Every refusal: a page after another until the proxy says no more.
    async rejections(r) {
      const all = [];
      for (let after = 0; ;) {
        const { rejections, more } = await page(r, after);
        all.push(...rejections);
        if (!more) return all;
        assert(rejections.length > 0, 'an empty page with more');
        after = rejections.at(-1).seq;
      }
    },
    rejectionsPage: async (r, afterSeq, limit) => (await page(r, afterSeq, limit)).rejections,
    values: async (r) => json(await fetch(`${upstream}/values?resource=${encodeURIComponent(ns + r)}`)),
    close: async () => {},
  };
}

/** Another handle on the store at addr, for writer processes. */
export async function attach(kind, addr) {
  if (kind === 'sql') return sqlGate(addr);
  if (kind === 'redis') return redisGate(addr);
  if (kind === 'proxy') return proxyGate(addr);
  throw new Error(`unknown kind ${kind}`);
}
