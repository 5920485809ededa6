// esbuild for the browser: lease-fence/init, with the .wasm copied by
// esbuild's file loader and its URL passed to init.
import { report } from './roundtrip.mjs';
import * as lf from 'lease-fence/init';
import wasmURL from 'lease-fence/lease-fence.wasm';
import { LeaseServiceClient } from 'lease-fence/service-client';

window.result = {
  ...(await report(async () => {
    await lf.init(new URL(wasmURL, import.meta.url));
    return lf;
  })),
  process: typeof process,
  serviceClient: typeof LeaseServiceClient,
};
