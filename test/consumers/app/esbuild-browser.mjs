// esbuild for the browser: lease-fence/init, with the .wasm copied by
// esbuild's file loader and its URL passed to init, and the service client,
// imported once init has resolved (so that its 'lease-fence' fetches nothing
// at import).
import { report } from './roundtrip.mjs';
import * as lf from 'lease-fence/init';
import wasmURL from 'lease-fence/lease-fence.wasm';

const result = await report(async () => {
  await lf.init(new URL(wasmURL, import.meta.url));
  return lf;
});
const { LeaseServiceClient } = await import('lease-fence/service-client');

window.result = {
  ...result,
  process: typeof process,
  serviceClient: typeof LeaseServiceClient,
};
