// lease-fence from CommonJS (the "require" export condition). require()
// cannot wait for the WebAssembly to load, so this entry exports one
// function: `const lf = await require('lease-fence').load()` imports the ES
// module and resolves to its namespace, every export of `lease-fence`.
// load() reads lease-fence.wasm from beside this file; load(source) starts
// it from source instead (see init in lease-fence.d.ts).
'use strict';

exports.load = async function load(source) {
  if (source === undefined) return import('./node.mjs');
  const lf = await import('./init.mjs');
  await lf.init(source);
  return lf;
};
