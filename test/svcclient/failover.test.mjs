// LeaseServiceClient with several coordinators (options.baseURLs): two
// native coordinators (COORDINATOR, out/bin/coordinator by default) over
// one PostgreSQL database (-store; the server from test/rig/pgtest's
// pgserver, in a temporary directory on a free port). An attempt that gets
// no answer or a 5xx moves the call to the next coordinator with the same
// body, so a retried acquisition gets the grant it already got, answered
// from the database by the other coordinator; a coordinator killed with
// SIGKILL is failed over. The client's fetch is wrapped to record every
// attempt (URL and body) and to inject a lost answer or a 503.
//
// Run by `make test-svcclient`.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { InvalidArgumentError } from 'lease-fence';
import { LeaseServiceError } from 'lease-fence/service-client';
import { LeaseServiceClient, send } from './transport.mjs';
import { startPostgres } from '../gates/servers.mjs';
import { startCoordinator } from './children.mjs';

const children = [];
let pg;

// startOnPostgres starts the native coordinator over the database and
// resolves with its URL and process.
function startOnPostgres(args) {
  return startCoordinator(['-quiet', '-ttl', '1h', '-store', pg.url, ...args], children);
}

function kill(child) {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  const done = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGKILL');
  return done;
}

// recording wraps fetch: every attempt's URL and body, and a fault to apply
// to the next attempts ('lost': the coordinator answers, the answer is
// lost; '503' or '400': answered for the coordinator; 'down': no
// connection).
function recording() {
  const rec = { attempts: [], faults: [] };
  rec.fetch = async (url, init) => {
    rec.attempts.push({ url, body: init.body });
    const fault = rec.faults.shift();
    if (fault === 'down') throw new TypeError('fetch failed (injected)');
    if (fault === '503' || fault === '400') {
      const code = fault === '503' ? 'unavailable' : 'invalid_value';
      return new Response(JSON.stringify({ error: { code, message: 'injected' } }), { status: Number(fault), headers: { 'content-type': 'application/json' } });
    }
    const res = await send(url, init);
    if (fault === 'lost') {
      await res.text();
      throw new TypeError('answer lost (injected)');
    }
    return res;
  };
  rec.take = () => rec.attempts.splice(0);
  return rec;
}

const noPause = () => 0;

describe('several coordinators (baseURLs)', () => {
  let a;
  let b;
  before(async () => {
    pg = await startPostgres();
    a = await startOnPostgres(['-init']);
    b = await startOnPostgres([]);
  });
  after(async () => {
    await Promise.all(children.map(kill));
    await pg?.stop();
  });

  test('a lost answer or a 503 moves the call on with the same body; one fence', async () => {
    const rec = recording();
    const client = new LeaseServiceClient({ baseURLs: [a.url, `${b.url}/`], holderId: 'agent-a', fetch: rec.fetch, backoff: noPause });
    assert.deepEqual(client.baseURLs, [a.url, b.url]);
    assert.equal(client.baseURL, a.url);
    rec.faults.push('lost', '503');
    const lease = await client.acquire('deploy');
    const tries = rec.take();
    assert.deepEqual(tries.map((t) => t.url), [`${a.url}/v1/acquire`, `${b.url}/v1/acquire`, `${a.url}/v1/acquire`]);
    assert.ok(tries.every((t) => t.body === tries[0].body), 'every attempt sends the same body');
    // The first attempt's grant, answered again from the database.
    const other = new LeaseServiceClient({ baseURLs: [b.url], holderId: 'agent-b' });
    await assert.rejects(other.acquire('deploy'), (e) => e.heldBy === 'agent-a');
    const renewed = await client.renew(lease);
    assert.equal(renewed.token.fence, lease.token.fence);
    assert.deepEqual(rec.take().map((t) => t.url), [`${a.url}/v1/renew`], 'a call starts where the last answer came from');
    await client.release(renewed);
  });

  test('a coordinator killed with SIGKILL is failed over; the lease lives on', async () => {
    const c = await startOnPostgres([]);
    const rec = recording();
    const client = new LeaseServiceClient({ baseURLs: [c.url, b.url], holderId: 'agent-c', fetch: rec.fetch, backoff: noPause });
    const lease = await client.acquire('killed');
    assert.deepEqual(rec.take().map((t) => t.url), [`${c.url}/v1/acquire`]);
    await kill(c.child);
    const renewed = await client.renew(lease);
    assert.equal(renewed.token.fence, lease.token.fence);
    assert.deepEqual(rec.take().map((t) => t.url), [`${c.url}/v1/renew`, `${b.url}/v1/renew`]);
    await client.release(renewed);
    assert.deepEqual(rec.take().map((t) => t.url), [`${b.url}/v1/release`]);
  });

  test('the backoff is only for a return to a coordinator already tried; a 4xx is final', async () => {
    const rec = recording();
    const pauses = [];
    const client = new LeaseServiceClient({
      baseURLs: [a.url, b.url], holderId: 'agent-d', fetch: rec.fetch, attempts: 4,
      backoff: (n) => {
        pauses.push(n);
        return 0;
      },
    });
    rec.faults.push('down', 'down', 'down', 'down');
    await assert.rejects(client.acquire('nowhere'), (e) => e instanceof LeaseServiceError && e.code === 'no_answer' && e.attempts === 4);
    assert.deepEqual(rec.take().map((t) => new URL(t.url).origin), [a.url, b.url, a.url, b.url]);
    assert.deepEqual(pauses, [2, 3]);
    // A 4xx is an answer: no other coordinator is asked.
    rec.faults.push('400');
    await assert.rejects(client.acquire('four'), (e) => e instanceof LeaseServiceError && e.code === 'invalid_value' && e.status === 400);
    assert.equal(rec.take().length, 1);
  });

  test('bad baseURLs are InvalidArgumentError', () => {
    for (const [options, arg] of [
      [{ baseURL: a.url, baseURLs: [b.url] }, 'options.baseURLs'],
      [{ baseURLs: [] }, 'options.baseURLs'],
      [{ baseURLs: a.url }, 'options.baseURLs'],
      [{ baseURLs: [a.url, 'ftp://x'] }, 'options.baseURLs[1]'],
      [{ baseURLs: [a.url, 7] }, 'options.baseURLs[1]'],
      [{ baseURLs: Array(65).fill(a.url) }, 'options.baseURLs'],
      [{}, 'options.baseURL'],
    ]) {
      assert.throws(() => new LeaseServiceClient({ holderId: 'x', ...options }), (e) => e instanceof InvalidArgumentError && e.argument === arg,
        JSON.stringify(options).slice(0, 80));
    }
  });
});
