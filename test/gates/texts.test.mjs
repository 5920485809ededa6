// Go and JavaScript send the same bytes: the scripts lease-fence/redis runs
// and the statements lease-fence/sql sends, recorded through a stand-in
// client, are byte for byte the texts Go's gates/redisfence and
// gates/sqlfence send for the same table (test/rig/gatecli -texts prints
// them). Both come from one source (gates/redisfence/*.lua,
// gates/sqlfence/statements.sql; wasm/js/gate-texts.mjs is generated from
// them), so a copy kept on either side that drifted fails here.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { MAX_REJECTIONS_PAGE as REDIS_MAX_REJECTIONS_PAGE, openRedisFence } from 'lease-fence/redis';
import { MAX_REJECTIONS_PAGE as SQL_MAX_REJECTIONS_PAGE, openSqlFence } from 'lease-fence/sql';
import { root } from './servers.mjs';

const TABLE = 't_js';
const go = JSON.parse(execFileSync(process.env.GO ?? 'go', ['run', './test/rig/gatecli', '-texts', TABLE], { cwd: root, encoding: 'utf8' }));

test('lease-fence/redis runs the scripts gates/redisfence runs', async () => {
  const sent = [];
  const client = {
    // The server has no script yet: the gate sends its text with EVAL.
    evalSha: async () => { throw new Error('NOSCRIPT No matching script. Please use EVAL.'); },
    eval: async (text) => {
      sent.push(text);
      return text === go.page ? [] : ['ok'];
    },
  };
  const gate = openRedisFence(client);
  await gate.admit({ resource: 'r', holderId: 'h', fence: 1 });
  assert.deepEqual(await gate.rejections('r', { afterSeq: 0, limit: 10 }), []);
  assert.equal(sent.length, 2);
  assert.ok(sent[0] === go.fence, 'the fence script differs from gates/redisfence/fence.lua');
  assert.ok(sent[1] === go.page, 'the page script differs from gates/redisfence/page.lua');
});

test('lease-fence/sql sends the statements gates/sqlfence sends', async () => {
  const sent = [];
  const own = new Set(['BEGIN', 'COMMIT', 'ROLLBACK']);
  let commits = 0;
  const answer = async (text, values) => {
    sent.push(text);
    if (own.has(text)) {
      // The first COMMIT gets no answer: the gate asks for its outcome.
      if (text === 'COMMIT' && commits++ === 0) throw new Error('Connection terminated unexpectedly');
      return { rows: [] };
    }
    if (text === go.postgres.has_column) return { rows: [{ n: values[1].endsWith('_id') ? 0 : 1 }] };
    // The share statement prepared, then BEGIN and its EXECUTE, in one
    // text (the commits below are of resource r at fences 2 and 1; the
    // stand-in's clients are new each time, so each commit prepares).
    const m = /^PREPARE (lease_fence_t_js_share) AS ([^]*);\nBEGIN;\nEXECUTE \1\('r', [12]\)$/.exec(text);
    if (m) {
      sent[sent.length - 1] = m[2];
      return [{ rows: [] }, { rows: [] }, { rows: [] }];
    }
    if (text === go.postgres.raise_lock) return { rows: [{ count: 1 }] };
    if (text === go.postgres.upsert) return { rows: [{ fence: '2', holder: 'b', rejections: '1', xid: '7' }] };
    if (text === go.postgres.status) return { rows: [{ status: 'committed' }] };
    if (text === go.postgres.floor) return { rows: [{ fence: '2' }] };
    return { rows: [] };
  };
  const pool = {
    connect: async () => ({ query: answer, release() {} }),
    query: answer,
  };
  const gate = await openSqlFence(pool, { table: TABLE });
  // Admitted (its COMMIT unanswered, then found committed), then refused
  // below the floor, then the floor and the log read, whole and a page.
  await gate.commit({ resource: 'r', holderId: 'b', fence: 2 }, async () => {});
  await assert.rejects(gate.commit({ resource: 'r', holderId: 'a', fence: 1 }, async () => {}), { name: 'StaleFenceError' });
  assert.equal(await gate.floor('r'), 2);
  await gate.rejections('r');
  await gate.rejections('r', { afterSeq: 0, limit: 10 });

  const names = new Map(Object.entries(go.postgres).map(([name, text]) => [text, name]));
  const notGo = sent.filter((t) => !own.has(t) && !names.has(t));
  assert.deepEqual(notGo, [], 'lease-fence/sql sent statements that are not gates/sqlfence\'s');
  // Every statement of Go's was sent (so the comparison covered them all).
  assert.deepEqual([...new Set(sent.filter((t) => names.has(t)).map((t) => names.get(t)))].sort(), Object.keys(go.postgres).sort());
});

test('lease-fence/redis and lease-fence/sql check core/fence\'s limits', async () => {
  const { MAX_ID_BYTES, MAX_MAX_REJECTIONS, MAX_REJECTIONS_PAGE } = go.limits;
  const client = {
    evalSha: async () => { throw new Error('NOSCRIPT No matching script. Please use EVAL.'); },
    eval: async (text) => (text === go.page ? [] : ['ok']),
  };
  const refused = (what, f) => assert.throws(f, { name: 'InvalidArgumentError' }, what);
  const refusedAsync = (what, f) => assert.rejects(f, { name: 'InvalidArgumentError' }, what);
  openRedisFence(client, { maxRejections: MAX_MAX_REJECTIONS });
  refused('maxRejections above the limit', () => openRedisFence(client, { maxRejections: MAX_MAX_REJECTIONS + 1 }));
  const gate = openRedisFence(client);
  assert.deepEqual(await gate.rejections('r', { afterSeq: 0, limit: MAX_REJECTIONS_PAGE }), []);
  await refusedAsync('a page above the limit', () => gate.rejections('r', { afterSeq: 0, limit: MAX_REJECTIONS_PAGE + 1 }));
  await gate.admit({ resource: 'r'.repeat(MAX_ID_BYTES), holderId: 'h', fence: 1 });
  await refusedAsync('a resource above the limit', () => gate.admit({ resource: 'r'.repeat(MAX_ID_BYTES + 1), holderId: 'h', fence: 1 }));
  assert.equal(SQL_MAX_REJECTIONS_PAGE, MAX_REJECTIONS_PAGE);
  assert.equal(REDIS_MAX_REJECTIONS_PAGE, MAX_REJECTIONS_PAGE);
});
