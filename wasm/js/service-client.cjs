// lease-fence/service-client from CommonJS (the "require" export
// condition). require() cannot wait for the WebAssembly to load (the ES
// module waits at import, which makes require() of it fail with
// ERR_REQUIRE_ASYNC_MODULE or ERR_REQUIRE_ESM), so this entry exports one
// function: `const sc = await require('lease-fence/service-client').load()`
// resolves to the service client's namespace (LeaseServiceClient and its
// error classes). load() reads lease-fence.wasm from beside the package;
// load(source) starts the library from source instead, as
// require('lease-fence').load(source) does. Either way the library is the
// one `await require('lease-fence').load()` gives: one instance, one set of
// classes.
'use strict';

exports.load = async function load(source) {
  if (source !== undefined) {
    const lf = await import('./init.mjs');
    await lf.init(source);
  }
  return import('./service-client.mjs');
};
