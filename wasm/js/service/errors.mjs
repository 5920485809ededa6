// The service client's error classes, and isLeaseLost: plain JavaScript, no
// WebAssembly. Their base is the library's LeaseFenceError (errors.mjs, which
// lease-fence re-exports), so `instanceof LeaseFenceError` holds for them.
import { LeaseFenceError } from '../errors.mjs';

export function named(cls, name) {
  Object.defineProperty(cls.prototype, 'name', { value: name, writable: true, configurable: true });
  return cls;
}

// Every class takes (message, options), as the library's errors do: options
// is Error's ({ cause }) plus the class's own fields.

function errorOptions(options) {
  return typeof options === 'object' && options !== null && 'cause' in options ? { cause: options.cause } : undefined;
}

function field(options, key, otherwise) {
  return typeof options === 'object' && options !== null && options[key] !== undefined ? options[key] : otherwise;
}

/**
 * The coordinator refused a call, or answered in no usable way. `code` is the
 * service's stable error code (docs/service.md) or one of the client's own:
 * 'no_answer', 'bad_reply', 'timeout', 'http_<status>', 'tls_certificate'
 * (the server's certificate cannot be verified or is not for its host: not
 * retried).
 */
export class LeaseServiceError extends LeaseFenceError {
  constructor(message, options) {
    super(message, errorOptions(options));
    this.code = String(field(options, 'code', ''));
    /** The HTTP status of the answer, or 0 when there was none. */
    this.status = field(options, 'status', 0);
    /** How many times the request was sent. */
    this.attempts = field(options, 'attempts', 0);
  }

  /**
   * Whether the same call may succeed later: a 5xx, 408, 429, no answer, or
   * a timeout. Another 4xx never will, nor a certificate that cannot be
   * verified.
   */
  get retryable() {
    if (this.code === 'tls_certificate') return false;
    return this.status === 0 || this.status >= 500 || this.status === 408 || this.status === 429;
  }
}
named(LeaseServiceError, 'LeaseServiceError');

// leaseFields sets the lease's resource, holderId and fence on an error
// about one lease (expired, lost, released) from its options.
function leaseFields(e, options) {
  e.resource = field(options, 'resource', '');
  e.holderId = field(options, 'holderId', '');
  e.fence = field(options, 'fence', 0);
}

/** An acquisition was denied: the resource is held by a live lease (the caller's own included). */
export class LeaseDeniedError extends LeaseFenceError {
  constructor(message, options) {
    super(message, errorOptions(options));
    this.code = 'denied';
    this.resource = field(options, 'resource', '');
    this.heldBy = field(options, 'heldBy', '');
    /** How long that lease has left, by the coordinator's clock. */
    this.retryAfterMillis = field(options, 'retryAfterMillis', 0);
  }
}
named(LeaseDeniedError, 'LeaseDeniedError');

/**
 * A renewal or release found the lease no longer current: it ran out, was
 * released or was reassigned; `revoked` is true when an operator revoked it
 * (POST /v1/revoke), false otherwise.
 */
export class LeaseExpiredError extends LeaseFenceError {
  constructor(message, options) {
    super(message, errorOptions(options));
    this.code = 'expired';
    leaseFields(this, options);
    this.revoked = field(options, 'revoked', false) === true;
  }
}
named(LeaseExpiredError, 'LeaseExpiredError');

/**
 * A held lease was lost: the coordinator refused a renewal (the lease is
 * over there; `cause` is that LeaseExpiredError), or no renewal succeeded
 * before the holder's deadline (`cause` is the last renewal's failure, if
 * one failed). The reason of a HeldLease's signal, and part of what
 * withLease rejects with when the lease was lost while its callback ran.
 */
export class LeaseLostError extends LeaseFenceError {
  constructor(message, options) {
    super(message, errorOptions(options));
    this.code = 'lease_lost';
    leaseFields(this, options);
    /** The holder's deadline of the last lease it had (its clock's domain): the work had to stop by then. */
    this.deadline = field(options, 'deadline', null);
  }
}
named(LeaseLostError, 'LeaseLostError');

/**
 * A held lease was revoked by an operator (POST /v1/revoke): its renewal
 * was answered "revoked". A LeaseLostError (its code too, 'lease_lost';
 * isLeaseLost is true); the reason of the HeldLease's signal.
 */
export class LeaseRevokedError extends LeaseLostError {}
named(LeaseRevokedError, 'LeaseRevokedError');

/** The reason of a HeldLease's signal once release() ended the hold. */
export class LeaseReleasedError extends LeaseFenceError {
  constructor(message, options) {
    super(message, errorOptions(options));
    this.code = 'released';
    leaseFields(this, options);
  }
}
named(LeaseReleasedError, 'LeaseReleasedError');

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
