// The Cloudflare Worker entry. Go does the work (main_js.go); this file only
// starts one Go instance per isolate and defines the Durable Object class,
// which the runtime requires to be a JavaScript class.
import "./build/wasm_exec.js"; // Go's wasm_exec.js as patched by syumai/workers
import mod from "./build/app.wasm";

// syumai/workers calls this to turn a thrown JS error into a Go error.
globalThis.tryCatch = (fn) => {
  try {
    return { result: fn() };
  } catch (error) {
    return { error };
  }
};

let binding; // the functions the running Go instance registered
let generation = 0; // bumped each time a Go instance starts
let starting; // promise of the running instance

// start runs the Go program once per isolate and keeps it: the stock glue
// starts a new instance for every request, which costs milliseconds each.
function start(env) {
  if (!starting) {
    starting = new Promise((resolve, reject) => {
      const b = {};
      const go = new Go();
      const instance = new WebAssembly.Instance(mod, {
        ...go.importObject,
        workers: {
          ready: () => {
            binding = b;
            generation++;
            resolve();
          },
        },
      });
      // The request context is left out on purpose: the instance outlives
      // the request that started it, and only env (the bindings) is used.
      go.run(instance, { env, binding: b }).then(
        () => {
          starting = undefined; // the program exited: start afresh next time
          reject(new Error("lease-fence: the Go instance exited"));
        },
        (err) => {
          starting = undefined;
          reject(err);
        },
      );
    });
  }
  return starting;
}

// How often an object with a call open or wake-ups pending runs those that
// are due (see LeaseObject.fetch).
const TICK_MS = 10;

// The handler refuses bodies over this many bytes; a body declared larger is
// not read at all.
const MAX_BODY = 64 * 1024;

// call hands a request to a Go handler as strings (cheaper than streaming it
// through syumai's Request conversion) and turns the answer into a Response.
async function call(serve, request, forwarded = FORWARDED) {
  const declared = request.headers.get("content-length");
  const length = declared !== null && Number.isSafeInteger(Number(declared)) ? Number(declared) : -1;
  const body = length > MAX_BODY ? "" : await request.text();
  // The other headers Go reads: the token, and those of CORS (an object:
  // the caller the front found).
  const extra = {};
  for (const name of forwarded) {
    const v = request.headers.get(name);
    if (v !== null) extra[name] = v;
  }
  const out = await serve(request.method, request.url, request.headers.get("content-type") ?? "", length, body, extra);
  // A preflight's answer (204) has no body.
  return new Response(out.status === 204 ? null : out.body, { status: out.status, headers: out.headers });
}

const FORWARDED = ["authorization", "origin", "access-control-request-method", "access-control-request-headers"];
// Only the front calls an object; it names the caller it found.
const OBJECT_FORWARDED = [...FORWARDED, "x-lease-fence-caller"];

export default {
  async fetch(request, env) {
    await start(env);
    return call(binding.frontFetch, request);
  },
};

// closer is a FinalizationRegistry that closes the Go side of the objects
// it is given (binding[close](handle)) once the runtime lets them go,
// unless that Go instance has been replaced since.
const closer = (close) =>
  new FinalizationRegistry(({ gen, handle }) => {
    if (gen === generation) binding[close](handle);
  });

// GoObject is a Durable Object whose work Go does: its Go side is opened
// (binding[open](storage) returns its handle) once per Go instance, and
// closed by registry when the runtime lets the object go.
class GoObject {
  constructor(state, env) {
    this.state = state;
    this.env = env;
    this.gen = 0;
    this.handle = 0;
  }

  // goHandle starts the Go instance if needed and returns this object's
  // handle in it.
  async goHandle(open, registry) {
    await start(this.env);
    if (this.gen !== generation) {
      this.handle = binding[open](this.state.storage);
      if (this.handle instanceof Error) throw this.handle;
      this.gen = generation;
      registry.register(this, { gen: this.gen, handle: this.handle });
    }
    return this.handle;
  }
}

const released = closer("closeObject");

// LeaseObject is the Durable Object of one resource. Its storage holds the
// resource's fence counter and lease; Go reads and writes it.
export class LeaseObject extends GoObject {
  constructor(state, env) {
    super(state, env);
    this.open = 0; // calls in progress
    this.tick = undefined;
  }

  async fetch(request) {
    const handle = await this.goHandle("openObject", released);
    // While the object has a call open (a waiting call may be open for a
    // minute) or wake-ups pending (a kept place's end, an expiry with
    // waiters), its own interval enters Go every TICK_MS to run the
    // object's due wake-ups: they are not Go timers but the object's own
    // (objectTimers in main_js.go), run only from the object's context,
    // because a decision they start writes the object's storage, which
    // refuses calls made from another object's or request's context.
    this.open++;
    if (this.tick === undefined) {
      this.tick = setInterval(() => {
        // this.handle: a Go instance started afresh meanwhile numbers its
        // objects anew, and the old handle may be another object's.
        const pending = this.gen === generation && binding.tick(this.handle);
        if (!pending && this.open === 0) {
          clearInterval(this.tick);
          this.tick = undefined;
        }
      }, TICK_MS);
    }
    try {
      return await call((...args) => binding.objectFetch(handle, ...args), request, OBJECT_FORWARDED);
    } finally {
      this.open--;
    }
  }
}

const releasedTokens = closer("closeToken");

// TokenObject is the Durable Object of one token (named after it): the
// places of the token's live leases, for its maxLeases. Only the objects
// of resources call it, and only for tokens that have a maxLeases.
export class TokenObject extends GoObject {
  async fetch(request) {
    const handle = await this.goHandle("openToken", releasedTokens);
    const out = await binding.tokenFetch(handle, await request.text());
    return new Response(out.body, { status: out.status, headers: { "content-type": "application/json" } });
  }
}
