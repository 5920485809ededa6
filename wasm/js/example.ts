// A typed use of the whole API, checked by `tsc --noEmit -p wasm/js` (make
// test-js-types). It is compiled, never run: it proves lease-fence.d.ts
// describes what a TypeScript user writes.
import {
  createClock,
  createManualClock,
  createMonotonicClock,
  createNaiveLease,
  ClockDomainError,
  FenceGate,
  GateBusyError,
  InvalidArgumentError,
  LeaseClient,
  LeaseCoordinator,
  LeaseFenceError,
  StaleFenceError,
  SupersededError,
  type AcquireOutcome,
  type FenceToken,
  type Grant,
  type Instant,
  type Lease,
  type LeaseRequest,
  type Rejection,
  type RenewOutcome,
} from 'lease-fence';

declare function applyTheChange(): number;
declare function log(...args: unknown[]): void;

const coordinator = new LeaseCoordinator({ clock: createMonotonicClock('coordinator'), ttlMillis: 30_000 });
const resumed = new LeaseCoordinator({
  clock: createClock('wall', () => Date.now()),
  ttlMillis: 1_000,
  startFence: coordinator.issuedFence,
});
const clock = createManualClock('agent-a', { start: 0, stepPerRead: 1 });
clock.advance(10);
clock.set(100);
const client = new LeaseClient({ clock, holderId: 'agent-a', clockSkewMillis: 500 });
const gate = new FenceGate('deploy-slot', { initialFloor: 0 });

const request: LeaseRequest = client.beginAcquire('deploy-slot');
const wire: LeaseRequest = JSON.parse(JSON.stringify(request));
const outcome: AcquireOutcome = coordinator.acquire(wire);
if (!outcome.ok) {
  const retry: number = outcome.retryAfterMillis;
  log(`held by ${outcome.heldBy}, free in ${retry}ms`);
} else {
  const grant: Grant = outcome.grant;
  const lease: Lease = client.completeAcquire(request, grant);
  const token: FenceToken = lease.token;
  const written: number = gate.commit(token, () => applyTheChange());
  const deadline: Instant = lease.deadline;
  const left: number = deadline.since(clock.now());
  const advisory: boolean = lease.hasExpired() || !lease.wouldAdmit(gate);
  log(written, left, advisory, grant.coordinatorExpiresAt.millis);

  const renewal = client.beginRenewal(lease);
  const renewed: RenewOutcome = coordinator.renew(renewal);
  if (renewed.ok) {
    client.completeRenewal(renewal, renewed.grant);
  } else {
    const why: 'expired' = renewed.reason;
    log(why);
  }
  const released: boolean = coordinator.release(lease.token);
  log(released);
  try {
    gate.commit({ resource: 'deploy-slot', holderId: 'agent-a', fence: 1 }, () => undefined);
  } catch (e) {
    if (e instanceof StaleFenceError) {
      const r: Rejection = e.rejection;
      log(r.seq, r.refusedHolderId, r.admittedHolderId ?? 'initial floor');
    } else if (e instanceof ClockDomainError) {
      log(e.expectedDomain, e.actualDomain);
    } else if (e instanceof InvalidArgumentError) {
      log(e.argument);
    } else if (e instanceof LeaseFenceError) {
      log(e.name);
    }
  }
  gate.admit({ resource: 'deploy-slot', holderId: 'agent-b', fence: 2 });
  const floor: number = gate.floor;
  const log2: readonly Rejection[] = gate.rejections;
  log(floor, log2.length);
}

const naive = createNaiveLease(clock, 1_000);
if (naive.valid()) naive.renewed();
log(naive.expiresAt.millis, resumed.ttlMillis);

// @ts-expect-error a plain object is not a clock
new LeaseCoordinator({ clock: { domain: 'x', now: () => 0 }, ttlMillis: 1 });
// @ts-expect-error commit needs a callback
gate.commit({ resource: 'deploy-slot', holderId: 'a', fence: 1 });

// Async writes go through commitAsync; commit takes synchronous writes only.
async function asyncWrites(): Promise<void> {
  const token: FenceToken = { resource: 'deploy-slot', holderId: 'agent-a', fence: 3 };
  const ac = new AbortController();
  const id: number = await gate.commitAsync(token, async () => 42, { signal: ac.signal });
  const same: string = await gate.commitAsync(token, () => 'sync is fine too');
  log(id, same);
  // @ts-expect-error commit refuses a callback that returns a promise
  gate.commit(token, async () => 1);
  // @ts-expect-error ... or any other thenable
  gate.commit(token, () => Promise.resolve(1));
  // @ts-expect-error a signal is an AbortSignal
  gate.commitAsync(token, async () => 1, { signal: 'stop' });
  // A write that takes the gate's signal: aborted (with a SupersededError)
  // when a newer fence reaches the gate while it runs.
  const body: string = await gate.commitAsync(token, async (signal: AbortSignal) => {
    const res = await fetch('https://example.invalid/orders/1', { method: 'PUT', signal });
    return res.statusText;
  });
  log(body);
  try {
    await gate.commitAsync(token, async (signal) => {
      signal.throwIfAborted();
    }, { signal: AbortSignal.timeout(5_000) });
  } catch (e) {
    if (e instanceof GateBusyError) log(e.runningHolderId, e.runningFence, e.runningMillis, e.holderId, e.fence);
    if (e instanceof SupersededError) log(e.newerHolderId, e.newerFence, e.newerWaiting, e.holderId, e.fence, e.resource);
  }
}
log(asyncWrites);

// Errors take (message, options); cause goes where Error puts it.
const invalid = new InvalidArgumentError('bad', { argument: 'x', cause: new Error('why') });
const invalid2 = new InvalidArgumentError('bad', 'x');
const stale = new StaleFenceError('stale', { rejection: { seq: 1, resource: 'r', refusedHolderId: 'a', refusedFence: 1, admittedHolderId: null, admittedFence: 2 } });
log(invalid.argument, invalid.cause, invalid2.argument, stale.rejection.seq, new LeaseFenceError('x', { cause: 1 }).cause);
