// ServiceLease: a lease held through a LeaseServiceClient; and the key that
// the service client's classes check so that only it makes them.
import { InvalidArgumentError } from '../errors.mjs';
import { LeaseExpiredError, named } from './errors.mjs';
import { callOptions } from './options.mjs';

/** What the constructors of the service client's classes take from the client alone. */
export const internal = Symbol('lease-fence service-client internal');

let stateOf; // (lease) => { client, record }; set in ServiceLease's static block

/** The client that acquired lease and its acquisition record ({ ended }). */
export function leaseState(lease) {
  return stateOf(lease);
}

/**
 * A lease held through a LeaseServiceClient: the core lease's token, deadline
 * and grant, and `await using` support (Symbol.asyncDispose releases it).
 */
export class ServiceLease {
  #client;
  #record;
  #core;

  static {
    stateOf = (l) => ({ client: l.#client, record: l.#record });
    // Only where the host has the symbol: importing adds nothing to globals.
    if (typeof Symbol.asyncDispose === 'symbol') {
      Object.defineProperty(this.prototype, Symbol.asyncDispose, {
        value: function dispose() {
          return this.dispose();
        },
        writable: true,
        configurable: true,
      });
    }
  }

  constructor(key, client, record, core) {
    if (key !== internal) {
      throw new InvalidArgumentError('lease-fence: ServiceLease objects are made by LeaseServiceClient, not with new', 'this');
    }
    this.#client = client;
    this.#record = record;
    this.#core = core;
    /** The fencing token to present with every write. */
    this.token = core.token;
    /** End of the lease in the client's clock domain, anchored at the first send. */
    this.deadline = core.deadline;
    /** The grant the lease was made from (it holds no secret). */
    this.grant = core.grant;
    Object.freeze(this);
  }

  /** The library's Lease underneath (for LeaseClient.beginRenewal and the like). */
  get lease() {
    return this.#core;
  }

  /** Advisory: whether the deadline has passed at this instant. Never branch a write on it. */
  hasExpired() {
    return this.#core.hasExpired();
  }

  /** Advisory: whether gate would admit this token at this instant. Never branch a write on it. */
  wouldAdmit(gate) {
    return this.#core.wouldAdmit(gate);
  }

  /**
   * Releases the lease unless this client already released it or learned
   * that it ended; a lease that turns out to have ended already is not an
   * error. Other failures (no answer, a refusal) reject. What
   * `await using` calls.
   */
  async dispose(options) {
    callOptions(options, 'lease.dispose');
    if (this.#record.ended) return;
    try {
      await this.#client.release(this, options);
    } catch (e) {
      if (!(e instanceof LeaseExpiredError)) throw e;
    }
  }

  toString() {
    return `ServiceLease(${JSON.stringify(this.token.resource)} held by ${JSON.stringify(this.token.holderId)}, fence ${this.token.fence}, until ${this.deadline})`;
  }
}
named(ServiceLease, 'ServiceLease');
