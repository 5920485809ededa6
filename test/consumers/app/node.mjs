// Node, Deno and Bun: the package's "node" entry, no set-up.
import { report } from './roundtrip.mjs';

const out = await report(() => import('lease-fence'));
const { LeaseServiceClient } = await import('lease-fence/service-client');
console.log(JSON.stringify({ entry: import.meta.resolve('lease-fence').split('/').pop(), ...out, serviceClient: typeof LeaseServiceClient }));
