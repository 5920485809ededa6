// Leader election over one resource: client.election(name) gives a
// LeaseElection, whose campaign holds the resource's lease (the leader is
// its holder), as Go's client.Client.Election does.
import { InvalidArgumentError } from '../errors.mjs';
import { LeaseExpiredError, LeaseServiceError, named } from './errors.mjs';
import { makeHold } from './hold.mjs';
import { internal } from './lease.mjs';
import { callOptions, checkValue, isOptions, optionsOf } from './options.mjs';
import { MIN_RETRY_MILLIS, sleep } from './timers.mjs';

const CAMPAIGN_OPTIONS = ['signal'];
const OBSERVE_OPTIONS = ['signal'];

/**
 * Leader election over one resource, the election's name: the leader is
 * the holder of its lease. Made by client.election(name).
 */
export class LeaseElection {
  #client;
  #tools; // the client's own calls and settings
  #name;
  #every;
  #held; // the HeldLease of the last campaign won

  constructor(key, client, tools, name, every) {
    if (key !== internal) {
      throw new InvalidArgumentError('lease-fence: LeaseElection objects are made by LeaseServiceClient.election, not with new', 'this');
    }
    this.#client = client;
    this.#tools = tools;
    this.#name = name;
    this.#every = every;
  }

  /** The election's name: the resource whose holder leads. */
  get name() {
    return this.#name;
  }

  /**
   * Waits, in the resource's queue, until this holder leads, or the signal
   * aborts (rejects with its reason). value (optional; at most 4096 bytes
   * of UTF-8, not secret: the leader's address, say) is the lead's value,
   * which leader() and observe() report. The HeldLease renews itself; its
   * signal aborts when the lead is lost; release() resigns, handing the
   * lead to the next campaigner at once. campaign(options) without a value
   * is campaign('', options).
   */
  async campaign(value, options) {
    if (value === undefined || isOptions(value)) [value, options] = ['', value];
    checkValue(value, 'value');
    const { signal } = optionsOf(options, CAMPAIGN_OPTIONS, 'election.campaign', 'election.campaign options');
    const held = await makeHold(this.#client, this.#tools, this.#name, { waitMillis: Infinity, signal, renewEveryMillis: this.#every, value });
    this.#held = held;
    return held;
  }

  /**
   * Changes the value of the lead this election's last campaign won.
   * Rejects with LeaseExpiredError when that lead is over (revoked: true
   * if an operator revoked it), InvalidArgumentError if no campaign won.
   */
  async proclaim(value, options) {
    checkValue(value, 'value');
    const held = this.#held;
    if (held === undefined) {
      throw new InvalidArgumentError('lease-fence: election.proclaim needs a lead won by this election\'s campaign()', 'this');
    }
    if (held.signal.aborted) {
      const { resource, holderId, fence } = held.token;
      throw new LeaseExpiredError(`lease-fence: proclaim of ${JSON.stringify(resource)} fence ${fence}: the lead is over`, { resource, holderId, fence });
    }
    return this.#client.proclaim(held.lease, value, options);
  }

  /** The current leader, { holderId, fence, value? } (value when it has one), or null when nobody leads. */
  async leader(options) {
    const st = await this.#client.inspect(this.#name, callOptions(options, 'election.leader'));
    return st.held ? leaderOf(st) : null;
  }

  /**
   * The leaders, as an async iterable: the current one first (if anyone
   * leads), then each new leader as it is elected, once each and in fence
   * order, and the leader again each time its value changes (proclaim):
   * { holderId, fence, value? }. The coordinator answers each change at once
   * (an inspection waiting with afterFence), so a new leader is seen when
   * it is elected, not at a next poll. Ends when the signal aborts or the
   * loop breaks; failures to reach the coordinator are retried with the
   * client's backoff; a refusal that will not change (a 4xx) is thrown.
   */
  observe(options) {
    return this.#observe(optionsOf(options, OBSERVE_OPTIONS, 'election.observe', 'election.observe options').signal);
  }

  async *#observe(signal) {
    const client = this.#client;
    const { timers, backoff, maxWait } = this.#tools;
    let after = 0;
    let value = '';
    let last = 0;
    let lastValue = '';
    let first = true;
    let fails = 0;
    while (!signal?.aborted) {
      let st;
      try {
        st = await client.inspect(this.#name, first ? { signal } : { signal, afterFence: after, afterValue: value, waitMillis: maxWait });
      } catch (e) {
        if (signal?.aborted) return;
        if (e instanceof InvalidArgumentError || (e instanceof LeaseServiceError && !e.retryable)) throw e;
        fails++;
        try {
          await sleep(timers, Math.max(backoff(Math.min(fails, 8) + 1), MIN_RETRY_MILLIS), signal ?? new AbortController().signal);
        } catch {
          return;
        }
        continue;
      }
      first = false;
      fails = 0;
      after = st.held ? st.fence : 0;
      value = (st.held && st.value) || '';
      if (st.held && (st.fence > last || (st.fence === last && value !== lastValue))) {
        last = st.fence;
        lastValue = value;
        yield leaderOf(st);
      }
    }
  }

  toString() {
    return `LeaseElection(${JSON.stringify(this.#name)})`;
  }
}
named(LeaseElection, 'LeaseElection');

// leaderOf is the leader an inspection of a held election reports:
// { holderId, fence }, and value when the lease has one.
function leaderOf(st) {
  const l = { holderId: st.holderId, fence: st.fence };
  if (st.value) l.value = st.value;
  return Object.freeze(l);
}
