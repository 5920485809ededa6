// lease-fence/sql: the fence gate inside PostgreSQL (Node; needs the `pg`
// package or a pool with the same connect()/query()/release() shape).
import { LeaseFenceError } from './lease-fence.js';
import type { AbortSignalLike, FenceToken, Rejection } from './lease-fence.js';

export { isStaleFence } from './lease-fence.js';

/** The store failed and the write did not happen: nothing changed. */
export class FenceStoreError extends LeaseFenceError {
  /** What the gate was doing, e.g. 'commit' or 'reading the floor'. */
  readonly op: string;
  readonly written: false;
  /**
   * lease-fence/redis: set when one of the gate's own keys (a floor, a
   * rejection log) holds what the gate did not write; nothing was changed.
   */
  readonly key?: string;
}
/** The connection broke after the write was sent and the outcome could not be learnt. */
export class OutcomeUnknownError extends LeaseFenceError {
  readonly written: null;
}

/**
 * How many times a transaction runs when PostgreSQL reports 40001 or 40P01,
 * or its connection broke before COMMIT was sent.
 */
export const MAX_ATTEMPTS: number;
/** The largest limit of a page of rejections (10000). */
export const MAX_REJECTIONS_PAGE: number;

/** A page of a rejection log: refusals whose seq is above afterSeq (default 0), at most limit. */
export interface RejectionsPage {
  afterSeq?: number;
  limit: number;
}

/**
 * A client of the pool: pg's PoolClient, or anything shaped like it. The
 * gate calls query with a text and an array of values only (never pg's
 * `{ name, text, values }`): its check is prepared once on each connection
 * with `PREPARE` and run with `EXECUTE`, so the server neither parses nor
 * plans it again per commit, whatever the client.
 */
export interface SqlClient {
  query(text: string, values?: unknown[]): Promise<{ rows: any[] }>;
  release(err?: unknown): void;
}
/** A pool: pg.Pool, or anything whose connect() resolves to a SqlClient. */
export interface SqlPool {
  connect(): Promise<SqlClient>;
  query(text: string, values?: unknown[]): Promise<{ rows: any[] }>;
}

/** Options of a commit or an admit. */
export interface FenceCallOptions {
  /**
   * Gives up before the write runs: an aborted signal rejects with
   * `signal.reason` (at once, or for lease-fence/sql once the connection and
   * the floor row's lock are had; that wait is not interrupted), and nothing
   * was written or logged.
   */
  signal?: AbortSignalLike | undefined;
}

export interface SqlFenceOptions {
  /** Only 'postgres'. */
  dialect?: 'postgres';
  /** Prefix of the two tables (<table>_floor, <table>_rejection); default 'lease_fence', as Go's sqlfence. */
  table?: string;
  /**
   * Run a resource's writes one at a time whatever their fences (every
   * transaction locks the floor row for update). By default a write whose
   * fence equals the floor locks it in share mode, so writes of one
   * generation run in parallel and a raise waits for them, as Go's sqlfence.
   */
  exclusive?: boolean;
}

/** A fence gate kept in a PostgreSQL database; Go's sqlfence shares its tables. */
export interface SqlFence {
  /**
   * Runs write(client) in one transaction with the fence check and the raise
   * of the floor. Rejects with StaleFenceError (write did not run, refusal
   * committed), write's own error (everything rolled back, the floor
   * included), InvalidArgumentError, FenceStoreError or OutcomeUnknownError.
   * Serialization failures, deadlocks and connections that broke before
   * COMMIT are retried: write may run again.
   */
  commit<T>(token: FenceToken, write: (client: SqlClient) => Promise<T> | T, options?: FenceCallOptions): Promise<T>;
  /** Raises the floor without writing; an older token is refused and logged. */
  admit(token: FenceToken, options?: FenceCallOptions): Promise<void>;
  /** The highest fence admitted for resource (0 if none). */
  floor(resource: string): Promise<number>;
  /**
   * Every refusal logged for resource, oldest first; with a page, those
   * whose seq is above page.afterSeq, at most page.limit (pass the last seq
   * as afterSeq for the next page, until one is shorter than limit).
   */
  rejections(resource: string, page?: RejectionsPage): Promise<Rejection[]>;
}

/** Opens the gate on pool, creating its tables if they are missing. */
export function openSqlFence(pool: SqlPool, options?: SqlFenceOptions): Promise<SqlFence>;
