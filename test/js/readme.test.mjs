// The README's programs, run as they are written there: the quick start in Go
// and in JavaScript, each against a fresh coordinator (out/bin/coordinator,
// which make test-js builds) started with the flags the README gives, and
// every other js block. A program followed by a ```text block must print
// exactly that; every program must exit 0.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

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
  const bin = process.env.COORDINATOR || join(root, 'out/bin/coordinator');
  assert.ok(existsSync(bin), `${bin} is not built: run make coordinator`);
  const args = [...command.split(/\s+/).slice(1), '-addr', '127.0.0.1:0'];
  const child = spawn(bin, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  const exited = new Promise((resolve) => child.once('exit', resolve));
  try {
    const url = await new Promise((resolve, reject) => {
      let log = '';
      const seen = (d) => {
        log += d;
        const m = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(log);
        if (m) resolve(m[1]);
      };
      child.stdout.on('data', seen);
      child.stderr.on('data', seen);
      child.once('exit', (code) => reject(new Error(`the coordinator exited with ${code}:\n${log}`)));
    });
    return await fn(url);
  } finally {
    child.kill('SIGINT');
    await exited;
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
