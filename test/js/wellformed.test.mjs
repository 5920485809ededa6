// Strings that are not well-formed UTF-16 (lone surrogates) are refused as
// arguments. codec.mjs asks String.prototype.isWellFormed where the
// host has it and scans the string itself where it does not; both must
// refuse exactly the strings isWellFormed refuses. The scan runs here in a
// fresh node whose String.prototype has no isWellFormed.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../../', import.meta.url));

const strings = [
  'a', 'plain ascii', 'é', 'agent-é', '日本語', '😀', 'a😀b', '😀😀',
  '\ud800', '\udc00', '\udbff', '\udfff', 'x\ud800', '\ud800x', 'x\udc00y',
  '\udc00\ud800', '\ud800\ud800', '\ud800\ud800\udc00', '\ud83d\ude00\ud800',
  'é\ud800', '\ud800é', '😀\udc00', '\ud7ff\ue000', '\uffff\ud800\udc00',
];

// Each string as a gate's resource: the resource back, or the error.
const probe = `
const strings = JSON.parse(process.env.STRINGS);
const { FenceGate } = await import('lease-fence');
console.log(JSON.stringify(strings.map((s) => {
  try {
    return { resource: new FenceGate(s).resource === s };
  } catch (e) {
    return { error: e.name, argument: e.argument, notWellFormed: /not well-formed/.test(e.message) };
  }
})));
`;

function run(prelude) {
  return new Promise((resolve, reject) => {
    execFile(process.execPath, ['--input-type=module', '-e', prelude + probe], {
      cwd: root,
      env: { ...process.env, STRINGS: JSON.stringify(strings) },
    }, (err, stdout, stderr) => {
      if (err) return reject(new Error(`${err.message}\n${stderr}`));
      resolve(JSON.parse(stdout.trim().split('\n').pop()));
    });
  });
}

const expected = strings.map((s) => (s.isWellFormed()
  ? { resource: true }
  : { error: 'InvalidArgumentError', argument: 'resource', notWellFormed: true }));

test('lone surrogates are refused where the host has String.prototype.isWellFormed', async () => {
  assert.deepEqual(await run(''), expected);
});

test('and where it has not (the scan in codec.mjs), exactly the same strings', async () => {
  assert.deepEqual(await run("delete String.prototype.isWellFormed; if ('isWellFormed' in String.prototype) throw new Error('still there');\n"), expected);
});
