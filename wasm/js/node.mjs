// lease-fence for Node, Deno and Bun (the "node" export condition): reads
// lease-fence.wasm from beside this file with node:fs at import.
import './manual.mjs';
import { readFile } from 'node:fs/promises';
import { init } from './lease-fence.mjs';

await init(await readFile(new URL('./lease-fence.wasm', import.meta.url)));

export * from './lease-fence.mjs';
