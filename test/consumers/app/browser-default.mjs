// webpack 5, Vite and Rollup bundles for the browser: the package's
// "browser" entry, which loads lease-fence.wasm from beside itself (webpack
// and Vite copy it; the Rollup config emits it).
import { report } from './roundtrip.mjs';

window.result = { ...(await report(() => import('lease-fence'))), process: typeof process };
