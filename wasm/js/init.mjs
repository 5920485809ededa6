// lease-fence/init: the library without loading at import. Call
// `await init(source)` with the wasm (a URL, a Response, bytes or a
// WebAssembly.Module) before anything else; see docs/js.md.
import './manual.mjs';

export * from './lease-fence.mjs';
