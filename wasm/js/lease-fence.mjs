// lease-fence: leases whose holders can be proven wrong.
//
// The package's browser and default entry (and the module to serve to a
// page without a build step): the API of api.mjs, with lease-fence.wasm
// loaded from beside this file once, at import, with top-level await (read
// from disk on file: URLs, fetched otherwise: serve it as application/wasm
// for streaming compilation). The other entries load it their own way:
// node.mjs reads it with node:fs, workerd.mjs imports it as a module, and
// init.mjs leaves it to the app (see docs/js.md). Every function and method
// is synchronous once init has finished.
//
// The modules, one job each: runtime.mjs (the instance: init, handles, every
// call into Go), loader.mjs (getting and compiling the wasm), codec.mjs
// (arguments into Go, results out), api.mjs (clocks, coordinator, client,
// lease), gate.mjs (FenceGate), errors.mjs (the error classes, no wasm,
// made by error-class.mjs).
import { init } from './api.mjs';

export * from './api.mjs';

// The Go runtime's glue, which init waits for, is imported here as well as
// in runtime.mjs: a bundler that inlines dynamic imports (Rollup with
// inlineDynamicImports) then runs its module before this top-level await
// instead of after it. Its failure is init's to report.
await import('./wasm_exec.mjs').catch(() => {});
await init();
