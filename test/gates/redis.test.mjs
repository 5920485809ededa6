// lease-fence/redis beyond the conformance suite: bad options and writes
// refused before anything changes, a command failing mid-write, a reply
// lost on a broken connection (settled through the commit's marker with
// atMostOnce, an OutcomeUnknownError without), a server that is down, the
// hash slot, the commits of one token sent as one script and each still
// answered as alone, against a real redis-server.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createClient } from 'redis';
import { InvalidArgumentError, StaleFenceError } from 'lease-fence';
import { CommandError, FenceStoreError, OutcomeUnknownError, openRedisFence, redisKey, redisSlot, redisTag } from 'lease-fence/redis';
import { cutProxy } from './cutproxy.mjs';
import { startRedis } from './servers.mjs';

let server;
let nsSeq = 0;
const clients = [];
before(async () => { server = await startRedis(); });
after(async () => {
  for (const c of clients) c.destroy();
  assert.equal(await server.stop(), 0);
});

async function client(url = server.url, opts = {}) {
  const c = createClient({ url, ...opts });
  c.on('error', () => {});
  await c.connect();
  clients.push(c);
  return c;
}
const tk = (holderId, fence, resource = 'r') => ({ resource, holderId, fence });

// cutStore opens a store in a fresh namespace (what and a number), with
// opts, through a proxy that cuts the connection at the first EVAL, after
// passing it on to the server (forward) or not; k is a list key of it.
async function cutStore(what, forward, opts = {}) {
  const u = new URL(server.url);
  const proxy = await cutProxy([u.hostname, Number(u.port)], /EVAL/i, { forward });
  const c = await client(`redis://127.0.0.1:${proxy.port}`);
  const ns = `${what}${++nsSeq}-`;
  return { proxy, store: openRedisFence(c, { prefix: ns, ...opts }), k: redisKey('r', `${ns}list`) };
}

test('the hash slot and tags agree with Go (the cluster spec vectors)', () => {
  assert.equal(redisSlot('123456789'), 0x31c3 & 16383);
  assert.equal(redisSlot('{user1000}.following'), redisSlot('user1000'));
  assert.equal(redisSlot('foo{{bar}}zap'), redisSlot('{bar'));
  assert.notEqual(redisSlot('foo{}{bar}'), redisSlot('bar'));
  assert.equal(redisTag('a}b'), '{a%7Db}');
  assert.notEqual(redisTag('a}b'), redisTag('a%7Db'));
  for (const r of ['deploy-slot', 'a}b', '}x', '{', 'é']) assert.equal(redisSlot(redisKey(r, 'x')), redisSlot(`lease-fence:${redisTag(r)}:floor`));
});

test('bad options and writes are refused before anything changes', async () => {
  const c = await client();
  for (const [opts, argument] of [[{ prefix: 'a{' }, 'options.prefix'], [{ prefix: '' }, 'options.prefix'], [{ maxRejections: -1 }, 'options.maxRejections'],
    [{ maxRejections: 1.5 }, 'options.maxRejections'], [{ markerTtlMillis: 10 }, 'options.markerTtlMillis'], [{ atMostOnce: 1 }, 'options.atMostOnce'], ['x', 'options']]) {
    assert.throws(() => openRedisFence(c, opts), (e) => e instanceof InvalidArgumentError && e.argument === argument);
  }
  assert.throws(() => openRedisFence({}), InvalidArgumentError);
  const ns = `bad${++nsSeq}-`;
  const store = openRedisFence(c, { prefix: ns });
  const k = redisKey('r', `${ns}data`);
  await store.commit(tk('a', 5), { keys: [k], commands: [['SET', k, 'v1']] });
  const bad = {
    noCommands: [{ keys: [k], commands: [] }, 'write.commands'],
    notAnObject: [null, 'write.commands'],
    emptyCommand: [{ keys: [k], commands: [[]] }, 'write.commands[0]'],
    unknown: [{ keys: [k], commands: [['SET', k, 'v2'], ['NOSUCHCMD', k]] }, 'write.commands[1]'],
    arity: [{ keys: [k], commands: [['SET', k, 'v2'], ['SET', k]] }, 'write.commands[1]'],
    notInScripts: [{ keys: [k], commands: [['SET', k, 'v2'], ['WATCH', k]] }, 'write.commands[1]'],
    noKeys: [{ keys: [k], commands: [['SET', k, 'v2'], ['FLUSHALL', 'ASYNC']] }, 'write.commands[1]'],
    undeclared: [{ keys: [k], commands: [['SET', k, 'v2'], ['SET', redisKey('r', 'other'), 'x']] }, 'write.commands[1]'],
    otherSlot: [{ keys: ['plain'], commands: [['SET', 'plain', 'x']] }, 'write.keys[0]'],
    gateNamespace: [{ keys: [`${ns}{r}:floor`], commands: [['DEL', `${ns}{r}:floor`]] }, 'write.keys[0]'],
    badArg: [{ keys: [k], commands: [['SET', k, {}]] }, 'write.commands[0]'],
  };
  for (const [name, [write, argument]] of Object.entries(bad)) {
    for (const fence of [6, 1]) {
      await assert.rejects(store.commit(tk('b', fence), write), (e) => e instanceof InvalidArgumentError && e.argument === argument, `${name} (fence ${fence})`);
    }
    assert.equal(await c.get(k), 'v1', `${name}: the data did not change`);
    assert.equal(await store.floor('r'), 5, `${name}: the floor did not move`);
    assert.deepEqual(await store.rejections('r'), [], `${name}: nothing was logged`);
  }
});

test('a command failing mid-write stops it there; the floor stays raised', async () => {
  const c = await client();
  const ns = `mid${++nsSeq}-`;
  const store = openRedisFence(c, { prefix: ns });
  const [a, b, d] = ['a', 'b', 'd'].map((x) => redisKey('r', ns + x));
  await c.set(b, 'not a number');
  await assert.rejects(store.commit(tk('h', 3), { keys: [a, b, d], commands: [['SET', a, '1'], ['INCR', b], ['SET', d, '3']] }), (e) =>
    e instanceof CommandError && e.index === 1 && e.command === 'INCR' && e.fence === 3 && e.written === 'partly' && /not an integer/.test(e.message));
  assert.equal(await c.get(a), '1');
  assert.equal(await c.exists(d), 0);
  assert.equal(await store.floor('r'), 3);
});

test('a reply lost on a broken connection is settled through the marker (atMostOnce)', async () => {
  for (const forward of [true, false]) {
    const { proxy, store, k } = await cutStore('cut', forward, { atMostOnce: true });
    const direct = await client();
    const p = store.commit(tk('h', 4), { keys: [k], commands: [['RPUSH', k, 'once']] });
    if (forward) await p;
    else await assert.rejects(p, (e) => e instanceof FenceStoreError && e.written === false);
    assert.ok(proxy.cut);
    assert.equal(await direct.lLen(k), forward ? 1 : 0, 'the write is there once, or not at all');
    assert.equal(await store.floor('r'), forward ? 4 : 0);
    await proxy.close();
  }
});

test('without atMostOnce no marker is written, and a lost reply is an OutcomeUnknownError', async () => {
  const direct = await client();
  const ns0 = `nomark${++nsSeq}-`;
  const k0 = redisKey('r', `${ns0}v`);
  await openRedisFence(direct, { prefix: ns0 }).commit(tk('h', 2), { keys: [k0], commands: [['SET', k0, 'a']] });
  assert.deepEqual(await direct.keys(`${ns0}*commit:*`), [], 'no marker without atMostOnce');
  for (const forward of [true, false]) {
    const { proxy, store, k } = await cutStore('cut', forward);
    await assert.rejects(store.commit(tk('h', 4), { keys: [k], commands: [['RPUSH', k, 'once']] }), OutcomeUnknownError);
    assert.ok(proxy.cut);
    assert.equal(await direct.lLen(k), forward ? 1 : 0, 'the write ran once, or not at all');
    await proxy.close();
  }
});

test('a server that is down gives FenceStoreError', async () => {
  const c = createClient({ url: 'redis://127.0.0.1:1', disableOfflineQueue: true, socket: { reconnectStrategy: false } });
  c.on('error', () => {});
  await assert.rejects(c.connect());
  const store = openRedisFence(c);
  await assert.rejects(store.admit(tk('h', 1)), (e) => e instanceof FenceStoreError && e.written === false);
});

// Every key under ns (the gate's and the data keys, which carry ns) with
// its serialized value.
async function dump(c, ns) {
  const out = {};
  for (const pattern of [`${ns}*`, `*${ns}*`]) {
    for (const k of await c.keys(pattern)) out[k] = (await c.sendCommand(['DUMP', k], { typeMapping: { [36]: Buffer } }))?.toString('hex');
  }
  return out;
}

test("a gate's own key holding what the gate did not write is refused before anything changes", async () => {
  const c = await client();
  const cases = {
    floorIsAString: ['floor', false, (floor) => c.set(floor, '7')],
    fenceNotANumber: ['floor', false, (floor) => c.hSet(floor, { fence: 'seven', holder: 'h' })],
    countNotANumber: ['floor', false, (floor) => c.hSet(floor, { fence: '7', holder: 'h', rejections: 'x' })],
    logIsAString: ['log', true, async (floor, log) => { await c.hSet(floor, { fence: '7', holder: 'h' }); await c.set(log, 'x'); }],
    logOfBrokenEntries: ['log', true, async (floor, log) => { await c.hSet(floor, { fence: '7', holder: 'h' }); await c.rPush(log, ['1', 'a', '2']); }],
  };
  for (const [name, [which, staleOnly, corrupt]] of Object.entries(cases)) {
    const ns = `corrupt${++nsSeq}-`;
    const store = openRedisFence(c, { prefix: ns });
    const floor = `${ns}{r}:floor`;
    const log = `${ns}{r}:rejections`;
    await corrupt(floor, log);
    const data = redisKey('r', `${ns}data`);
    await c.set(data, 'before');
    const key = which === 'floor' ? floor : log;
    const before = await dump(c, ns);
    for (const fence of staleOnly ? [3] : [9, 3]) {
      for (const p of [store.commit(tk('a', fence), { keys: [data], commands: [['SET', data, 'after']] }), store.admit(tk('a', fence))]) {
        await assert.rejects(p, (e) => e instanceof FenceStoreError && e.key === key && e.written === false && /nothing was changed/.test(e.message), `${name}, fence ${fence}`);
      }
      assert.deepEqual(await dump(c, ns), before, `${name}, fence ${fence}: nothing changed`);
    }
    if (which === 'log') {
      await assert.rejects(store.rejections('r'), (e) => e instanceof FenceStoreError && e.key === log, `${name}: rejections`);
      await assert.rejects(store.rejections('r', { limit: 5 }), (e) => e instanceof FenceStoreError && e.key === log, `${name}: a page`);
    } else if (name !== 'countNotANumber') {
      await assert.rejects(store.floor('r'), (e) => e instanceof FenceStoreError && e.key === floor, `${name}: floor`);
    }
  }
});

test('pages of the rejection log: bad options refused', async () => {
  const c = await client();
  const store = openRedisFence(c, { prefix: `page${++nsSeq}-` });
  for (const [options, argument] of [[{ limit: 0 }, 'options.limit'], [{ limit: 10001 }, 'options.limit'], [{ afterSeq: 1 }, 'options.limit'],
    [{ afterSeq: -1, limit: 1 }, 'options.afterSeq'], [{ afterSeq: 1.5, limit: 1 }, 'options.afterSeq'], [{ limit: 1, after: 1 }, 'options.after'], ['x', 'options']]) {
    await assert.rejects(store.rejections('r', options), (e) => e instanceof InvalidArgumentError && e.argument === argument, JSON.stringify(options));
  }
  assert.deepEqual(await store.rejections('r', { limit: 10 }), []);
});

// The fence script's calls the server has run (INFO commandstats).
async function scriptCalls(c) {
  return Number(/cmdstat_evalsha:calls=(\d+)/.exec(await c.info('commandstats'))?.[1] ?? 0);
}

test('commits of one token made together go as one script, each answered as alone', async () => {
  const c = await client();
  const ns = `batch${++nsSeq}-`;
  const store = openRedisFence(c, { prefix: ns });
  const k = redisKey('r', `${ns}list`);
  const n = redisKey('r', `${ns}n`);
  await store.commit(tk('h', 2), { keys: [k, n], commands: [['RPUSH', k, 'first']] });
  const write = (v) => ({ keys: [k, n], commands: [['RPUSH', k, v]] });

  // All land, in the order they were made, through one script.
  let calls = await scriptCalls(c);
  await Promise.all(['a', 'b', 'c'].map((v) => store.commit(tk('h', 2), write(v))));
  assert.equal(await scriptCalls(c) - calls, 1, 'three commits of one token, one script');
  assert.deepEqual(await c.lRange(k, 0, -1), ['first', 'a', 'b', 'c']);

  // A command failing in the second: the first landed, the second stops
  // at its command (index within its own write), the third runs alone.
  await c.set(n, 'not a number');
  const failed = await Promise.allSettled([
    store.commit(tk('h', 2), write('d')),
    store.commit(tk('h', 2), { keys: [k, n], commands: [['RPUSH', k, 'e'], ['INCR', n], ['RPUSH', k, 'never']] }),
    store.commit(tk('h', 2), write('f')),
  ]);
  assert.equal(failed[0].status, 'fulfilled');
  assert.ok(failed[1].reason instanceof CommandError && failed[1].reason.index === 1 && failed[1].reason.command === 'INCR', String(failed[1].reason));
  assert.equal(failed[2].status, 'fulfilled', String(failed[2].reason));
  assert.deepEqual(await c.lRange(k, 4, -1), ['d', 'e', 'f']);

  // A command the script refuses in the second: nothing of it ran, the
  // others landed.
  const invalid = await Promise.allSettled([
    store.commit(tk('h', 2), write('g')),
    store.commit(tk('h', 2), { keys: [k, n], commands: [['RPUSH', k, 'never'], ['SET', n]] }),
    store.commit(tk('h', 2), write('i')),
  ]);
  assert.equal(invalid[0].status, 'fulfilled', String(invalid[0].reason));
  assert.ok(invalid[1].reason instanceof InvalidArgumentError && invalid[1].reason.argument === 'write.commands[1]', String(invalid[1].reason));
  assert.equal(invalid[2].status, 'fulfilled', String(invalid[2].reason));
  assert.deepEqual(await c.lRange(k, 7, -1), ['g', 'i']);

  // Stale: each is refused and logged on its own.
  await store.admit(tk('new', 3));
  calls = await scriptCalls(c);
  const stale = await Promise.allSettled(['x', 'y', 'z'].map((v) => store.commit(tk('h', 2), write(v))));
  assert.deepEqual(stale.map((r) => r.reason instanceof StaleFenceError && r.reason.rejection.seq), [1, 2, 3]);
  assert.deepEqual((await store.rejections('r')).map((r) => [r.seq, r.refusedHolderId, r.refusedFence, r.admittedFence]),
    [[1, 'h', 2, 3], [2, 'h', 2, 3], [3, 'h', 2, 3]]);
  assert.equal(await scriptCalls(c) - calls, 3, 'the one batch, then the two after the first refusal alone');
  assert.equal(await c.lLen(k), 9);
});

test('commits with a signal share a script; one whose signal aborts before its batch is sent leaves it', async () => {
  const c = await client();
  const ns = `batchsig${++nsSeq}-`;
  const store = openRedisFence(c, { prefix: ns });
  const k = redisKey('r', `${ns}list`);
  const write = (v) => ({ keys: [k], commands: [['RPUSH', k, v]] });
  await store.commit(tk('h', 2), write('first'));

  // A deadline's signal, a controller's, and none: one script.
  let calls = await scriptCalls(c);
  const signals = [AbortSignal.timeout(600_000), new AbortController().signal, undefined];
  await Promise.all(['a', 'b', 'c'].map((v, i) => store.commit(tk('h', 2), write(v), { signal: signals[i] })));
  assert.equal(await scriptCalls(c) - calls, 1, 'three commits of one token, with signals, one script');

  // The second's signal aborts before the batch is sent: it rejects with
  // the signal's reason, nothing of it is sent, the others land together.
  calls = await scriptCalls(c);
  const ac = new AbortController();
  const made = [store.commit(tk('h', 2), write('d')), store.commit(tk('h', 2), write('never'), { signal: ac.signal }), store.commit(tk('h', 2), write('e'))];
  const reason = new Error('given up');
  ac.abort(reason);
  const got = await Promise.allSettled(made);
  assert.deepEqual(got.map((r) => r.status), ['fulfilled', 'rejected', 'fulfilled'], String(got[1].reason));
  assert.equal(got[1].reason, reason);
  assert.equal(await scriptCalls(c) - calls, 1);

  // A batch all of whose commits left sends nothing.
  calls = await scriptCalls(c);
  const ac2 = new AbortController();
  const left = store.commit(tk('h', 2), write('never'), { signal: ac2.signal });
  ac2.abort();
  await assert.rejects(left, (e) => e === ac2.signal.reason);
  assert.equal(await scriptCalls(c) - calls, 0);
  assert.deepEqual(await c.lRange(k, 0, -1), ['first', 'a', 'b', 'c', 'd', 'e']);
});

test('a commit whose signal aborts while its script is in flight rejects at once with OutcomeUnknownError; the others get their answers', async () => {
  const c = await client();
  const admin = await client();
  const ns = `batchflight${++nsSeq}-`;
  const store = openRedisFence(c, { prefix: ns });
  const k = redisKey('r', `${ns}list`);
  const write = (v) => ({ keys: [k], commands: [['RPUSH', k, v]] });
  await store.commit(tk('h', 2), write('first'));
  // Redis holds the scripts that may write while clients are paused: the
  // batch stays in flight until the pause ends.
  await admin.sendCommand(['CLIENT', 'PAUSE', '30000', 'WRITE']);
  let others;
  try {
    const ac = new AbortController();
    const mine = store.commit(tk('h', 2), write('a'), { signal: ac.signal });
    others = Promise.allSettled([store.commit(tk('h', 2), write('b')), store.commit(tk('h', 2), write('c'), { signal: new AbortController().signal })]);
    await new Promise(setImmediate); // the batch was sent (at the microtask after the first)
    const reason = new Error('given up');
    ac.abort(reason);
    await assert.rejects(mine, (e) => e instanceof OutcomeUnknownError && e.cause === reason && e.written === null);
  } finally {
    await admin.sendCommand(['CLIENT', 'UNPAUSE']);
  }
  assert.deepEqual((await others).map((r) => r.status), ['fulfilled', 'fulfilled']);
  assert.deepEqual(await c.lRange(k, 0, -1), ['first', 'a', 'b', 'c'], 'the aborted one ran: its outcome was unknown');
});

test('a commit in a batch keeps to the keys it declared', async () => {
  const c = await client();
  const ns = `batchkeys${++nsSeq}-`;
  const store = openRedisFence(c, { prefix: ns });
  const [a, b] = ['a', 'b'].map((x) => redisKey('r', ns + x));
  const got = await Promise.allSettled([
    store.commit(tk('h', 1), { keys: [a], commands: [['SET', a, '1']] }),
    store.commit(tk('h', 1), { keys: [b], commands: [['SET', a, 'undeclared']] }),
  ]);
  assert.equal(got[0].status, 'fulfilled');
  assert.ok(got[1].reason instanceof InvalidArgumentError && got[1].reason.argument === 'write.commands[0]', String(got[1].reason));
  assert.equal(await c.get(a), '1');
});

test("the gate's calls reach Redis in the order they were made", async () => {
  const c = await client();
  const store = openRedisFence(c, { prefix: `order${++nsSeq}-` });
  const k = redisKey('r', `order${nsSeq}-v`);
  const p = store.commit(tk('h', 4), { keys: [k], commands: [['SET', k, 'v']] });
  assert.equal(await store.floor('r'), 4, 'floor, called after commit, reads after it');
  await p;
  const q = store.commit(tk('h', 5), { keys: [k], commands: [['SET', k, 'v']] });
  await assert.rejects(store.admit(tk('h', 4)), StaleFenceError, 'admit, called after commit, runs after it');
  await q;
});

test('a batch whose reply was lost: each commit is an OutcomeUnknownError', async () => {
  const direct = await client();
  for (const forward of [true, false]) {
    const { proxy, store, k } = await cutStore('batchcut', forward);
    const got = await Promise.allSettled(['a', 'b', 'c'].map((v) => store.commit(tk('h', 4), { keys: [k], commands: [['RPUSH', k, v]] })));
    assert.ok(got.every((r) => r.reason instanceof OutcomeUnknownError), got.map((r) => String(r.reason)).join(', '));
    assert.ok(proxy.cut);
    assert.deepEqual(await direct.lRange(k, 0, -1), forward ? ['a', 'b', 'c'] : [], 'all ran, or none');
    await proxy.close();
  }
});
