import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';

// The consumer folder has only lease-fence installed; the plugin comes from
// the repository's node_modules (LEASE_FENCE_REPO).
const repo = createRequire(`${process.env.LEASE_FENCE_REPO}/`);
const { nodeResolve } = await import(repo.resolve('@rollup/plugin-node-resolve'));

// Rollup does not copy assets named by new URL(…, import.meta.url): this
// plugin emits lease-fence.wasm beside the bundle, where the module looks.
const wasm = {
  name: 'emit-lease-fence-wasm',
  generateBundle() {
    const path = createRequire(import.meta.url).resolve('lease-fence/lease-fence.wasm');
    this.emitFile({ type: 'asset', fileName: 'lease-fence.wasm', source: readFileSync(path) });
  },
};

export default {
  input: 'browser-default.mjs',
  output: { dir: 'out/rollup', format: 'es', inlineDynamicImports: true },
  plugins: [nodeResolve({ browser: true }), wasm],
};
