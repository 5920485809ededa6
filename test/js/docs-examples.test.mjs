// Every ```js (and ```cjs) block of docs/js.md, run verbatim under this node (Node 20 on
// the build machine: the package's stated minimum) as a module of its own,
// from a folder inside the repository so that 'lease-fence', its subpaths
// and 'pg' resolve as they do for a user who installed them. A block that
// ends with an `// Output:` comment must print exactly the lines after it
// (as Go's Example functions do); every block must exit 0.
//
// What the blocks reach: COORDINATOR_URL, a native coordinator started here
// (out/bin/coordinator, `make coordinator`; make test-js builds it). A block
// right after an `<!-- name:start -->` marker belongs to the test that reads
// it by its markers (the lease-fence/sql and lease-fence/redis examples:
// test/gates/examples.test.mjs, against real servers; the TLS agent's:
// test/svcclient/tls.test.mjs); it is left to that test, which must exist.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { coordinatorBin, startCoordinator, stop } from '../svcclient/children.mjs';

const root = fileURLToPath(new URL('../../', import.meta.url));
const dir = join(root, 'out', 'test', 'docs-js');
const doc = readFileSync(join(root, 'docs', 'js.md'), 'utf8');

// The blocks, with the heading each sits under and its line in the doc.
const blocks = [];
{
  let heading = '';
  const lines = doc.split('\n');
  for (let i = 0; i < lines.length; i++) {
    if (/^#+ /.test(lines[i])) heading = lines[i].replace(/^#+ /, '');
    if (lines[i] === '```js' || lines[i] === '```cjs') {
      const start = i + 1;
      let end = start;
      while (lines[end] !== '```') end++;
      const marker = /^<!-- ([\w-]+):start -->$/.exec(lines[i - 1] ?? '')?.[1];
      blocks.push({ heading, line: start, marker, ext: lines[i] === '```js' ? 'mjs' : 'cjs', code: `${lines.slice(start, end).join('\n')}\n` });
      i = end;
    }
  }
}

// The lines an `// Output:` comment at the end of a block promises.
function expectedOutput(code) {
  const lines = code.trimEnd().split('\n');
  const at = lines.findLastIndex((l) => /^\s*\/\/ Output:\s*$/.test(l));
  if (at < 0) return null;
  return lines.slice(at + 1).map((l) => l.replace(/^\s*\/\/ ?/, ''));
}

let coordinator, coordinatorURL;

before(async () => {
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });

  // -memory where this coordinator has it ($COORDINATOR may be another build).
  const usage = spawnSync(coordinatorBin, ['-h'], { encoding: 'utf8' });
  const args = /^\s+-memory\b/m.test(`${usage.stdout}${usage.stderr}`) ? ['-memory'] : [];
  ({ child: coordinator, url: coordinatorURL } = await startCoordinator(args));
});

after(() => stop(coordinator));

function run(file) {
  return new Promise((resolve) => {
    execFile(process.execPath, [file], {
      cwd: dir,
      timeout: 120_000,
      env: { ...process.env, COORDINATOR_URL: coordinatorURL },
    }, (err, stdout, stderr) => resolve({ code: err ? (err.code ?? err.signal) : 0, stdout, stderr }));
  });
}

test('docs/js.md has examples to run, and this is the Node the package supports', () => {
  assert.ok(blocks.filter((b) => !b.marker).length >= 6, `only ${blocks.length} js blocks`);
  assert.match(process.version, /^v2\d\./);
});

test('the blocks left to other tests are read by them, by their markers', () => {
  const tests = ['test/js', 'test/gates', 'test/svcclient'].flatMap((d) => existsSync(join(root, d))
    ? readdirSync(join(root, d)).filter((f) => f.endsWith('.test.mjs')).map((f) => readFileSync(join(root, d, f), 'utf8'))
    : []);
  for (const b of blocks.filter((x) => x.marker)) {
    assert.ok(tests.some((t) => t.includes(b.marker)), `no test reads the block marked ${b.marker} (docs/js.md line ${b.line})`);
  }
});

for (const [i, b] of blocks.filter((x) => !x.marker).entries()) {
  test(`docs/js.md line ${b.line} (${b.heading}) runs as written`, async () => {
    const file = join(dir, `example-${i + 1}.${b.ext}`);
    writeFileSync(file, b.code);
    const { code, stdout, stderr } = await run(file);
    assert.equal(code, 0, `exit ${code}\n${stdout}\n${stderr}`);
    const want = expectedOutput(b.code);
    if (want !== null) assert.deepEqual(stdout.trimEnd().split('\n'), want, stderr);
  });
}
