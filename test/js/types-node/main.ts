// Compiled (never run) by `tsc -p test/js/types-node` in make test-js: the
// package as a Node-only TypeScript project with exactOptionalPropertyTypes
// uses it. Options are passed through from optional values of the caller's
// own, which is where `x?: T` without `| undefined` used to fail.
import { readFile } from 'node:fs/promises';
import {
  createManualClock, FenceGate, GateBusyError, init, LeaseClient, LeaseCoordinator, SupersededError,
  type FenceToken, type WasmSource,
} from 'lease-fence';
import { LeaseServiceClient, isLeaseLost, type CallOptions, type HoldOptions, type InspectOptions } from 'lease-fence/service-client';

interface Settings {
  wait?: number;
  renewEvery?: number;
  after?: number;
  start?: number;
  skew?: number;
  floor?: number;
  signal?: AbortSignal;
  timeoutMillis?: number;
}

export async function use(s: Settings, token: FenceToken): Promise<string> {
  const source: WasmSource = readFile(new URL('./lease-fence.wasm', import.meta.url));
  await init(source);
  const clock = createManualClock('c', { start: s.start, stepPerRead: undefined });
  const coordinator = new LeaseCoordinator({ clock, ttlMillis: 1000, startFence: undefined });
  const client = new LeaseClient({ clock, holderId: 'a', clockSkewMillis: s.skew });
  const gate = new FenceGate('r', { initialFloor: s.floor, maxRejections: undefined });
  const svc = new LeaseServiceClient({ baseURL: 'http://127.0.0.1:8787', holderId: 'a', timeoutMillis: s.timeoutMillis, clock: undefined });
  const call: CallOptions = { signal: s.signal, timeoutMillis: s.timeoutMillis };
  const lease = await svc.acquire('r', call);
  await svc.release(lease, { signal: s.signal });
  try {
    return await gate.commitAsync(token, async (signal) => {
      signal.throwIfAborted();
      return `${coordinator.issuedFence} ${client.holderId}`;
    }, { signal: s.signal });
  } catch (e) {
    if (e instanceof GateBusyError) return `${e.runningHolderId} ${e.runningFence} ${e.runningMillis}`;
    if (e instanceof SupersededError) return `${e.newerHolderId} ${e.newerFence}`;
    throw e;
  }
}

// Holding, with the caller's optional values passed through.
export async function hold(s: Settings): Promise<string> {
  const svc = new LeaseServiceClient({ baseURL: 'http://127.0.0.1:8787', holderId: 'a', maxWaitMillis: s.wait, timers: undefined });
  const options: HoldOptions = { waitMillis: s.wait, signal: s.signal, renewEveryMillis: s.renewEvery };
  const held = await svc.hold('r', options);
  held.addEventListener('lost', (e) => console.log(e.error?.deadline?.millis, e.lease.token.fence));
  held.addEventListener('renewed', (e) => console.log(e.type));
  await held.release({ signal: s.signal });
  const inspect: InspectOptions = { afterFence: s.after, waitMillis: s.wait, signal: s.signal, timeoutMillis: s.timeoutMillis };
  const st = await svc.inspect('r', inspect);
  const n = await svc.withLease('r', async ({ token, signal }) => (signal.aborted ? 0 : token.fence), options).catch((e: unknown) => (isLeaseLost(e) ? -1 : -2));
  const e = svc.election('leader', { renewEveryMillis: s.renewEvery });
  const leader = await e.leader({ signal: s.signal });
  for await (const l of e.observe({ signal: s.signal })) console.log(l.holderId);
  await (await e.campaign({ signal: s.signal })).release();
  return `${st.held ? st.fence : st.lastFence} ${n} ${leader?.holderId}`;
}
