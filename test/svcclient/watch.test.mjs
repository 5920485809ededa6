// client.list, client.listPage and client.watch (issue #27) against the
// native coordinator: every page read; bad options refused before
// anything is sent; a watch whose connection is cut (by a proxy that
// forwards the event stream) resumes and yields every event once, in
// sequence, with no second hello; a watch of a stream the coordinator
// does not have starts with a hello that says it did not resume.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { InvalidArgumentError } from 'lease-fence';
import { LeaseServiceClient } from './transport.mjs';
import { startNative, stopAll } from './harness.mjs';

let native, proxy;
const cut = new Set(); // the proxy's open watch answers

before(async () => {
  native = await startNative();
  // A proxy that streams each answer as it comes, so that a test can cut
  // the connections of the watches going through it.
  const server = http.createServer(async (req, res) => {
    const chunks = [];
    for await (const c of req) chunks.push(c);
    const up = await fetch(native.url + req.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: Buffer.concat(chunks) });
    res.writeHead(up.status, { 'content-type': up.headers.get('content-type') });
    cut.add(res);
    res.on('close', () => cut.delete(res));
    try {
      for await (const chunk of up.body) res.write(chunk);
      res.end();
    } catch {
      res.destroy();
    }
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  proxy = { server, url: `http://127.0.0.1:${server.address().port}` };
});

after(async () => {
  for (const res of cut) res.destroy();
  proxy?.server.close();
  await stopAll();
});

test('list reads every page, in byte order; listPage pages', async () => {
  const c = new LeaseServiceClient({ baseURL: native.url, holderId: 'lister', backoff: () => 0 });
  const names = [];
  for (let i = 0; i < 25; i++) names.push(`ls/${String(i).padStart(2, '0')}`);
  for (const r of names) await c.acquire(r);
  await c.acquire('lt/outside');
  const all = [];
  for await (const l of c.list({ prefix: 'ls/', waiters: true })) all.push(l);
  assert.deepEqual(all.map((l) => l.resource), names);
  assert.ok(all.every((l) => l.holderId === 'lister' && l.fence > 0 && l.remainingMillis > 0 && l.waiters === 0));
  const first = await c.listPage({ prefix: 'ls/', limit: 10 });
  assert.equal(first.leases.length, 10);
  assert.equal(typeof first.cursor, 'string');
  const second = await c.listPage({ prefix: 'ls/', limit: 10, cursor: first.cursor });
  assert.equal(second.leases[0].resource, 'ls/10');
  const last = await c.listPage({ prefix: 'ls/', limit: 10, cursor: (await c.listPage({ prefix: 'ls/', limit: 20 })).cursor });
  assert.equal(last.leases.length, 5);
  assert.equal(last.cursor, undefined);
  for (const bad of [{ limit: 0 }, { limit: 1001 }, { prefix: 'x'.repeat(1025) }, { waiters: 'yes' }, { members: 1 }]) {
    await assert.rejects(c.listPage(bad), InvalidArgumentError);
  }
});

test('watch resumes after its connection is cut: every event once, in sequence', async () => {
  const c = new LeaseServiceClient({ baseURL: native.url, holderId: 'w', backoff: () => 0 });
  const watcher = new LeaseServiceClient({ baseURL: proxy.url, holderId: 'watcher', backoff: () => 0 });
  const ac = new AbortController();
  const it = watcher.watch({ prefix: 'w/', signal: ac.signal })[Symbol.asyncIterator]();
  const hello = (await it.next()).value;
  assert.equal(hello.type, 'hello');
  assert.equal(hello.resumed, false);
  let seq = hello.seq;
  for (let round = 0; round < 3; round++) {
    for (let i = 0; i < 10; i++) {
      await c.acquire(`w/${round}/${i}`);
      await c.acquire(`v/${round}/${i}`); // outside the prefix
      if (i === 5) for (const res of cut) res.destroy(); // events are decided while it is away
    }
    for (let i = 0; i < 10; i++) {
      const ev = (await it.next()).value;
      assert.equal(ev.type, 'granted', JSON.stringify(ev));
      assert.equal(ev.resource, `w/${round}/${i}`);
      assert.ok(ev.seq > seq, `seq ${ev.seq} after ${seq}`);
      seq = ev.seq;
    }
  }
  // A watch of a stream the coordinator does not have starts afresh.
  const again = watcher.watch({ prefix: 'w/', stream: 'not-this-one', afterSeq: 1, signal: ac.signal })[Symbol.asyncIterator]();
  const h2 = (await again.next()).value;
  assert.equal(h2.type, 'hello');
  assert.equal(h2.resumed, false);
  // Resuming from an earlier seq of the right stream replays what followed.
  const replay = watcher.watch({ prefix: 'w/', stream: hello.stream, afterSeq: seq - 4, signal: ac.signal })[Symbol.asyncIterator]();
  assert.equal((await replay.next()).value.seq, seq - 2);
  assert.equal((await replay.next()).value.seq, seq);
  ac.abort();
  assert.equal((await it.next()).done, true);
  await assert.rejects(watcher.watch({ prefix: 7 }).next(), InvalidArgumentError);
});
