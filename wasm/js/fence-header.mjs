// The Lease-Fence header that fence-proxy (cmd/fence-proxy, Go's
// gates/httpfence) reads from every write it gates:
//
//   Lease-Fence: resource="deploy-slot", holder="agent-a", fence=7
//
// an RFC 8941 structured-field dictionary. leaseFenceHeader writes it for a
// token, byte for byte as Go's httpfence.FormatHeader does; staleFenceError
// reads the proxy's refusal of a stale write back as the StaleFenceError
// the in-memory gate throws; isStaleFence (lease-fence's) recognises it
// however it is wrapped. Exported from lease-fence/service-client; the API
// is documented in fence-header.d.ts.
import { InvalidArgumentError } from './errors.mjs';
import { checkToken, rejection, staleError } from './gate-common.mjs';

export { isStaleFence } from './errors.mjs';

export const LEASE_FENCE_HEADER = 'Lease-Fence';

// Fences from 10^15 to 2^53-1 cannot be sent (a coordinator reaches them
// after 10^15 grants).
export const MAX_HEADER_FENCE = 999_999_999_999_999;

const HEX = '0123456789abcdef';
const utf8 = new TextEncoder();

// An id as an RFC 8941 string when it is printable ASCII, else as an RFC
// 9651 display string (its UTF-8 bytes, percent-encoded where needed).
function id(s, argument) {
  let printable = true;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x20 || c > 0x7e) { printable = false; break; }
  }
  if (printable) return `"${s.replace(/["\\]/g, '\\$&')}"`;
  if (!s.isWellFormed()) {
    throw new InvalidArgumentError(`lease-fence: ${argument} must be well-formed Unicode (it has a lone surrogate)`, argument);
  }
  let out = '%"';
  for (const b of utf8.encode(s)) {
    out += b < 0x20 || b > 0x7e || b === 0x25 || b === 0x22 ? `%${HEX[b >> 4]}${HEX[b & 15]}` : String.fromCharCode(b);
  }
  return `${out}"`;
}

export function leaseFenceHeader(token) {
  checkToken(token);
  if (token.fence > MAX_HEADER_FENCE) {
    throw new InvalidArgumentError(`lease-fence: token.fence must be at most ${MAX_HEADER_FENCE} to be sent in a header (RFC 8941 integers have 15 digits), got ${token.fence}`, 'token.fence');
  }
  return `resource=${id(token.resource, 'token.resource')}, holder=${id(token.holderId, 'token.holderId')}, fence=${token.fence}`;
}

// staleFenceError: fence-proxy's refusal is a 409 with Lease-Fence-Error:
// stale_fence; the StaleFenceError made for it has the in-memory gate's
// rejection and message. A body already read rejects rather than miss it.
export async function staleFenceError(response) {
  if (response?.status !== 409 || response.headers.get('Lease-Fence-Error') !== 'stale_fence') return null;
  if (response.bodyUsed) {
    throw new InvalidArgumentError('lease-fence: staleFenceError needs the response body unread (the proxy refused a stale write; call it before reading the body)', 'response');
  }
  const r = (await response.clone().json())?.error?.rejection;
  if (!r) throw new InvalidArgumentError('lease-fence: the 409 stale_fence answer has no rejection (is it from fence-proxy?)', 'response');
  return staleError(rejection(r.seq, r.resource, r.refusedHolderId, r.refusedFence, r.admittedHolderId, r.admittedFence));
}
