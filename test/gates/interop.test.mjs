// A Go writer (test/rig/gatecli: gates/sqlfence, gates/redisfence) and a
// JavaScript writer (lease-fence/sql, lease-fence/redis) on one database
// share one floor and one rejections log: interleaved step by step, then
// both writing at once.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { StaleFenceError } from 'lease-fence';
import { redisGate, sqlGate } from './adapters.mjs';
import { checkHistory, writeRandom } from './conformance.mjs';
import { createDatabase, root, startPostgres, startRedis } from './servers.mjs';

let pgServer;
let redisServer;
const closers = [];

before(async () => {
  [pgServer, redisServer] = await Promise.all([startPostgres(), startRedis()]);
});
after(async () => {
  for (const c of closers) await c();
  assert.equal(await pgServer.stop(), 0);
  assert.equal(await redisServer.stop(), 0);
});

// goWriter runs test/rig/gatecli on addr; call(request) answers one request.
function goWriter(addr) {
  const proc = spawn(process.env.GO ?? 'go', ['run', './test/rig/gatecli', addr], { cwd: root, stdio: ['pipe', 'pipe', 'inherit'] });
  const waiting = [];
  createInterface({ input: proc.stdout }).on('line', (l) => waiting.shift()(JSON.parse(l)));
  closers.push(() => new Promise((resolve) => { proc.once('exit', resolve); proc.stdin.end(); }));
  return (req) => new Promise((resolve) => { waiting.push(resolve); proc.stdin.write(`${JSON.stringify(req)}\n`); });
}

const tk = (holderId, fence) => ({ resource: 'doc-1', holderId, fence });

async function interleaved(js, goCall) {
  assert.deepEqual(await goCall({ op: 'commit', resource: 'doc-1', holder: 'go-a', fence: 1, value: 'go-a#1#0' }), { ok: true });
  await js.commit(tk('js-b', 2), { value: 'js-b#2#0' });
  const goStale = await goCall({ op: 'commit', resource: 'doc-1', holder: 'go-a', fence: 1, value: 'go-a#1#1' });
  const r1 = { seq: 1, resource: 'doc-1', refusedHolderId: 'go-a', refusedFence: 1, admittedHolderId: 'js-b', admittedFence: 2 };
  assert.deepEqual(goStale.stale, r1, 'Go refuses below the floor JavaScript raised');
  assert.deepEqual(await goCall({ op: 'admit', resource: 'doc-1', holder: 'go-c', fence: 3 }), { ok: true });
  let jsErr;
  await js.commit(tk('js-b', 2), { value: 'js-b#2#1' }).catch((e) => { jsErr = e; });
  assert.ok(jsErr instanceof StaleFenceError, 'JavaScript refuses below the floor Go admitted');
  const r2 = { seq: 2, resource: 'doc-1', refusedHolderId: 'js-b', refusedFence: 2, admittedHolderId: 'go-c', admittedFence: 3 };
  assert.deepEqual(jsErr.rejection, r2);
  assert.equal(jsErr.message, (await goCall({ op: 'commit', resource: 'doc-1', holder: 'js-b', fence: 2, value: 'x' })).message.replace('#3', '#2'));
  assert.deepEqual((await goCall({ op: 'rejections', resource: 'doc-1' })).rejections.slice(0, 2), [r1, r2]);
  assert.deepEqual((await js.rejections('doc-1')).slice(0, 2), [r1, r2]);
  assert.equal((await goCall({ op: 'floor', resource: 'doc-1' })).floor, 3);
  assert.equal(await js.floor('doc-1'), 3);
  assert.deepEqual(await js.values('doc-1'), ['go-a#1#0', 'js-b#2#0']);

  // Both at once: JavaScript writers in this process, a Go writer in its own.
  const goAttempts = (async () => {
    const out = [];
    for (let i = 0; i < 25; i++) {
      const fence = 10 + i + ((i * 7) % 12);
      const a = { holder: 'go', fence, value: `go#${fence}#${i}` };
      const ans = await goCall({ op: 'commit', resource: 'burst', holder: 'go', fence, value: a.value });
      if (ans.ok) a.outcome = 'landed';
      else if (ans.stale) { a.outcome = 'refused'; a.refusal = ans.stale; } else a.outcome = `error: ${ans.error}`;
      out.push(a);
    }
    return out;
  })();
  const jsAttempts = await Promise.all([writeRandom(js, 'burst', 'js0', 1, 25), writeRandom(js, 'burst', 'js1', 2, 25)]);
  const attempts = [...jsAttempts.flat(), ...(await goAttempts)];
  checkHistory({ floor: await js.floor('burst'), rejections: await js.rejections('burst'), values: await js.values('burst') }, attempts, []);
}

describe('Go and JavaScript writers share one floor', () => {
  test('PostgreSQL: gates/sqlfence and lease-fence/sql', async () => {
    const url = await createDatabase(pgServer.url, 'interop');
    const js = await sqlGate(url);
    closers.push(() => js.close());
    await interleaved(js, goWriter(url));
  });
  test('Redis: gates/redisfence and lease-fence/redis', async () => {
    const addr = `${redisServer.url} interop-`;
    const js = await redisGate(addr);
    closers.push(() => js.close());
    await interleaved(js, goWriter(addr));
  });
});
