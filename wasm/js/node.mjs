// lease-fence for Node, Deno and Bun (the "node" export condition): reads
// lease-fence.wasm from beside this file with node:fs at import, unless the
// app already called init(source) (as a bundle with the wasm embedded does,
// with no file beside it, before it imports lease-fence/service-client).
import { readFile } from 'node:fs/promises';
import { initUnlessStarted } from './runtime.mjs';

export * from './api.mjs';

// init takes the promise, so a failed read rejects the import with a
// LeaseFenceError that names the file.
await initUnlessStarted(() => readFile(new URL('./lease-fence.wasm', import.meta.url)));
