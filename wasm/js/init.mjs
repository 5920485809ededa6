// lease-fence/init: the library without loading at import. Call
// `await init(source)` with the wasm (a URL, a Response, bytes or a
// WebAssembly.Module) before anything else; see docs/js.md.
//
// Imported before the other parts of the package (lease-fence/service-client
// imports 'lease-fence'), it also tells their entry not to load the wasm at
// import: the browser entry (manual.mjs) and the node entry (node.mjs, which
// would read lease-fence.wasm from beside a bundle that has none).
import './manual.mjs';
import { loading } from './loader.mjs';

export * from './lease-fence.mjs';

loading.byApp = true;
