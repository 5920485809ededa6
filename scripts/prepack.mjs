// npm pack and npm publish run this first (package.json "prepack"): it
// writes wasm/js/gate-texts.mjs (scripts/gate-texts.mjs: the gates' scripts
// and statements from the files Go embeds), and the package ships two more
// build outputs that git ignores, wasm/js/lease-fence.wasm and
// wasm/js/wasm_exec.mjs (make build-wasm). Packing without them, or with
// a wasm older than the Go it is built from (the sources make build-wasm
// depends on: mk/wasm.mk), would give a package that fails at import or
// runs old code; this refuses instead, and says how to build them.
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const fix = 'run `make build-wasm` in this checkout (it needs Go), then npm pack again';

function mtime(file) {
  try {
    return statSync(join(root, file)).mtimeMs;
  } catch (e) {
    if (e.code === 'ENOENT') return undefined;
    throw e;
  }
}

// goSources lists the non-test .go files under dir (relative to root).
function goSources(dir) {
  if (!existsSync(join(root, dir))) return [];
  return readdirSync(join(root, dir), { recursive: true }).filter((f) => f.endsWith('.go') && !f.endsWith('_test.go')).map((f) => join(dir, f));
}

// In a checkout (the texts' sources are there), write the gate texts.
if (existsSync(join(root, 'gates/sqlfence/statements.sql'))) (await import('./gate-texts.mjs')).write(root);

const problems = [];
const built = {
  'wasm/js/lease-fence.wasm': ['go.mod', ...goSources('core'), ...goSources('wasm/lib')],
  'wasm/js/wasm_exec.mjs': ['scripts/wasm-exec-module.mjs'],
};
for (const [file, sources] of Object.entries(built)) {
  const at = mtime(file);
  if (at === undefined) {
    problems.push(`${file} is missing`);
    continue;
  }
  const newer = sources.filter((s) => (mtime(s) ?? 0) > at);
  if (newer.length > 0) problems.push(`${file} is older than ${newer.slice(0, 3).join(', ')}${newer.length > 3 ? ` and ${newer.length - 3} more` : ''}`);
}
if (problems.length > 0) {
  console.error(`lease-fence: npm pack refused: ${problems.join('; ')}: ${fix}.`);
  process.exit(1);
}
