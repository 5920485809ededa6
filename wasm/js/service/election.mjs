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

  get name() {
    return this.#name;
  }

  async campaign(value, options) {
    if (value === undefined || isOptions(value)) [value, options] = ['', value];
    checkValue(value, 'value');
    const { signal } = optionsOf(options, CAMPAIGN_OPTIONS, 'election.campaign', 'election.campaign options');
    const held = await makeHold(this.#client, this.#tools, this.#name, { waitMillis: Infinity, signal, renewEveryMillis: this.#every, value });
    this.#held = held;
    return held;
  }

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

  async leader(options) {
    const st = await this.#client.inspect(this.#name, callOptions(options, 'election.leader'));
    return st.held ? leaderOf(st) : null;
  }

  // The coordinator answers each change at once (an inspection waiting
  // with afterFence), so a new leader is seen when it is elected, not at a
  // next poll.
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
