// lease-fence for Cloudflare Workers (the "workerd" export condition). The
// wasm is imported as a module, which wrangler and workerd compile ahead of
// time (Workers may not compile WebAssembly from bytes at run time). Workers
// also forbid what starting the Go runtime does (timers, random numbers) at
// import, so nothing starts here: `await init()` inside a handler, before
// the first call, starts it from this module.
import { loading } from './loader.mjs';
import './manual.mjs';
import wasm from './lease-fence.wasm';

loading.source = wasm;

export * from './lease-fence.mjs';
