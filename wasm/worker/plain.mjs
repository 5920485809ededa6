// A plain-JavaScript Durable Object speaking the same protocol as the Go
// Worker, for benchmarks only (scripts/bench-service): it parses the same
// JSON, does the same storage read and write per call, and answers the same
// shapes. It checks far less than the Go handler and has no replay cache;
// do not deploy it.
export default {
  async fetch(request, env) {
    if (request.method !== "POST") return json(405, { error: { code: "method_not_allowed", message: "POST" } });
    const text = await request.text();
    let body;
    try {
      body = JSON.parse(text);
    } catch {
      return json(400, { error: { code: "malformed_json", message: "invalid JSON" } });
    }
    if (typeof body?.resource !== "string" || body.resource === "") {
      return json(400, { error: { code: "invalid_value", message: "resource" } });
    }
    const stub = env.PLAIN.get(env.PLAIN.idFromName(body.resource));
    return stub.fetch(new Request(request.url, { method: "POST", headers: request.headers, body: text }));
  },
};

function json(status, value) {
  return new Response(JSON.stringify(value), {
    status,
    headers: { "content-type": "application/json", "cache-control": "no-store" },
  });
}

function secret() {
  const b = new Uint8Array(32);
  crypto.getRandomValues(b);
  return btoa(String.fromCharCode(...b)).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

export class PlainLeaseObject {
  constructor(state, env) {
    this.storage = state.storage;
    this.ttl = Number(env.LEASE_TTL_MS ?? 30000);
    this.states = new Map();
  }

  async load(resource) {
    let st = this.states.get(resource);
    if (!st) {
      const raw = await this.storage.get("lease-fence/state/" + resource);
      st = raw ? JSON.parse(raw) : { resource, issuedFence: 0, lastMillis: 0 };
      this.states.set(resource, st);
    }
    return st;
  }

  async save(st) {
    await this.storage.put("lease-fence/state/" + st.resource, JSON.stringify(st));
    this.states.set(st.resource, st);
  }

  async fetch(request) {
    const op = new URL(request.url).pathname;
    const m = JSON.parse(await request.text());
    const st = await this.load(m.resource);
    const now = Date.now();
    const cur = st.lease;
    const live = cur && now < cur.expiresAt;
    if (op === "/v1/acquire") {
      if (live && cur.requestId === m.requestId) return json(200, { ok: true, grant: this.grant(m, cur) });
      if (live) return json(200, { ok: false, heldBy: cur.holderId, retryAfterMillis: cur.expiresAt - now });
      const fence = st.issuedFence + 1;
      const lease = { requestId: m.requestId, holderId: m.holderId, fence, secret: secret(), expiresAt: now + this.ttl };
      await this.save({ ...st, issuedFence: fence, lastMillis: now, lease });
      return json(200, { ok: true, grant: this.grant(m, lease) });
    }
    const mine = live && cur.holderId === m.holderId && cur.fence === m.fence;
    if (mine && cur.secret !== m.secret) return json(403, { error: { code: "wrong_secret", message: "secret" } });
    if (!mine) return json(200, { ok: false, reason: "expired" });
    if (op === "/v1/renew") {
      const lease = { ...cur, expiresAt: now + this.ttl };
      await this.save({ ...st, lastMillis: now, lease });
      return json(200, { ok: true, grant: this.grant(m, lease) });
    }
    if (op === "/v1/release") {
      const { lease: _, ...rest } = st;
      await this.save({ ...rest, lastMillis: now, released: { requestId: m.requestId, holderId: m.holderId, fence: m.fence, secret: m.secret } });
      return json(200, { ok: true });
    }
    return json(404, { error: { code: "not_found", message: op } });
  }

  grant(m, lease) {
    return {
      requestId: m.requestId,
      resource: m.resource,
      holderId: lease.holderId,
      fence: lease.fence,
      ttlMillis: this.ttl,
      coordinatorExpiresAt: { millis: lease.expiresAt, domain: "coordinator" },
      secret: lease.secret,
    };
  }
}
