// lease-fence/redis: the fence gate inside Redis (7.0 or later), for a
// client of the `redis` package (Node).
import { LeaseFenceError } from './lease-fence.js';
import type { FenceToken, Rejection } from './lease-fence.js';

export { FenceStoreError, isStaleFence, MAX_REJECTIONS_PAGE, OutcomeUnknownError } from './sql.js';
import type { FenceCallOptions, RejectionsPage } from './sql.js';

export const MAX_COMMANDS: number;
export const MAX_KEYS: number;
export const MAX_ARGS_PER_COMMAND: number;
/** The Lua script run for every commit and admit (the same text as Go's redisfence). */
export const script: string;

/** A write was admitted and command `index` failed as it ran (the ones before it ran; the floor stays raised). */
export class CommandError extends LeaseFenceError {
  readonly resource: string;
  readonly fence: number;
  readonly index: number;
  readonly command: string;
  readonly written: 'partly';
}

/** `{resource}` with %, { and } escaped: the hash tag of the resource's keys. */
export function redisTag(resource: string): string;
/** A key in the resource's hash slot: `{resource}:name`. */
export function redisKey(resource: string, name: string): string;
/** The Redis Cluster hash slot of key. */
export function redisSlot(key: string): number;

/** What a client of the `redis` package offers that the gate uses. */
export interface RedisLikeClient {
  eval(script: string, options: { keys: string[]; arguments: string[] }): Promise<unknown>;
  evalSha(sha: string, options: { keys: string[]; arguments: string[] }): Promise<unknown>;
  hGet(key: string, field: string): Promise<string | null | undefined | {}>;
  lRange(key: string, start: number, stop: number): Promise<string[] | any>;
  set(key: string, value: string, options: { NX: true; PX: number }): Promise<string | null | {}>;
  get(key: string): Promise<string | null | {}>;
}

export interface RedisFenceOptions {
  /** Starts every key of the gate; no braces. Default 'lease-fence:'. */
  prefix?: string;
  /** Refusals kept per resource (1 to 1,048,576; 0 or absent: 1000). */
  maxRejections?: number;
  /**
   * Each commit writes a marker of its outcome (default false): a commit
   * whose reply was lost is settled instead of rejecting with
   * OutcomeUnknownError, and a script sent again does not run twice.
   */
  atMostOnce?: boolean;
  /** How long a commit's marker is kept with atMostOnce (at least 1000; default 60000). */
  markerTtlMillis?: number;
}

/** A write: commands run in order inside the script, on declared keys in the resource's slot. */
export interface RedisWrite {
  keys: string[];
  commands: Array<Array<string | number | Uint8Array>>;
}

export interface RedisFence {
  /**
   * Runs write's commands after the fence check, in one script (shared by
   * the commits of one token with the same keys made together, each
   * answered as alone). options.signal aborted before the script is sent:
   * rejects with its reason, nothing sent; after: rejects at once with
   * OutcomeUnknownError.
   */
  commit(token: FenceToken, write: RedisWrite, options?: FenceCallOptions): Promise<void>;
  /** Raises the floor without writing; an older token is refused and logged. */
  admit(token: FenceToken, options?: FenceCallOptions): Promise<void>;
  floor(resource: string): Promise<number>;
  /**
   * The newest refusals for resource (at most maxRejections), oldest first;
   * with a page, those kept whose seq is above page.afterSeq, at most
   * page.limit, read in one step.
   */
  rejections(resource: string, page?: RejectionsPage): Promise<Rejection[]>;
}

/** Opens the gate on a connected client (createClient() or createCluster()). Sends nothing. */
export function openRedisFence(client: RedisLikeClient, options?: RedisFenceOptions): RedisFence;
