// esbuild for Node: lease-fence/init, with the .wasm's bytes embedded in the
// bundle by esbuild's binary loader, and the service client (imported after
// lease-fence/init, so that its 'lease-fence' reads no file at import). The
// bundle runs with no node_modules and no .wasm beside it.
import { report, serviceRoundTrip } from './roundtrip.mjs';
import * as lf from 'lease-fence/init';
import wasm from 'lease-fence/lease-fence.wasm';
import * as sc from 'lease-fence/service-client';

console.log(JSON.stringify({
  ...(await report(async () => {
    await lf.init(wasm);
    return lf;
  })),
  ...(await serviceRoundTrip(lf, sc)),
}));
