// lease-fence for Node, Deno and Bun (the "node" export condition): reads
// lease-fence.wasm from beside this file with node:fs at import, unless the
// app imported lease-fence/init first to call init(source) itself (as a
// bundle with the wasm embedded does, with no file beside it).
import './manual.mjs';
import { readFile } from 'node:fs/promises';
import { loading } from './loader.mjs';
import { init } from './lease-fence.mjs';

// init takes the promise, so a failed read rejects the import with a
// LeaseFenceError that names the file.
if (!loading.byApp) await init(readFile(new URL('./lease-fence.wasm', import.meta.url)));

export * from './lease-fence.mjs';
