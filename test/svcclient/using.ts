// `await using` with a lease from LeaseServiceClient, in TypeScript. make
// test-svcclient compiles this with tsc (tsconfig.json here: strict,
// nodenext, target es2022, so tsc lowers `await using` onto
// Symbol.asyncDispose, which Node 20 has) into out/test/svcclient, and
// service-client.test.mjs runs the output against each coordinator.
import {
  LeaseDeniedError,
  LeaseExpiredError,
  LeaseServiceClient,
  LeaseServiceError,
  type CallOptions,
  type ServiceLease,
} from 'lease-fence/service-client';
import { FenceGate, LeaseFenceError, type FenceToken } from 'lease-fence';

/** Holds resource inside a block and returns the token it wrote with; the lease is released on the way out. */
export async function holdAndWrite(client: LeaseServiceClient, resource: string, gate: FenceGate): Promise<FenceToken> {
  await using lease = await client.acquire(resource);
  gate.commit(lease.token, () => undefined);
  return lease.token;
}

/** The same, leaving the block by an exception: the lease is released all the same. */
export async function holdAndThrow(client: LeaseServiceClient, resource: string): Promise<FenceToken> {
  let token: FenceToken | undefined;
  try {
    await using lease: ServiceLease = await client.acquire(resource);
    token = lease.token;
    throw new Error('the work failed');
  } catch (e) {
    if (!(e instanceof Error) || e.message !== 'the work failed' || token === undefined) throw e;
    return token;
  }
}

/** Classifies a failure the way a caller branches on it. */
export function classify(e: unknown): string {
  if (e instanceof LeaseDeniedError) return `denied:${e.heldBy}:${e.retryAfterMillis >= 0}`;
  if (e instanceof LeaseExpiredError) return `expired:${e.resource}:${e.fence}`;
  if (e instanceof LeaseServiceError) return `service:${e.code}:${e.status}:${e.retryable}`;
  if (e instanceof LeaseFenceError) return 'lease-fence';
  return 'other';
}

export const noWait: CallOptions = { timeoutMillis: 60_000, signal: new AbortController().signal };

/** Each error class as a caller constructs it (in a test double, say): (message, options), cause included. */
export function made(cause: unknown): LeaseFenceError[] {
  return [
    new LeaseServiceError('refused', { code: 'wrong_secret', status: 403, attempts: 1, cause }),
    new LeaseDeniedError('held', { resource: 'r', heldBy: 'b', retryAfterMillis: 5, cause }),
    new LeaseExpiredError('gone', { resource: 'r', holderId: 'a', fence: 3, cause }),
  ];
}
