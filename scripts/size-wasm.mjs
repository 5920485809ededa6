// Size of the library's wasm (raw, gzip -9, brotli) and the Go packages
// linked into it, flagging the heavy ones (fmt, encoding/json, reflect, os),
// then the npm package: the tarball, what it unpacks to, and its files.
// Run by `make bench-js` after `make build-wasm`:
//
//   node scripts/size-wasm.mjs
import { readFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { brotliCompressSync, constants, gzipSync } from 'node:zlib';

const file = new URL('../wasm/js/lease-fence.wasm', import.meta.url);
const bytes = readFileSync(file);
const gz = gzipSync(bytes, { level: 9 }).length;
const br = brotliCompressSync(bytes, { params: { [constants.BROTLI_PARAM_QUALITY]: 11 } }).length;
const kb = (n) => `${(n / 1024).toFixed(0)} KiB (${n} bytes)`;
console.log('wasm/js/lease-fence.wasm');
console.log(`  raw     ${kb(bytes.length)}`);
console.log(`  gzip -9 ${kb(gz)}   budget 800 KB: ${gz <= 800_000 ? 'within' : 'OVER'}`);
console.log(`  brotli  ${kb(br)}`);

const deps = execFileSync('go', ['list', '-deps', './wasm/lib'], {
  cwd: new URL('..', import.meta.url),
  env: { ...process.env, GOOS: 'js', GOARCH: 'wasm' },
  encoding: 'utf8',
}).split('\n').filter(Boolean);
const heavy = ['fmt', 'encoding/json', 'reflect', 'os', 'encoding/binary', 'encoding/hex'];
const linked = heavy.filter((p) => deps.includes(p));
console.log(`  packages linked: ${deps.filter((d) => !d.includes('internal/')).length} (plus runtime internals)`);
console.log(`  heavy packages: ${linked.length ? linked.join(', ') : 'none of ' + heavy.join(', ')}`);

const [pack] = JSON.parse(execFileSync('npm', ['pack', '--dry-run', '--json'], {
  cwd: new URL('..', import.meta.url),
  encoding: 'utf8',
  stdio: ['ignore', 'pipe', 'ignore'],
}));
console.log(`npm package ${pack.name}@${pack.version}`);
console.log(`  tarball  ${kb(pack.size)}`);
console.log(`  unpacked ${kb(pack.unpackedSize)} in ${pack.entryCount} files; without the wasm ${kb(pack.unpackedSize - bytes.length)}`);
for (const f of pack.files.filter((f) => f.path !== 'wasm/js/lease-fence.wasm').sort((a, b) => b.size - a.size)) {
  console.log(`    ${String(f.size).padStart(8)}  ${f.path}`);
}
