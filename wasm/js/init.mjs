// lease-fence/init: the library without loading at import. Call
// `await init(source)` with the wasm (a URL, a Response, bytes or a
// WebAssembly.Module) before anything else; see docs/js.md. Importing it
// changes nothing for the other entries: node.mjs (which
// lease-fence/service-client reaches through 'lease-fence' under Node)
// reads nothing once init(source) has been called.
export * from './api.mjs';
