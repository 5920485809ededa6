// Types for lease-fence.cjs, the CommonJS entry: one function that loads the
// ES module (see lease-fence.d.ts for everything it resolves to).

type LeaseFence = typeof import('lease-fence', { with: { 'resolution-mode': 'import' } });

/**
 * Loads the WebAssembly and resolves to every export of `lease-fence`.
 * Without `source`, reads lease-fence.wasm from beside the module; with it,
 * starts from `source` as `init(source)` does.
 */
export declare function load(source?: import('lease-fence', { with: { 'resolution-mode': 'import' } }).WasmSource): Promise<LeaseFence>;
