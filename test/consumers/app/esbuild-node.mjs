// esbuild for Node: lease-fence/init, with the .wasm's bytes embedded in the
// bundle by esbuild's binary loader, and the service client, imported once
// init(wasm) has resolved (so that its 'lease-fence' reads no file at
// import). The bundle runs with no node_modules and no .wasm beside it.
import { report, serviceRoundTrip } from './roundtrip.mjs';
import * as lf from 'lease-fence/init';
import wasm from 'lease-fence/lease-fence.wasm';

const result = await report(async () => {
  await lf.init(wasm);
  return lf;
});
const sc = await import('lease-fence/service-client');

console.log(JSON.stringify({
  ...result,
  ...(await serviceRoundTrip(lf, sc)),
}));
