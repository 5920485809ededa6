// Holding in TypeScript: make test-svcclient compiles this with tsc
// (tsconfig.json here: strict, nodenext, target es2022, so `await using`
// is lowered onto Symbol.asyncDispose) into out/test/svcclient, and
// hold.test.mjs runs the output against each coordinator.
import {
  HoldEvent,
  LeaseLostError,
  isLeaseLost,
  type HeldLease,
  type HoldOptions,
  type Leader,
  type LeaseServiceClient,
  type LeaseStatus,
} from 'lease-fence/service-client';
import type { FenceGate, FenceToken } from 'lease-fence';

/**
 * Holds resource inside a block (waiting for it as options say), writes
 * through the gate with the hold's signal, and returns the token; the hold
 * is released on the way out, and its signal then says so.
 */
export async function holdAndWrite(client: LeaseServiceClient, resource: string, gate: FenceGate, options?: HoldOptions): Promise<{ token: FenceToken; signal: AbortSignal }> {
  let signal: AbortSignal;
  {
    await using held = await client.hold(resource, options);
    signal = held.signal;
    const renewed: number[] = [];
    held.addEventListener('renewed', (e) => {
      renewed.push(e.lease.deadline.millis); // e is a HoldEvent
    });
    held.addEventListener('lost', (e: HoldEvent) => {
      if (e.error !== null) console.error(e.error.deadline?.millis);
    });
    await gate.commitAsync(held.token, async (s) => {
      s.throwIfAborted();
    }, { signal: held.signal });
    if (held.signal.aborted) throw new Error('aborted while held');
    return { token: held.token, signal };
  }
}

/** withLease's value is the callback's; a loss is told by isLeaseLost. */
export async function report(client: LeaseServiceClient, resource: string): Promise<string> {
  try {
    const pages: number = await client.withLease(resource, async ({ token, signal }) => {
      signal.throwIfAborted();
      return token.fence > 0 ? 2 : 0;
    }, { waitMillis: 1000 });
    return `${pages} pages`;
  } catch (e) {
    if (e instanceof LeaseLostError) return `lost at ${e.deadline?.millis}`;
    if (isLeaseLost(e)) return 'lost, among other failures';
    throw e;
  }
}

/** What inspect says, as a sentence: LeaseStatus narrows on held. */
export async function describe(client: LeaseServiceClient, resource: string): Promise<string> {
  const st: LeaseStatus = await client.inspect(resource);
  return st.held ? `held by ${st.holderId} with fence ${st.fence}` : `free after fence ${st.lastFence}`;
}

/** The first n leaders of an election. */
export async function leaders(client: LeaseServiceClient, name: string, n: number, signal?: AbortSignal): Promise<Leader[]> {
  const seen: Leader[] = [];
  for await (const l of client.election(name).observe({ signal })) {
    seen.push(l);
    if (seen.length === n) break;
  }
  return seen;
}

/** Campaigns and resigns at once. */
export async function leadOnce(client: LeaseServiceClient, name: string): Promise<number> {
  const held: HeldLease = await client.election(name, { renewEveryMillis: 500 }).campaign();
  const fence = held.token.fence;
  await held.release();
  return fence;
}
