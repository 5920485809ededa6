// The README's programs, run as they are written there: the quick start in Go
// and in JavaScript, each against a fresh coordinator (out/bin/coordinator,
// which make test-js builds) started with the flags the README gives, and
// every other js block. A program followed by a ```text block must print
// exactly that; every program must exit 0.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startCoordinator, stop } from '../svcclient/children.mjs';

const root = fileURLToPath(new URL('../../', import.meta.url));
const dir = join(root, 'out', 'test', 'readme');
const readme = readFileSync(join(root, 'README.md'), 'utf8');

// The fenced blocks in order: their language, code, and the ```text block
// that follows each (after prose only), if any.
const blocks = [];
for (const m of readme.matchAll(/^```(\w*)\n([\s\S]*?)^```\n/gm)) blocks.push({ lang: m[1], code: m[2], at: m.index });
for (const [i, b] of blocks.entries()) {
  const next = blocks[i + 1];
  if (b.lang !== 'text' && next?.lang === 'text') b.output = next.code.trimEnd().split('\n');
}

// The coordinator of the quick start: the README's command line, on a free port.
const command = blocks.filter((b) => b.lang === 'sh').flatMap((b) => b.code.split('\n'))
  .find((l) => l.startsWith('out/bin/coordinator ') && !l.includes('-state') && !l.includes('-store'));

function run(file, args, env, cwd = dir) {
  return new Promise((resolve) => {
    execFile(file, args, { cwd, env: { ...process.env, ...env }, timeout: 300_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? (err.code ?? err.signal) : 0, stdout, stderr });
    });
  });
}

async function withCoordinator(fn) {
  const { url, child } = await startCoordinator(command.split(/\s+/).slice(1));
  try {
    return await fn(url);
  } finally {
    await stop(child);
  }
}

function check({ code, stdout, stderr }, want) {
  assert.equal(code, 0, `exit ${code}\n${stdout}\n${stderr}`);
  if (want) assert.deepEqual(stdout.trimEnd().split('\n'), want, stderr);
}

test('the README has the quick start to run: a coordinator command, a Go program and JS programs with their output', () => {
  assert.ok(command, 'no out/bin/coordinator command line in a sh block');
  assert.match(command, /-ttl \w+/);
  assert.equal(blocks.filter((b) => b.lang === 'go').length, 1);
  assert.ok(blocks.find((b) => b.lang === 'go').output, 'the Go program has no output block');
  assert.ok(blocks.find((b) => b.lang === 'js').output, 'the first js program has no output block');
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(join(dir, 'testdata', 'quickstart'), { recursive: true });
});

test('the Go quick start runs as written', async () => {
  const b = blocks.find((x) => x.lang === 'go');
  writeFileSync(join(dir, 'testdata', 'quickstart', 'main.go'), b.code); // testdata: not in go vet ./...
  const go = process.env.GO || 'go';
  const bin = join(dir, 'quickstart-go');
  check(await run(go, ['build', '-o', bin, './out/test/readme/testdata/quickstart'], {}, root));
  check(await withCoordinator((url) => run(bin, [], { COORDINATOR_URL: url })), b.output);
});

for (const [i, b] of blocks.filter((x) => x.lang === 'js').entries()) {
  test(`README js block ${i + 1} runs as written`, async () => {
    const file = join(dir, `example-${i + 1}.mjs`);
    writeFileSync(file, b.code);
    check(await withCoordinator((url) => run(process.execPath, [file], { COORDINATOR_URL: url })), b.output);
  });
}
