// Types for fence-header.mjs (import from 'lease-fence/service-client'): the
// Lease-Fence header fence-proxy reads. See docs/fencing.md, "fence-proxy".
import type { FenceToken, StaleFenceError } from './lease-fence.js';

export { isStaleFence } from './lease-fence.js';

/** 'Lease-Fence'. */
export const LEASE_FENCE_HEADER: 'Lease-Fence';
/** 999999999999999: RFC 8941 integers have at most 15 digits. */
export const MAX_HEADER_FENCE: number;
/** The header's value for token; throws InvalidArgumentError for a token that cannot be sent. */
export function leaseFenceHeader(token: FenceToken): string;
/** The StaleFenceError for fence-proxy's 409 stale_fence answer, or null for any other response. Call it before reading the body (it reads a clone); rejects with InvalidArgumentError if the body was read. */
export function staleFenceError(response: Response): Promise<StaleFenceError | null>;
