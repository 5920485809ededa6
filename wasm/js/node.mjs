// lease-fence for Node, Deno and Bun (the "node" export condition): reads
// lease-fence.wasm from beside this file with node:fs at import.
import './manual.mjs';
import { readFile } from 'node:fs/promises';
import { init } from './lease-fence.mjs';

// init takes the promise, so a failed read rejects the import with a
// LeaseFenceError that names the file.
await init(readFile(new URL('./lease-fence.wasm', import.meta.url)));

export * from './lease-fence.mjs';
