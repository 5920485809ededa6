// Node, Deno and Bun: the package's "node" entry, no set-up.
import { report, serviceRoundTrip } from './roundtrip.mjs';

const out = await report(() => import('lease-fence'));
const sc = await import('lease-fence/service-client');
const lf = await import('lease-fence');
console.log(JSON.stringify({ entry: import.meta.resolve('lease-fence').split('/').pop(), ...out, ...(await serviceRoundTrip(lf, sc)) }));
