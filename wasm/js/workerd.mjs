// lease-fence for Cloudflare Workers (the "workerd" export condition). The
// wasm is imported as a module, which wrangler and workerd compile ahead of
// time (Workers may not compile WebAssembly from bytes at run time). Workers
// also forbid what starting the Go runtime does (timers, random numbers) at
// import, so nothing starts here: `await init()` inside a handler, before
// the first call, starts it from this module.
import { init as start } from './api.mjs';
import wasm from './lease-fence.wasm';

export * from './api.mjs';

/** init(source) of the API, from this entry's wasm module when source is not given. */
export function init(source) {
  return start(source ?? wasm);
}
