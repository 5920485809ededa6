// CommonJS: require() gives load(), which resolves to the library; the
// service client's require() gives its own load().
const { load } = require('lease-fence');
const serviceClient = require('lease-fence/service-client');

import('./roundtrip.mjs').then(async ({ report, serviceRoundTrip }) => {
  const out = await report(() => load());
  const lf = await load();
  const sc = await serviceClient.load();
  console.log(JSON.stringify({ ...out, ...(await serviceRoundTrip(lf, sc)), sameLibrary: Object.getPrototypeOf(sc.LeaseServiceError) === lf.LeaseFenceError }));
});
