// A Cloudflare Worker: the package's "workerd" entry (wrangler imports the
// .wasm as a compiled module). Workers forbid starting the Go runtime at
// import, so the handler awaits init() first.
import { roundTrip } from '../roundtrip.mjs';
import * as lf from 'lease-fence';
import { LeaseServiceClient } from 'lease-fence/service-client';

export default {
  async fetch() {
    await lf.init();
    return Response.json({ Go: typeof globalThis.Go, fs: typeof globalThis.fs, serviceClient: typeof LeaseServiceClient, ...roundTrip(lf) });
  },
};
