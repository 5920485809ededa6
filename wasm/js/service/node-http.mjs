// The service client's sender on Node: the calls go through node:http and
// node:https with keep-alive agents, not through fetch (undici and its web
// streams cost about twice the CPU per call). The modules are found at run
// time with process.getBuiltinModule, never imported, so a bundle for a
// browser or a Worker does not pull them in; elsewhere (browsers, Workers,
// Deno, Bun, Node before 20.16) the client uses fetch.
//
// What this sends and answers is what the transport asks of a fetch: a
// POST of a string body with headers and an AbortSignal, redirects not
// followed, and an answer { status, body } whose body has getReader()
// (read() and cancel(), the part of a web stream that readBody and the
// watch read). So the transport, its retries, hedges and timeouts are the
// same code on both.
import { InvalidArgumentError } from '../errors.mjs';

// nodeModules returns { http, https } on Node (20.16 and later), undefined
// on every other host: Bun and Deno have process.getBuiltinModule too, and
// a Worker with nodejs_compat may, but there fetch is the host's own.
export function nodeModules() {
  const p = globalThis.process;
  if (typeof p !== 'object' || p === null || typeof p.getBuiltinModule !== 'function') return undefined;
  if (p.versions?.bun !== undefined || p.versions?.deno !== undefined || typeof globalThis.Deno !== 'undefined') return undefined;
  if (globalThis.navigator?.userAgent === 'Cloudflare-Workers') return undefined;
  try {
    const http = p.getBuiltinModule('node:http');
    const https = p.getBuiltinModule('node:https');
    if (typeof http?.request === 'function' && typeof https?.request === 'function') return { http, https };
  } catch {
    // not Node's node:http
  }
  return undefined;
}

// The agents of clients given none: one pair per process, as fetch has one
// dispatcher, so that every client's calls share the kept-alive
// connections. An idle connection is closed after IDLE_MILLIS (before a
// server's idle timeout closes it under a new call); idle ones do not keep
// the process alive (Node unrefs them).
const IDLE_MILLIS = 4000;
let shared;

function sharedAgents(mods) {
  shared ??= {
    http: new mods.http.Agent({ keepAlive: true, scheduling: 'lifo', timeout: IDLE_MILLIS }),
    https: new mods.https.Agent({ keepAlive: true, scheduling: 'lifo', timeout: IDLE_MILLIS }),
  };
  return shared;
}

// agentsOf checks options.agent: an http.Agent or https.Agent (used for the
// base URLs of its protocol), or { http, https } with either or both; the
// shared agents for what it leaves out.
function agentsOf(mods, agent) {
  const def = sharedAgents(mods);
  if (agent === undefined) return def;
  const isAgent = (a) => a instanceof mods.http.Agent;
  if (isAgent(agent)) {
    return agent instanceof mods.https.Agent ? { http: def.http, https: agent } : { http: agent, https: def.https };
  }
  if (typeof agent === 'object' && agent !== null && !Array.isArray(agent)) {
    for (const k of Object.keys(agent)) {
      if (k !== 'http' && k !== 'https') {
        throw new InvalidArgumentError(`lease-fence: options.agent has no key ${JSON.stringify(k)}; give an Agent, or { http, https }`, `options.agent.${k}`);
      }
    }
    if (agent.http !== undefined && (!isAgent(agent.http) || agent.http instanceof mods.https.Agent)) {
      throw new InvalidArgumentError('lease-fence: options.agent.http must be an http.Agent', 'options.agent.http');
    }
    if (agent.https !== undefined && !(agent.https instanceof mods.https.Agent)) {
      throw new InvalidArgumentError('lease-fence: options.agent.https must be an https.Agent', 'options.agent.https');
    }
    return { http: agent.http ?? def.http, https: agent.https ?? def.https };
  }
  throw new InvalidArgumentError('lease-fence: options.agent must be an http.Agent, an https.Agent, or { http, https }', 'options.agent');
}

/**
 * A fetch-shaped sender over node:http and node:https (see the top of this
 * file); mods: nodeModules()'s, agent: options.agent. Used by
 * LeaseServiceClient on Node; tests wrap it as they wrap fetch.
 */
export function nodeSender(mods, agent) {
  const agents = agentsOf(mods, agent);
  return function send(url, init) {
    return request(mods, agents, url, init);
  };
}

function request(mods, agents, url, { method = 'GET', headers = {}, body, signal }) {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const u = new URL(url);
    const secure = u.protocol === 'https:';
    const h = { ...headers };
    if (body !== undefined) h['content-length'] = String(Buffer.byteLength(body));
    let req;
    let res;
    const onAbort = () => {
      const why = signal.reason;
      if (res !== undefined) res.destroy(why);
      req.destroy(why);
      reject(why);
    };
    const done = () => signal?.removeEventListener('abort', onAbort);
    try {
      req = (secure ? mods.https : mods.http).request(u, { method, headers: h, agent: secure ? agents.https : agents.http });
    } catch (e) {
      reject(e);
      return;
    }
    signal?.addEventListener('abort', onAbort, { once: true });
    req.on('error', (e) => {
      done();
      reject(e);
    });
    req.on('response', (r) => {
      res = r;
      r.on('close', done);
      resolve({ status: r.statusCode, headers: r.headers, body: bodyOf(r), text: () => textOf(r) });
    });
    req.end(body);
  });
}

// textOf reads all of res as UTF-8 (what a test's wrapper of the sender
// reads; the client reads through body, within its bound).
async function textOf(res) {
  const chunks = [];
  for await (const c of res) chunks.push(c);
  return Buffer.concat(chunks).toString('utf8');
}

// bodyOf gives an IncomingMessage the reader of a web stream's body:
// read() resolves to { done, value } (value a Buffer, a Uint8Array), and
// rejects with the stream's error; cancel() drops the rest.
function bodyOf(res) {
  return {
    getReader() {
      const it = res[Symbol.asyncIterator]();
      return {
        async read() {
          const { done, value } = await it.next();
          return done ? { done: true, value: undefined } : { done: false, value };
        },
        async cancel() {
          res.destroy();
        },
      };
    },
  };
}
