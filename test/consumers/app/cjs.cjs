// CommonJS: require() gives load(), which resolves to the library.
const { load } = require('lease-fence');

import('./roundtrip.mjs').then(async ({ report }) => {
  console.log(JSON.stringify(await report(() => load())));
});
