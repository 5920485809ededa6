// The service client's error classes, and isLeaseLost: plain JavaScript, no
// WebAssembly. Their base is the library's LeaseFenceError (errors.mjs, which
// lease-fence re-exports), so `instanceof LeaseFenceError` holds for them.
import { errorClass, named } from '../error-class.mjs';
import { LeaseFenceError } from '../errors.mjs';

export { named };

// Every class takes (message, options), as the library's errors do: options
// is Error's ({ cause }) plus the class's own fields (error-class.mjs).
const lease = { resource: '', holderId: '', fence: 0 };

/**
 * The coordinator refused a call, or answered in no usable way. `code` is the
 * service's stable error code (docs/service.md) or one of the client's own:
 * 'no_answer', 'bad_reply', 'timeout', 'http_<status>', 'tls_certificate'
 * (the server's certificate cannot be verified or is not for its host: not
 * retried). `status` is the HTTP status of the answer (0 when there was
 * none), `attempts` how many times the request was sent.
 */
export const LeaseServiceError = errorClass(LeaseFenceError, 'LeaseServiceError', { code: (v) => String(v ?? ''), status: 0, attempts: 0 }, {
  /**
   * Whether the same call may succeed later: a 5xx, 408, 429, no answer, or
   * a timeout. Another 4xx never will, nor a certificate that cannot be
   * verified.
   */
  get retryable() {
    if (this.code === 'tls_certificate') return false;
    return this.status === 0 || this.status >= 500 || this.status === 408 || this.status === 429;
  },
});

/**
 * An acquisition was denied: the resource is held by a live lease (the
 * caller's own included); retryAfterMillis is how long that lease has left,
 * by the coordinator's clock.
 */
export const LeaseDeniedError = errorClass(LeaseFenceError, 'LeaseDeniedError', { code: () => 'denied', resource: '', heldBy: '', retryAfterMillis: 0 });

/**
 * A renewal or release found the lease no longer current: it ran out, was
 * released or was reassigned; `revoked` is true when an operator revoked it
 * (POST /v1/revoke), false otherwise.
 */
export const LeaseExpiredError = errorClass(LeaseFenceError, 'LeaseExpiredError', { code: () => 'expired', ...lease, revoked: (v) => v === true });

/**
 * A held lease was lost: the coordinator refused a renewal (the lease is
 * over there; `cause` is that LeaseExpiredError), or no renewal succeeded
 * before the holder's deadline (`cause` is the last renewal's failure, if
 * one failed). The reason of a HeldLease's signal, and part of what
 * withLease rejects with when the lease was lost while its callback ran.
 * `deadline` is the holder's deadline of the last lease it had (its clock's
 * domain): the work had to stop by then.
 */
export const LeaseLostError = errorClass(LeaseFenceError, 'LeaseLostError', { code: () => 'lease_lost', ...lease, deadline: null });

/**
 * A held lease was revoked by an operator (POST /v1/revoke): its renewal
 * was answered "revoked". A LeaseLostError (its code too, 'lease_lost';
 * isLeaseLost is true); the reason of the HeldLease's signal.
 */
export class LeaseRevokedError extends LeaseLostError {}
named(LeaseRevokedError, 'LeaseRevokedError');

/** The reason of a HeldLease's signal once release() ended the hold. */
export const LeaseReleasedError = errorClass(LeaseFenceError, 'LeaseReleasedError', { code: () => 'released', ...lease });

/**
 * Whether err is, or holds, a LeaseLostError: err itself, an
 * AggregateError's errors (what withLease rejects with when the callback
 * failed and the lease was lost), a SuppressedError's error and suppressed
 * (`await using`), or a cause, to any depth (as Go's errors.Is(err,
 * client.ErrLeaseLost)).
 */
export function isLeaseLost(err) {
  const seen = new Set();
  const walk = (e) => {
    if (typeof e !== 'object' || e === null || seen.has(e)) return false;
    seen.add(e);
    if (e instanceof LeaseLostError) return true;
    if (e instanceof AggregateError && Array.isArray(e.errors) && e.errors.some(walk)) return true;
    if (typeof SuppressedError === 'function' && e instanceof SuppressedError && (walk(e.error) || walk(e.suppressed))) return true;
    return 'cause' in e && walk(e.cause);
  };
  return walk(err);
}

// expired is the LeaseExpiredError of a renewal, release or proclaim (what)
// of token that the coordinator refused; reason 'revoked' says an operator
// ended it.
export function expired(token, what, reason) {
  const { resource, holderId, fence } = token;
  if (reason === 'revoked') {
    return new LeaseExpiredError(`lease-fence: ${what} of ${JSON.stringify(resource)} fence ${fence}: the lease was revoked by an operator`,
      { resource, holderId, fence, revoked: true });
  }
  return new LeaseExpiredError(`lease-fence: ${what} of ${JSON.stringify(resource)} fence ${fence}: the lease is no longer current`, { resource, holderId, fence });
}
