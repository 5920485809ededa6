// Types for service-client.cjs, the CommonJS entry of
// lease-fence/service-client: one function that loads the library and the
// client (see service-client.d.ts for everything it resolves to).

type ServiceClient = typeof import('lease-fence/service-client', { with: { 'resolution-mode': 'import' } });

/**
 * Loads the WebAssembly and resolves to every export of
 * `lease-fence/service-client`. Without `source`, reads lease-fence.wasm
 * from beside the package; with it, starts from `source` as `init(source)`
 * does.
 */
export declare function load(source?: import('lease-fence', { with: { 'resolution-mode': 'import' } }).WasmSource): Promise<ServiceClient>;
