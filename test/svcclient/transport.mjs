// The transport the svcclient suite runs on: SVCCLIENT_TRANSPORT=node (the
// default: node:http and node:https, as LeaseServiceClient picks on Node)
// or fetch (globalThis.fetch, as in browsers, Workers, Deno and Bun).
// `make test-svcclient` runs the suite once with each. The tests and the
// child processes they start (which inherit the variable) make their
// clients with this module's LeaseServiceClient, which asks for that
// transport, and wrap `send` where they wrap what the client sends with.
import { LeaseServiceClient as Base } from 'lease-fence/service-client';
import { nodeModules, nodeSender } from '../../wasm/js/service/node-http.mjs';

export const TRANSPORT = process.env.SVCCLIENT_TRANSPORT || 'node';
if (TRANSPORT !== 'node' && TRANSPORT !== 'fetch') throw new Error(`SVCCLIENT_TRANSPORT must be node or fetch, not ${JSON.stringify(TRANSPORT)}`);
const mods = nodeModules();
if (TRANSPORT === 'node' && mods === undefined) throw new Error('SVCCLIENT_TRANSPORT=node, but this Node has no process.getBuiltinModule');

/**
 * What the client under test sends with, fetch-shaped: the node transport's
 * sender (with agent, an http(s).Agent, if given) or globalThis.fetch. A
 * test that records or injects faults wraps it and passes the wrapper as
 * options.fetch, so its bytes still go over the transport under test.
 */
export function sender(agent) {
  if (TRANSPORT === 'node') return nodeSender(mods, agent);
  if (agent !== undefined) throw new Error('an agent is for the node transport');
  return globalThis.fetch;
}

/** The shared sender of the transport under test (no agent of its own). */
export const send = sender();

/**
 * LeaseServiceClient on the transport under test: options without fetch
 * or transport get transport: TRANSPORT. Everything else is the class's.
 */
export class LeaseServiceClient extends Base {
  constructor(options) {
    const plain = typeof options === 'object' && options !== null && !Array.isArray(options);
    super(plain && !Object.hasOwn(options, 'fetch') && !Object.hasOwn(options, 'transport') ? { ...options, transport: TRANSPORT } : options);
  }
}
