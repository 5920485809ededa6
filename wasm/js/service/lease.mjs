// ServiceLease: a lease held through a LeaseServiceClient; and the key that
// the service client's classes check so that only it makes them.
import { InvalidArgumentError } from '../errors.mjs';
import { LeaseExpiredError, named } from './errors.mjs';
import { callOptions } from './options.mjs';

// What the constructors of the service client's classes take from the client alone.
export const internal = Symbol('lease-fence service-client internal');

let stateOf; // (lease) => { client, record }; set in ServiceLease's static block

// The client that acquired lease and its acquisition record ({ ended }).
export function leaseState(lease) {
  return stateOf(lease);
}

// disposedBy gives cls a [Symbol.asyncDispose] that calls its method name,
// only where the host has the symbol: importing adds nothing to globals.
export function disposedBy(cls, name) {
  if (typeof Symbol.asyncDispose === 'symbol') {
    Object.defineProperty(cls.prototype, Symbol.asyncDispose, {
      value: function dispose() {
        return this[name]();
      },
      writable: true,
      configurable: true,
    });
  }
}

export class ServiceLease {
  #client;
  #record;
  #core;

  static {
    stateOf = (l) => ({ client: l.#client, record: l.#record });
    disposedBy(this, 'dispose');
  }

  constructor(key, client, record, core) {
    if (key !== internal) {
      throw new InvalidArgumentError('lease-fence: ServiceLease objects are made by LeaseServiceClient, not with new', 'this');
    }
    this.#client = client;
    this.#record = record;
    this.#core = core;
    this.token = core.token;
    this.deadline = core.deadline;
    this.grant = core.grant;
    Object.freeze(this);
  }

  get lease() {
    return this.#core;
  }

  hasExpired() {
    return this.#core.hasExpired();
  }

  wouldAdmit(gate) {
    return this.#core.wouldAdmit(gate);
  }

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
