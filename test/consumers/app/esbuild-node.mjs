// esbuild for Node: lease-fence/init, with the .wasm's bytes embedded in the
// bundle by esbuild's binary loader. The bundle runs with no node_modules.
import { report } from './roundtrip.mjs';
import * as lf from 'lease-fence/init';
import wasm from 'lease-fence/lease-fence.wasm';

console.log(JSON.stringify(await report(async () => {
  await lf.init(wasm);
  return lf;
})));
