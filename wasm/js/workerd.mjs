// lease-fence for Cloudflare Workers (the "workerd" export condition): the
// wasm is imported as a module, which wrangler and workerd compile ahead of
// time (Workers may not compile WebAssembly from bytes at run time).
import './manual.mjs';
import wasm from './lease-fence.wasm';
import { init } from './lease-fence.mjs';

await init(wasm);

export * from './lease-fence.mjs';
