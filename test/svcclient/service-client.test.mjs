// LeaseServiceClient (lease-fence/service-client) against the real
// coordinators: the native server (COORDINATOR, out/bin/coordinator by
// default) and the Worker under `wrangler dev` (started once, offline, on a
// free port, its state in a temporary directory). Every call goes through a
// small recording proxy on 127.0.0.1, which can drop, hold, rewrite or answer
// a request, so retries, timeouts and aborts happen for real. The proxy also
// collects every secret that crosses it; the last test checks that none of
// them appears in an error, a printed object or a log line of either
// coordinator.
//
// Run by `make test-svcclient`, which builds the wasm, the coordinator, the
// Worker, and the TypeScript in this folder (using.ts, compiled into
// out/test/svcclient) first.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import util from 'node:util';
import { FenceGate, InvalidArgumentError, LeaseClient, LeaseFenceError, createManualClock } from 'lease-fence';
import {
  LeaseDeniedError,
  LeaseExpiredError,
  LeaseServiceError,
  ServiceLease,
} from 'lease-fence/service-client';
import { LeaseServiceClient as PackageClient } from 'lease-fence/service-client';
import { LeaseServiceClient } from './transport.mjs';
import { root, startCoordinator, startWorker, stop } from './children.mjs';
import { TARGETS, resourceNames, startProxy as startHarnessProxy } from './harness.mjs';


// Everything secret that crossed a proxy, every error a test caught, every
// object printed: checked together by the last test.
const secrets = new Set();
const caught = [];
const printed = [];

function keep(e) {
  caught.push(e);
  return e;
}

async function rejects(promise, check) {
  let err;
  try {
    await promise;
  } catch (e) {
    err = keep(e);
  }
  assert.ok(err !== undefined, 'expected a rejection');
  if (check) check(err);
  return err;
}

// ---------------------------------------------------------------- processes

const children = [];

async function nativeTarget() {
  const { url, log, child } = await startCoordinator(['-memory'], children);
  return { name: 'native coordinator', url, log, child };
}

async function workerTarget() {
  const { url, log, child } = await startWorker(['--var', 'LEASE_TTL_MS:600000'], children);
  return { name: 'Worker under wrangler dev', url, log, child };
}

// ---------------------------------------------------------------- the proxy

// Answers that carried a secret: none may (the coordinator keeps a hash).
const answeredSecrets = [];

function noteSecrets(text, answer = false) {
  try {
    const v = JSON.parse(text);
    if (typeof v?.secret === 'string') secrets.add(v.secret);
    if (answer && (typeof v?.grant?.secret === 'string' || typeof v?.secret === 'string')) answeredSecrets.push(text);
  } catch {
    // not JSON
  }
}

const startProxy = (target) => startHarnessProxy(target, { onBody: noteSecrets });

// ---------------------------------------------------------------- set-up

const targets = {};
let usingTs;

before(async () => {
  const started = await Promise.all(TARGETS.map((kind) => (kind === 'native' ? nativeTarget() : workerTarget())));
  for (const [i, t] of started.entries()) {
    t.proxy = await startProxy(t.url);
    targets[TARGETS[i]] = t;
  }
  const compiled = path.join(root, 'out/test/svcclient/using.js');
  assert.ok(existsSync(compiled), 'using.ts is not compiled: run tsc -p test/svcclient/tsconfig.json');
  usingTs = await import(pathToFileURL(compiled).href);
});

after(async () => {
  for (const t of Object.values(targets)) await t.proxy.close();
  await Promise.all(children.map(stop));
});

const resourceName = resourceNames('svcclient');

/** A client through target's proxy; retries at once, attempts wait long. */
function client(t, holderId, options = {}) {
  return new LeaseServiceClient({ baseURL: t.proxy.url, holderId, backoff: () => 0, attemptTimeoutMillis: 30_000, ...options });
}

/** A client straight to target, for the other holders of a scenario. */
function direct(t, holderId) {
  return new LeaseServiceClient({ baseURL: t.url, holderId, backoff: () => 0, attemptTimeoutMillis: 30_000 });
}

/** The secret the client bound at the acquisition of lease, as seen on the wire. */
function wireSecret(t, lease) {
  for (const e of t.proxy.on('/v1/acquire')) {
    if (e.json.requestId === lease.grant.requestId && typeof e.json.secret === 'string') return e.json.secret;
  }
  throw new Error('acquisition with a secret not seen');
}

/** Asserts that resource's next fence is fence + 1: exactly one fence was issued for what came before. */
async function nextFenceIs(t, resource, fence) {
  const other = direct(t, 'checker');
  const l = await other.acquire(resource);
  assert.equal(l.token.fence, fence + 1, 'exactly one fence issued before');
  await other.release(l);
}

// ---------------------------------------------------------------- against both coordinators

// reset returns target with its proxy reset: no policy, nothing seen.
const reset = (target) => (target.proxy.reset(), target);

for (const which of TARGETS) {
  describe(which === 'native' ? 'native coordinator' : 'Worker under wrangler dev', () => {
    const t = () => targets[which];

    test('acquire, renew, release; denied; the deadline anchored at the first send', async () => {
      const T = reset(t());
      const clock = createManualClock(`agent-a-${which}`, { start: 1000 });
      const a = new LeaseServiceClient({ baseURL: T.proxy.url, holderId: 'agent-a', clock, clockSkewMillis: 10, backoff: () => 0 });
      const b = client(T, 'agent-b');
      const r = resourceName('basic');
      const lease = await a.acquire(r);
      printed.push(lease, a);
      assert.ok(lease instanceof ServiceLease);
      assert.deepEqual({ ...lease.token }, { resource: r, holderId: 'agent-a', fence: lease.token.fence });
      assert.ok(lease.token.fence >= 1);
      assert.equal(lease.deadline.domain, `agent-a-${which}`);
      assert.equal(lease.deadline.millis, 1000 + lease.grant.ttlMillis - 10);
      assert.equal(lease.grant.secret, undefined);
      assert.ok(!('secret' in JSON.parse(T.proxy.on('/v1/acquire')[0].reply).grant), 'the coordinator sends no secret back');

      await rejects(b.acquire(r), (e) => {
        assert.ok(e instanceof LeaseDeniedError && e instanceof LeaseFenceError);
        assert.equal(e.code, 'denied');
        assert.equal(e.heldBy, 'agent-a');
        assert.equal(e.resource, r);
        assert.ok(e.retryAfterMillis > 0);
      });
      // Its own holder is denied a second lease too.
      await rejects(a.acquire(r), (e) => assert.ok(e instanceof LeaseDeniedError && e.heldBy === 'agent-a'));

      clock.advance(500);
      const renewed = await a.renew(lease);
      assert.equal(renewed.token.fence, lease.token.fence);
      assert.equal(renewed.deadline.millis, 1500 + renewed.grant.ttlMillis - 10);
      await a.release(renewed);
      // Both objects are of the ended lease now: nothing more is sent.
      const before = T.proxy.seen.length;
      await rejects(a.renew(lease), (e) => assert.ok(e instanceof LeaseExpiredError));
      await rejects(a.release(renewed), (e) => assert.ok(e instanceof LeaseExpiredError));
      await lease[Symbol.asyncDispose]();
      assert.equal(T.proxy.seen.length, before);
      await nextFenceIs(T, r, lease.token.fence);

      // One body per call, the secret in renew and release only as the
      // protocol says.
      const [acq] = T.proxy.on('/v1/acquire');
      assert.equal(acq.json.kind, 'acquire');
      assert.equal(acq.json.holderId, 'agent-a');
      assert.deepEqual(acq.json.sentAt, { millis: 1000, domain: `agent-a-${which}` });
      const [ren] = T.proxy.on('/v1/renew');
      const [rel] = T.proxy.on('/v1/release');
      assert.equal(ren.json.secret, wireSecret(T, lease));
      assert.equal(rel.json.secret, wireSecret(T, lease));
      assert.equal(rel.json.fence, lease.token.fence);
      assert.notEqual(rel.json.requestId, acq.json.requestId);
    });

    test('a dropped reply: the retry sends the same body and gets the same grant, one fence issued', async () => {
      const T = reset(t());
      // The holder's clock moves on while the first answer is lost: the
      // deadline stays anchored at the first send.
      const clock = createManualClock(`dropped-${which}`, { start: 100 });
      const a = client(T, 'agent-a', { clock });
      const r = resourceName('dropped');
      T.proxy.policy = (e) => {
        if (e.n !== 1) return undefined;
        clock.advance(700);
        return { drop: true };
      };
      const lease = await a.acquire(r);
      assert.equal(lease.deadline.millis, 100 + lease.grant.ttlMillis);
      const sent = T.proxy.on('/v1/acquire');
      assert.equal(sent.length, 2);
      assert.equal(sent[1].body, sent[0].body, 'the retry repeats the body byte for byte');
      assert.equal(sent[0].status, 200, 'the first attempt reached the coordinator');
      const first = JSON.parse(sent[0].reply).grant;
      assert.equal(first.fence, lease.token.fence, 'the retry got the grant the lost reply carried');
      assert.equal(first.requestId, lease.grant.requestId);
      // A dropped renewal reply and a dropped release reply: retried, and the
      // release's retry is answered ok.
      T.proxy.reset();
      T.proxy.policy = (e) => {
        if (e.n !== 1 && e.n !== 3) return undefined;
        clock.advance(700);
        return { drop: true };
      };
      const renewed = await a.renew(lease);
      assert.equal(renewed.token.fence, lease.token.fence);
      assert.equal(renewed.deadline.millis, 800 + renewed.grant.ttlMillis, "anchored at the renewal's first send");
      await a.release(renewed);
      const ren = T.proxy.on('/v1/renew');
      const rel = T.proxy.on('/v1/release');
      assert.equal(ren.length, 2);
      assert.equal(ren[1].body, ren[0].body);
      assert.equal(rel.length, 2);
      assert.equal(rel[1].body, rel[0].body);
      assert.equal(JSON.parse(rel[0].reply).ok, true, 'the first release ended the lease');
      assert.equal(JSON.parse(rel[1].reply).ok, true, 'and its retry was answered ok');
      await nextFenceIs(T, r, lease.token.fence);
    });

    test('concurrent calls on one client, every other first answer lost: each gets its own grant once', async () => {
      const T = reset(t());
      const a = client(T, 'agent-a');
      const rs = Array.from({ length: 8 }, () => resourceName('concurrent'));
      const firsts = new Set();
      T.proxy.policy = (e) => {
        // The first attempt of every other request id is dropped.
        const id = e.json.requestId;
        if (firsts.has(id) || rs.indexOf(e.json.resource) % 2 === 1) return undefined;
        firsts.add(id);
        return { drop: true };
      };
      const leases = await Promise.all(rs.map((r) => a.acquire(r)));
      for (const [i, l] of leases.entries()) {
        assert.equal(l.token.resource, rs[i]);
        const sent = T.proxy.on('/v1/acquire').filter((e) => e.json.resource === rs[i]);
        assert.equal(sent.length, i % 2 === 0 ? 2 : 1);
        for (const e of sent) assert.equal(JSON.parse(e.reply).grant.fence, l.token.fence, 'one grant per acquisition');
      }
      await Promise.all(leases.map((l) => a.release(l)));
      const again = await Promise.all(rs.map((r) => a.acquire(r)));
      for (const [i, l] of again.entries()) assert.ok(l.token.fence > leases[i].token.fence);
      await Promise.all(again.map((l) => l.dispose()));
      assert.equal(T.proxy.on('/v1/release').length, 2 * (8 + 4), 'every other release retried once, in both rounds');
    });

    test('an attempt that times out is retried with the same body and request id', async () => {
      const T = reset(t());
      const a = client(T, 'agent-a', { attemptTimeoutMillis: 1500, attempts: 10 });
      const r = resourceName('attempt-timeout');
      // The first attempt reaches the coordinator; its answer never comes back.
      T.proxy.policy = (e) => (e.n === 1 ? { holdReply: true } : undefined);
      const lease = await a.acquire(r);
      const sent = T.proxy.on('/v1/acquire');
      assert.ok(sent.length >= 2);
      for (const e of sent) assert.equal(e.body, sent[0].body);
      await a.release(lease);
      await nextFenceIs(T, r, lease.token.fence);
    });

    test('a retried release answers ok even after someone else held and released the resource', async () => {
      const T = reset(t());
      const a = client(T, 'agent-a');
      const r = resourceName('release-idempotent');
      const lease = await a.acquire(r);
      const b = direct(T, 'agent-b');
      T.proxy.policy = (e) => {
        if (e.path !== '/v1/release') return undefined;
        if (e.n === 2) return { drop: true };
        // Between the lost answer and the retry, agent-b holds and releases r.
        return { before: async () => b.release(await b.acquire(r)) };
      };
      await a.release(lease);
      const rel = T.proxy.on('/v1/release');
      assert.equal(rel.length, 2);
      assert.equal(rel[1].body, rel[0].body);
      assert.equal(JSON.parse(rel[1].reply).ok, true);
      await nextFenceIs(T, r, lease.token.fence + 1);
    });

    test('a wrong secret is refused with wrong_secret, not retried, and changes nothing', async () => {
      const T = reset(t());
      const a = client(T, 'agent-a');
      const r = resourceName('wrong-secret');
      const lease = await a.acquire(r);
      const forged = 'A'.repeat(43);
      T.proxy.policy = (e) => ({ rewrite: (json) => ({ ...json, secret: forged }) });
      for (const call of [() => a.renew(lease), () => a.release(lease)]) {
        const n = T.proxy.seen.length;
        await rejects(call(), (e) => {
          assert.ok(e instanceof LeaseServiceError);
          assert.equal(e.code, 'wrong_secret');
          assert.equal(e.status, 403);
          assert.equal(e.attempts, 1);
          assert.equal(e.retryable, false);
        });
        assert.equal(T.proxy.seen.length, n + 1, 'a 4xx is final');
      }
      T.proxy.policy = null;
      const renewed = await a.renew(lease);
      assert.equal(renewed.token.fence, lease.token.fence);

      // A replayed acquisition (its request id is in the coordinator's log)
      // with another secret gets nothing usable.
      const [acq] = T.proxy.on('/v1/acquire');
      const replay = await fetch(`${T.url}/v1/acquire`, {
        method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ ...acq.json, secret: forged }),
      });
      const text = await replay.text();
      assert.equal(replay.status, 403);
      assert.equal(JSON.parse(text).error.code, 'wrong_secret');
      assert.ok(!text.includes(wireSecret(T, lease)));
      assert.ok(!/"fence"|"grant"/.test(text), `nothing usable in ${text}`);
      // With the right secret it is the grant it already made, without the secret.
      const again = await fetch(`${T.url}/v1/acquire`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: acq.body });
      const g = await again.json();
      assert.equal(g.ok, true);
      assert.equal(g.grant.fence, lease.token.fence);
      assert.equal(g.grant.secret, undefined);
      await a.release(renewed);
      await nextFenceIs(T, r, lease.token.fence);
    });

    test('a lease the coordinator ended is LeaseExpiredError on renew; dispose then sends nothing', async () => {
      const T = reset(t());
      const a = client(T, 'agent-a');
      const r = resourceName('expired');
      const lease = await a.acquire(r);
      // Someone with the secret releases it behind the client's back.
      const res = await fetch(`${T.url}/v1/release`, {
        method: 'POST', headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ requestId: 'e'.repeat(32), resource: r, holderId: 'agent-a', fence: lease.token.fence, secret: wireSecret(T, lease) }),
      });
      assert.deepEqual(await res.json(), { ok: true });
      await rejects(a.renew(lease), (e) => {
        assert.ok(e instanceof LeaseExpiredError);
        assert.equal(e.code, 'expired');
        assert.equal(e.resource, r);
        assert.equal(e.fence, lease.token.fence);
      });
      const n = T.proxy.seen.length;
      await lease[Symbol.asyncDispose]();
      assert.equal(T.proxy.seen.length, n);
    });

    test('await using (TypeScript-compiled) releases on the way out, by return and by throw', async () => {
      const T = reset(t());
      const a = client(T, 'agent-a');
      const r = resourceName('using');
      const gate = new FenceGate(r);
      const token = await usingTs.holdAndWrite(a, r, gate);
      assert.equal(gate.floor, token.fence);
      assert.equal(T.proxy.on('/v1/release').length, 1);
      const thrownToken = await usingTs.holdAndThrow(a, r);
      assert.equal(thrownToken.fence, token.fence + 1, 'the first lease was released, so the resource was free');
      assert.equal(T.proxy.on('/v1/release').length, 2);
      await nextFenceIs(T, r, thrownToken.fence);
      assert.equal(usingTs.classify(new LeaseServiceError('x', { code: 'unavailable', status: 503 })), 'service:unavailable:503:true');
    });

    test('a per-call timeout ends the call with code timeout', async () => {
      const T = reset(t());
      const a = client(T, 'agent-a');
      T.proxy.policy = () => ({ hold: true });
      await rejects(a.acquire(resourceName('timeout'), { timeoutMillis: 300 }), (e) => {
        assert.ok(e instanceof LeaseServiceError);
        assert.equal(e.code, 'timeout');
        assert.equal(e.status, 0);
        assert.equal(e.retryable, true);
      });
      assert.equal(T.proxy.seen.length, 1);
    });

    test('an AbortSignal ends the call at once, with its reason, in flight and in a backoff pause', async () => {
      const T = reset(t());
      const ac2 = new AbortController();
      const why = new Error('shutting down');
      // The pause before a retry would be ten minutes; the signal ends it
      // as soon as it begins.
      const a = client(T, 'agent-a', {
        backoff: () => {
          queueMicrotask(() => ac2.abort(why));
          return 600_000;
        },
      });
      const r = resourceName('abort');
      // In flight: the request is held and the caller gives up.
      const ac = new AbortController();
      T.proxy.policy = () => {
        ac.abort();
        return { hold: true };
      };
      await rejects(a.acquire(r, { signal: ac.signal }), (e) => {
        assert.equal(e, ac.signal.reason);
        assert.equal(e.name, 'AbortError');
      });
      assert.equal(T.proxy.seen.length, 1);
      // During the pause before a retry.
      T.proxy.policy = () => ({ answer: { status: 503, body: { error: { code: 'unavailable', message: 'try again' } } } });
      await rejects(a.acquire(r, { signal: ac2.signal }), (e) => assert.equal(e, why));
      assert.equal(T.proxy.seen.length, 2);
      // Already aborted: nothing is sent.
      await rejects(a.acquire(r, { signal: AbortSignal.abort() }), (e) => assert.equal(e.name, 'AbortError'));
      assert.equal(T.proxy.seen.length, 2);
    });
  });
}

// ---------------------------------------------------------------- the client's retry rules

describe('retry rules', () => {
  const t = () => targets.native;
  const unavailable = { status: 503, body: { error: { code: 'unavailable', message: 'the state could not be stored' } } };

  test('a 5xx is retried with the same body; then the answer', async () => {
    const T = reset(t());
    const a = client(T, 'agent-a');
    T.proxy.policy = (e) => (e.n < 3 ? { answer: unavailable } : undefined);
    const lease = await a.acquire(resourceName('5xx'));
    assert.equal(T.proxy.seen.length, 3);
    assert.equal(new Set(T.proxy.seen.map((e) => e.body)).size, 1);
    await a.release(lease);
  });

  test('too_many_leases is final: one attempt, retryable later', async () => {
    const T = reset(t());
    const a = client(T, 'agent-a');
    T.proxy.policy = () => ({ answer: { status: 503, body: { error: { code: 'too_many_leases', message: 'full' } } } });
    await rejects(a.acquire(resourceName('full')), (e) => {
      assert.ok(e instanceof LeaseServiceError);
      assert.equal(e.code, 'too_many_leases');
      assert.equal(e.status, 503);
      assert.equal(e.attempts, 1);
      assert.equal(e.retryable, true);
    });
    assert.equal(T.proxy.seen.length, 1);
  });

  test('a 4xx is final, with the service code and message', async () => {
    const T = reset(t());
    const a = client(T, 'agent-a');
    T.proxy.policy = () => ({ rewrite: (json) => ({ ...json, extra: 1 }) });
    await rejects(a.acquire(resourceName('4xx')), (e) => {
      assert.equal(e.code, 'unknown_field');
      assert.equal(e.status, 400);
      assert.equal(e.attempts, 1);
      assert.match(e.message, /unknown_field \(400\)/);
    });
    assert.equal(T.proxy.seen.length, 1);
  });

  test('a redirect is not followed: the body (and its secret) goes nowhere else', async () => {
    const T = reset(t());
    const a = client(T, 'agent-a');
    const lease = await a.acquire(resourceName('redirect'));
    const elsewhere = await startProxy(T.url);
    try {
      T.proxy.policy = () => ({ answer: { status: 307, body: '', headers: { location: `${elsewhere.url}/v1/release` } } });
      await rejects(a.release(lease), (e) => {
        assert.ok(e instanceof LeaseServiceError);
        assert.equal(e.code, 'http_307');
        assert.equal(e.attempts, 1);
      });
      assert.equal(elsewhere.seen.length, 0);
    } finally {
      await elsewhere.close();
    }
    T.proxy.policy = null;
    await a.release(lease);
  });

  test('attempts are bounded: the last failure, or no_answer with the cause', async () => {
    const T = reset(t());
    const a = client(T, 'agent-a', { attempts: 3 });
    T.proxy.policy = () => ({ answer: { status: 502, body: 'Bad Gateway' } });
    await rejects(a.acquire(resourceName('bounded')), (e) => {
      assert.equal(e.code, 'http_502');
      assert.equal(e.attempts, 3);
    });
    assert.equal(T.proxy.seen.length, 3);
    T.proxy.reset();
    T.proxy.policy = (e) => ({ answer: { status: 200, body: e.n === 1 ? '{"ok": true}' : 'not json' } });
    await rejects(a.acquire(resourceName('garbage')), (e) => {
      assert.equal(e.code, 'bad_reply');
      assert.equal(e.attempts, 3);
    });
    T.proxy.reset();
    const refused = new LeaseServiceClient({ baseURL: 'http://127.0.0.1:1', holderId: 'agent-a', attempts: 2, backoff: () => 0 });
    await rejects(refused.acquire(resourceName('refused')), (e) => {
      assert.equal(e.code, 'no_answer');
      assert.equal(e.status, 0);
      assert.equal(e.attempts, 2);
      assert.ok(e.cause instanceof Error);
      assert.match(e.message, /got no answer after 2 attempts: .*(ECONNREFUSED|bad port)/);
    });
  });

  test('on Node, calls go over node:http unless fetch is asked for, kept alive', async () => {
    const T = reset(t());
    // The package's class itself: no transport chosen for it by the suite.
    for (const [options, overFetch] of [[{}, false], [{ transport: 'auto' }, false], [{ transport: 'node' }, false], [{ transport: 'fetch' }, true],
      [{ agent: new http.Agent({ keepAlive: true }) }, false], [{ fetch: (url, init) => fetch(url, init) }, true]]) {
      const c = new PackageClient({ baseURL: T.proxy.url, holderId: 'agent-t', ...options });
      await c.inspect(resourceName('transport'));
      await c.inspect(resourceName('transport'));
      const seen = T.proxy.seen.splice(0);
      assert.equal(seen.length, 2, util.inspect(options));
      for (const e of seen) {
        // undici's fetch sends the headers of the fetch standard; node:http sends none of them.
        assert.equal('sec-fetch-mode' in e.headers, overFetch, `${util.inspect(options)}: ${util.inspect(e.headers)}`);
        assert.equal(e.headers.connection, 'keep-alive');
      }
    }
  });

  test('bad arguments are InvalidArgumentError and send nothing', async () => {
    const T = reset(t());
    const bad = [
      undefined, null, {}, { baseURL: 'ftp://x', holderId: 'a' }, { baseURL: 'not a url', holderId: 'a' },
      { baseURL: T.proxy.url }, { baseURL: T.proxy.url, holderId: 7 }, { baseURL: T.proxy.url, holderId: 'a', attempts: 0 },
      { baseURL: T.proxy.url, holderId: 'a', attempts: 1.5 }, { baseURL: T.proxy.url, holderId: 'a', attemptTimeoutMillis: -1 },
      { baseURL: T.proxy.url, holderId: 'a', timeoutMillis: NaN }, { baseURL: T.proxy.url, holderId: 'a', backoff: 5 },
      { baseURL: T.proxy.url, holderId: 'a', fetch: 'no' },
      { baseURL: T.proxy.url, holderId: 'a', transport: 'undici' }, { baseURL: T.proxy.url, holderId: 'a', transport: 1n },
      { baseURL: T.proxy.url, holderId: 'a', fetch, transport: 'node' }, { baseURL: T.proxy.url, holderId: 'a', fetch, agent: new http.Agent() },
      { baseURL: T.proxy.url, holderId: 'a', transport: 'fetch', agent: new http.Agent() }, { baseURL: T.proxy.url, holderId: 'a', agent: 'keep-alive' },
      { baseURL: T.proxy.url, holderId: 'a', agent: { http: new https.Agent() } }, { baseURL: T.proxy.url, holderId: 'a', agent: { https: new http.Agent() } },
      { baseURL: T.proxy.url, holderId: 'a', agent: { ftp: new http.Agent() } },
      { baseURL: T.proxy.url, holderId: 'a', leaseClient: new LeaseClient({ clock: createManualClock('x'), holderId: 'a' }) },
      { baseURL: T.proxy.url, leaseClient: {} },
    ];
    for (const options of bad) {
      assert.throws(() => new LeaseServiceClient(options), InvalidArgumentError, util.inspect(options));
    }
    const a = client(T, 'agent-a');
    const other = client(T, 'agent-b');
    await rejects(a.acquire(''), (e) => assert.ok(e instanceof InvalidArgumentError));
    await rejects(a.acquire(42), (e) => assert.ok(e instanceof InvalidArgumentError));
    await rejects(a.acquire('r', { timeoutMillis: 0 }), (e) => assert.equal(e.argument, 'options.timeoutMillis'));
    await rejects(a.acquire('r', { signal: {} }), (e) => assert.equal(e.argument, 'options.signal'));
    await rejects(a.renew({ token: { resource: 'r', holderId: 'agent-a', fence: 1 } }), (e) => assert.equal(e.argument, 'lease'));
    assert.throws(() => new ServiceLease(), InvalidArgumentError);
    assert.equal(T.proxy.seen.length, 0);
    const lease = await a.acquire(resourceName('owner'));
    await rejects(other.release(lease), (e) => assert.equal(e.argument, 'lease'));
    await rejects(other.renew(lease), (e) => assert.equal(e.argument, 'lease'));
    // A client built on a LeaseClient uses it.
    const lc = new LeaseClient({ clock: createManualClock('lc', { start: 5 }), holderId: 'agent-c' });
    const c = new LeaseServiceClient({ baseURL: `${T.proxy.url}/`, leaseClient: lc, backoff: () => 0 });
    assert.equal(c.baseURL, T.proxy.url);
    assert.equal(c.holderId, 'agent-c');
    assert.equal(c.leaseClient, lc);
    const cl = await c.acquire(resourceName('lc'));
    assert.equal(cl.deadline.millis, 5 + cl.grant.ttlMillis);
    await c.release(cl);
    await a.release(lease);
  });

  test('error classes take (message, options) as the .d.ts says, cause included', () => {
    const cause = new Error('underneath');
    const [service, denied, expiredErr] = usingTs.made(cause);
    assert.deepEqual({ ...service, retryable: service.retryable }, { code: 'wrong_secret', status: 403, attempts: 1, retryable: false });
    assert.deepEqual({ ...denied }, { code: 'denied', resource: 'r', heldBy: 'b', retryAfterMillis: 5 });
    assert.deepEqual({ ...expiredErr }, { code: 'expired', resource: 'r', holderId: 'a', fence: 3, revoked: false });
    for (const [e, cls] of [[service, LeaseServiceError], [denied, LeaseDeniedError], [expiredErr, LeaseExpiredError]]) {
      assert.ok(e instanceof cls && e instanceof LeaseFenceError && e instanceof Error);
      assert.equal(e.name, cls.name);
      assert.equal(e.cause, cause);
      assert.equal('cause' in new cls('m'), false, 'no cause unless given');
    }
  });

  test('each acquisition binds a fresh 32-byte secret', async () => {
    const T = reset(t());
    const a = client(T, 'agent-a');
    const l1 = await a.acquire(resourceName('secret'));
    const l2 = await a.acquire(resourceName('secret'));
    const [s1, s2] = T.proxy.on('/v1/acquire').map((e) => e.json.secret);
    assert.match(s1, /^[A-Za-z0-9_-]{43}$/);
    assert.match(s2, /^[A-Za-z0-9_-]{43}$/);
    assert.notEqual(s1, s2);
    await a.release(l1);
    await a.release(l2);
  });
});

// ---------------------------------------------------------------- the secret stays in the client

test('no secret in any error, printed object or coordinator log line', async () => {
  assert.ok(secrets.size >= 10, `secrets seen: ${secrets.size}`);
  assert.ok(caught.length >= 20, `errors caught: ${caught.length}`);
  const texts = [];
  const describeError = (e) => {
    for (let x = e, depth = 0; x !== undefined && x !== null && depth < 10; x = x.cause, depth++) {
      texts.push(String(x), String(x?.message), String(x?.stack), JSON.stringify(x) ?? '');
    }
    texts.push(util.inspect(e, { showHidden: true, depth: Infinity }));
  };
  caught.forEach(describeError);
  for (const o of printed) {
    texts.push(String(o), JSON.stringify(o) ?? '', util.inspect(o, { showHidden: true, depth: Infinity, getters: true }));
  }
  for (const t of Object.values(targets)) texts.push(...t.log);
  const all = texts.join('\n');
  for (const s of secrets) assert.ok(!all.includes(s), 'a secret appears in an error, a printed object or a log line');
  assert.deepEqual(answeredSecrets, [], 'no answer carries a secret');
  // The logs were really collected: every call is a line.
  assert.ok(targets.native.log.some((l) => l.includes('op=acquire')), 'the coordinator logs calls');
});
