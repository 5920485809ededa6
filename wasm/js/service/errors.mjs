// The service client's error classes, and isLeaseLost: plain JavaScript, no
// WebAssembly. Their base is the library's LeaseFenceError (errors.mjs, which
// lease-fence re-exports), so `instanceof LeaseFenceError` holds for them.
import { errorClass, named } from '../error-class.mjs';
import { LeaseFenceError } from '../errors.mjs';

export { named };

// Every class takes (message, options), as the library's errors do: options
// is Error's ({ cause }) plus the class's own fields (error-class.mjs).
const lease = { resource: '', holderId: '', fence: 0 };

export const LeaseServiceError = errorClass(LeaseFenceError, 'LeaseServiceError', { code: (v) => String(v ?? ''), status: 0, attempts: 0 }, {
  get retryable() {
    if (this.code === 'tls_certificate') return false;
    return this.status === 0 || this.status >= 500 || this.status === 408 || this.status === 429;
  },
});

export const LeaseDeniedError = errorClass(LeaseFenceError, 'LeaseDeniedError', { code: () => 'denied', resource: '', heldBy: '', retryAfterMillis: 0 });

export const LeaseExpiredError = errorClass(LeaseFenceError, 'LeaseExpiredError', { code: () => 'expired', ...lease, revoked: (v) => v === true });

export const LeaseLostError = errorClass(LeaseFenceError, 'LeaseLostError', { code: () => 'lease_lost', ...lease, deadline: null });

export class LeaseRevokedError extends LeaseLostError {}
named(LeaseRevokedError, 'LeaseRevokedError');

export const LeaseReleasedError = errorClass(LeaseFenceError, 'LeaseReleasedError', { code: () => 'released', ...lease });

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
