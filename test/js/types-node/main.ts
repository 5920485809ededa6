// Compiled (never run) by `tsc -p test/js/types-node` in make test-js: the
// package as a Node-only TypeScript project with exactOptionalPropertyTypes
// uses it. Options are passed through from optional values of the caller's
// own, which is where `x?: T` without `| undefined` used to fail.
import { readFile } from 'node:fs/promises';
import {
  createManualClock, FenceGate, GateBusyError, init, LeaseClient, LeaseCoordinator, SupersededError,
  type FenceToken, type WasmSource,
} from 'lease-fence';
import { LeaseServiceClient, type CallOptions } from 'lease-fence/service-client';

interface Settings {
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
