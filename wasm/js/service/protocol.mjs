// The service's protocol as the client speaks it: the bodies it sends, the
// request ids and secrets in them, and the reading of the answers (each
// checked for the shape its call answers with).
import { InvalidArgumentError } from '../errors.mjs';
import { LeaseServiceError } from './errors.mjs';

const MAX_REPLY_BYTES = 1 << 20;

/**
 * The body of an acquisition or a renewal: the request begun for it (a
 * renewal's with its fence) and the secret the client chose at the
 * acquisition. The coordinator keeps only the secret's hash and never sends
 * it back; renew and release present it again.
 */
export function requestBody(request, secret, value) {
  const body = {
    requestId: request.requestId,
    resource: request.resource,
    holderId: request.holderId,
    sentAt: { millis: request.sentAt.millis, domain: request.sentAt.domain },
    kind: request.kind,
  };
  if (request.kind === 'renew') body.fence = request.fence;
  body.secret = secret;
  if (value !== undefined && value !== '') body.value = value;
  return body;
}

export function randomBytes(n) {
  const b = new Uint8Array(n);
  globalThis.crypto.getRandomValues(b);
  return b;
}

export function base64url(bytes) {
  let s = '';
  for (const c of bytes) s += String.fromCharCode(c);
  return btoa(s).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

export function hex(bytes) {
  let s = '';
  for (const c of bytes) s += c.toString(16).padStart(2, '0');
  return s;
}

// The protocol's bounds (service/wire: MaxPrefixBytes, MaxListLimit).
export const MAX_PREFIX_BYTES = 1024;
const MAX_LIST_LIMIT = 1000;

export function utf8Length(s) {
  return new TextEncoder().encode(s).length;
}

// listBody is the body of a list, its options checked.
export function listBody(prefix, cursor, limit, waiters) {
  const body = {};
  if (prefix !== undefined) {
    if (typeof prefix !== 'string' || utf8Length(prefix) > MAX_PREFIX_BYTES) {
      throw new InvalidArgumentError(`lease-fence: options.prefix must be a string of at most ${MAX_PREFIX_BYTES} bytes`, 'options.prefix');
    }
    if (prefix !== '') body.prefix = prefix;
  }
  if (cursor !== undefined) {
    if (typeof cursor !== 'string' || cursor === '') throw new InvalidArgumentError('lease-fence: options.cursor must be a cursor a list answered', 'options.cursor');
    body.cursor = cursor;
  }
  if (limit !== undefined) {
    if (!Number.isInteger(limit) || limit < 1 || limit > MAX_LIST_LIMIT) {
      throw new InvalidArgumentError(`lease-fence: options.limit must be a whole number from 1 to ${MAX_LIST_LIMIT}`, 'options.limit');
    }
    body.limit = limit;
  }
  if (waiters !== undefined) {
    if (typeof waiters !== 'boolean') throw new InvalidArgumentError('lease-fence: options.waiters must be a boolean', 'options.waiters');
    if (waiters) body.waiters = true;
  }
  return body;
}

const isFence = (v) => Number.isSafeInteger(v) && v >= 0;

// parseList reads a list's answer: { ok: true, page } or undefined.
function parseList(v) {
  if (v.ok !== true || !Array.isArray(v.leases) || (v.cursor !== undefined && typeof v.cursor !== 'string')) return undefined;
  for (const l of v.leases) {
    if (typeof l !== 'object' || l === null || typeof l.resource !== 'string' || typeof l.holderId !== 'string' || !isFence(l.fence) ||
      typeof l.remainingMillis !== 'number' || !Number.isInteger(l.waiters)) return undefined;
    Object.freeze(l);
  }
  const page = { leases: Object.freeze(v.leases) };
  if (v.cursor !== undefined) page.cursor = v.cursor;
  return { ok: true, page: Object.freeze(page) };
}

// parseReply returns the answer in text if it has one of the shapes op
// answers with, or undefined.
export function parseReply(op, text) {
  let v;
  try {
    v = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v) || typeof v.ok !== 'boolean') return undefined;
  if (op === 'list') return parseList(v);
  if (op === 'renewals') return parseRenewals(v);
  if (op === 'inspect') {
    if (v.ok !== true) return undefined;
    if (v.held === true) {
      if (typeof v.holderId !== 'string' || !isFence(v.fence) || v.fence === 0 || typeof v.remainingMillis !== 'number' || !Number.isFinite(v.remainingMillis)) return undefined;
      if (v.value !== undefined && typeof v.value !== 'string') return undefined;
      const st = { held: true, holderId: v.holderId, fence: v.fence, remainingMillis: v.remainingMillis };
      if (v.value !== undefined) st.value = v.value;
      return { ok: true, status: Object.freeze(st) };
    }
    if (v.held !== false || !isFence(v.lastFence)) return undefined;
    return { ok: true, status: Object.freeze({ held: false, lastFence: v.lastFence }) };
  }
  if (op === 'revoke') {
    if (v.ok !== true) return undefined;
    const r = v.revoked;
    if (typeof r === 'object' && r !== null && typeof r.holderId === 'string' && isFence(r.fence) && r.fence > 0) {
      return { ok: true, revoked: Object.freeze({ holderId: r.holderId, fence: r.fence }) };
    }
    if (typeof v.removedWaiter === 'string' && v.removedWaiter !== '') return { ok: true, revoked: Object.freeze({ removedWaiter: v.removedWaiter }) };
    return undefined;
  }
  if (v.ok) {
    if (op === 'release' || op === 'proclaim') return { ok: true };
    if (typeof v.grant !== 'object' || v.grant === null || Array.isArray(v.grant)) return undefined;
    return { ok: true, grant: v.grant };
  }
  if (v.reason === 'revoked') return { ok: false, reason: 'revoked' };
  if (op === 'acquire') {
    if (typeof v.heldBy !== 'string' || typeof v.retryAfterMillis !== 'number') return undefined;
    return { ok: false, heldBy: v.heldBy, retryAfterMillis: v.retryAfterMillis };
  }
  if (v.reason !== 'expired') return undefined;
  return { ok: false, reason: 'expired' };
}

// parseError turns a non-200 answer into a LeaseServiceError: the service's
// {"error": {"code", "message"}} when it is one, http_<status> otherwise.
// parseRenewals reads the answer to a batch of renewals: { ok: true,
// results }, each result a renew's reply (parseReply's) or { error } (a
// LeaseServiceError with the code, message and status the renewal alone
// would have been refused with); undefined if it is not one.
function parseRenewals(v) {
  if (v.ok !== true || !Array.isArray(v.results)) return undefined;
  const results = [];
  for (const r of v.results) {
    if (typeof r !== 'object' || r === null || Array.isArray(r)) return undefined;
    const e = r.error;
    if (e !== undefined) {
      if (typeof e !== 'object' || e === null || typeof e.code !== 'string' || typeof e.message !== 'string' || !Number.isInteger(e.status)) return undefined;
      results.push({ error: new LeaseServiceError(`lease-fence: renew: ${e.code} (${e.status}): ${e.message}`, { code: e.code, status: e.status, attempts: 1 }) });
      continue;
    }
    const reply = parseReply('renew', JSON.stringify(r));
    if (reply === undefined) return undefined;
    results.push(reply);
  }
  return { ok: true, results };
}

export function parseError(op, status, text, attempts) {
  let code, message;
  try {
    const v = JSON.parse(text);
    if (typeof v?.error?.code === 'string' && v.error.code !== '') {
      code = v.error.code;
      message = typeof v.error.message === 'string' ? v.error.message : '';
    }
  } catch {
    // not the service's error shape
  }
  if (code === undefined) {
    return new LeaseServiceError(`lease-fence: ${op}: unexpected answer ${status}: ${short(text)}`, { code: `http_${status}`, status, attempts });
  }
  return new LeaseServiceError(`lease-fence: ${op}: ${code} (${status}): ${message}`, { code, status, attempts });
}

// readBody reads at most MAX_REPLY_BYTES of res.
export async function readBody(res) {
  if (!res.body) return '';
  const reader = res.body.getReader();
  const chunks = [];
  let n = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    n += value.byteLength;
    if (n > MAX_REPLY_BYTES) {
      await reader.cancel().catch(() => {});
      throw new Error(`reply over ${MAX_REPLY_BYTES} bytes`);
    }
    chunks.push(value);
  }
  const all = new Uint8Array(n);
  let at = 0;
  for (const c of chunks) {
    all.set(c, at);
    at += c.byteLength;
  }
  return new TextDecoder().decode(all);
}

function short(s) {
  return JSON.stringify(s.length > 200 ? `${s.slice(0, 200)}…` : s);
}
