// The example of docs/playground.md's "The model, apart from the page", run
// as written from the repository's root (where its './web/model.js' and the
// package's own name resolve), with checks of what its comments promise
// appended after it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../../', import.meta.url));
const doc = readFileSync(new URL('../../docs/playground.md', import.meta.url), 'utf8');

test("docs/playground.md's model example runs as written and gets what its comments say", async () => {
  const m = /^## The model, apart from the page\n[\s\S]*?^```js\n([\s\S]*?)^```$/m.exec(doc);
  assert.ok(m, 'docs/playground.md has no js block under "The model, apart from the page"');
  const checks = `
if (run.lanes.fenced.rejections[0]?.seq !== 1 || run.lanes.fenced.rejections[0].refusedHolderId !== 'agent-a'
  || run.lanes.fenced.rejections[0].refusedFence !== 1) throw new Error('rejections: ' + JSON.stringify(run.lanes.fenced.rejections));
if (writes === undefined) throw new Error('runScenarioAsync resolved to nothing');
console.log('ok');
`;
  const { code, stdout, stderr } = await new Promise((resolve) => {
    execFile(process.execPath, ['--input-type=module', '--eval', m[1] + checks], { cwd: root, timeout: 120_000 },
      (err, stdout, stderr) => resolve({ code: err ? (err.code ?? err.signal) : 0, stdout, stderr }));
  });
  assert.equal(code, 0, `exit ${code}\n${stdout}\n${stderr}`);
  assert.equal(stdout.trim(), 'ok', stderr);
});
