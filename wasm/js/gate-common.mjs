// What lease-fence/sql and lease-fence/redis share: the token check and the
// refusal, worded as the in-memory FenceGate words them (the JavaScript
// conformance suite compares them), and the errors that say whether a write
// may have happened. The error classes come from errors.mjs (no wasm), so
// `instanceof StaleFenceError` holds whichever entry the caller imported.
import { InvalidArgumentError, LeaseFenceError, StaleFenceError } from './errors.mjs';
import { DEFAULT_MAX_REJECTIONS, MAX_ID_BYTES, MAX_MAX_REJECTIONS, MAX_REJECTIONS_PAGE } from './gate-texts.mjs';

/** The highest fence a gate accepts: 2^53-1, as in core/fence. */
export const MAX_FENCE = Number.MAX_SAFE_INTEGER;
// The longest resource or holder id (UTF-8 bytes); how many refusals a gate
// keeps when maxRejections is 0 or absent; the largest maxRejections; the
// largest limit of a page of rejections: core/fence's, generated.
export { DEFAULT_MAX_REJECTIONS, MAX_ID_BYTES, MAX_MAX_REJECTIONS, MAX_REJECTIONS_PAGE };

const encoder = new TextEncoder();
const bytes = (s) => (s.length * 3 <= MAX_ID_BYTES ? s.length : encoder.encode(s).length);

function describe(v) {
  if (v === null) return 'null';
  if (typeof v === 'string') return `string ${JSON.stringify(v)}`;
  if (typeof v === 'number') return `number ${v}`;
  return typeof v;
}

/** Throws InvalidArgumentError unless token is a well-formed fencing token. */
export function checkToken(token) {
  if (typeof token !== 'object' || token === null || Array.isArray(token)) {
    throw new InvalidArgumentError(`lease-fence: token must be an object, got ${describe(token)}`, 'token');
  }
  const { resource, holderId, fence } = token;
  checkId(resource, 'token.resource');
  checkId(holderId, 'token.holderId');
  if (!Number.isSafeInteger(fence) || fence < 0) {
    throw new InvalidArgumentError(`lease-fence: token.fence must be an integer from 0 to 2^53-1, got ${describe(fence)}`, 'token.fence');
  }
  if (fence === 0) throw new InvalidArgumentError('lease-fence: token.fence must be at least 1', 'token.fence');
}

/** Throws InvalidArgumentError unless id is a resource or holder id. */
export function checkId(id, argument) {
  if (typeof id !== 'string') {
    throw new InvalidArgumentError(`lease-fence: ${argument} must be a string, got ${describe(id)}`, argument);
  }
  if (id === '') throw new InvalidArgumentError(`lease-fence: ${argument} must not be empty`, argument);
  if (bytes(id) > MAX_ID_BYTES) {
    throw new InvalidArgumentError(`fence: ${argument} must be at most ${MAX_ID_BYTES} bytes`, argument);
  }
}

/** The StaleFenceError the in-memory gate throws for this refusal. */
export function staleError(rejection) {
  const admitted = rejection.admittedHolderId === null ? 'the initial floor' : `holder ${JSON.stringify(rejection.admittedHolderId)}`;
  return new StaleFenceError(
    `fence: stale write to ${JSON.stringify(rejection.resource)} refused (rejection #${rejection.seq}): ` +
      `holder ${JSON.stringify(rejection.refusedHolderId)} has fence ${rejection.refusedFence} but ${admitted} ` +
      `was admitted at fence ${rejection.admittedFence}`, { rejection });
}

/** A rejection object in the in-memory gate's shape. */
export function rejection(seq, resource, refusedHolderId, refusedFence, admittedHolderId, admittedFence) {
  return {
    seq: Number(seq), resource, refusedHolderId, refusedFence: Number(refusedFence),
    admittedHolderId: admittedHolderId === '' ? null : admittedHolderId, admittedFence: Number(admittedFence),
  };
}

/**
 * The store failed (it could not be reached, the connection broke, it
 * answered an error) and the write did not happen: nothing changed.
 * `written` is false; `cause` is the driver's error.
 */
export class FenceStoreError extends LeaseFenceError {
  constructor(message, options) {
    super(message, options && 'cause' in options ? { cause: options.cause } : undefined);
    /** What the gate was doing, e.g. 'commit' or 'reading the floor'. */
    this.op = options?.op ?? '';
    /** Always false: the write did not happen. */
    this.written = false;
  }
}
Object.defineProperty(FenceStoreError.prototype, 'name', { value: 'FenceStoreError', writable: true, configurable: true });

/**
 * The connection broke after the write was sent and the store could not be
 * asked how it ended: the write may or may not have happened (`written` is
 * null). Read it back to find out.
 */
export class OutcomeUnknownError extends LeaseFenceError {
  constructor(message, options) {
    super(message, options && 'cause' in options ? { cause: options.cause } : undefined);
    this.written = null;
  }
}
Object.defineProperty(OutcomeUnknownError.prototype, 'name', { value: 'OutcomeUnknownError', writable: true, configurable: true });

/**
 * Returns options.signal after checking options ({ signal } or absent);
 * throws InvalidArgumentError for anything else.
 */
export function signalOf(options, what) {
  if (options === undefined || options === null) return undefined;
  if (typeof options !== 'object' || Array.isArray(options)) {
    throw new InvalidArgumentError(`${what}: options must be an object such as { signal }`, 'options');
  }
  for (const k of Object.keys(options)) {
    if (k !== 'signal') throw new InvalidArgumentError(`${what}: options.${k} is not an option (only signal)`, `options.${k}`);
  }
  const { signal } = options;
  if (signal === undefined || signal === null) return undefined;
  if (typeof signal !== 'object' || typeof signal.aborted !== 'boolean' || typeof signal.addEventListener !== 'function') {
    throw new InvalidArgumentError(`${what}: options.signal must be an AbortSignal`, 'options.signal');
  }
  return signal;
}

/**
 * Returns null for absent options (every refusal), or { afterSeq, limit }
 * for a page (afterSeq defaults to 0); throws InvalidArgumentError for
 * anything else.
 */
export function pageOptions(options, what) {
  if (options === undefined || options === null) return null;
  if (typeof options !== 'object' || Array.isArray(options)) {
    throw new InvalidArgumentError(`${what}: options must be an object such as { afterSeq, limit }`, 'options');
  }
  for (const k of Object.keys(options)) {
    if (k !== 'afterSeq' && k !== 'limit') throw new InvalidArgumentError(`${what}: options.${k} is not an option (afterSeq, limit)`, `options.${k}`);
  }
  const { afterSeq = 0, limit } = options;
  if (!Number.isSafeInteger(afterSeq) || afterSeq < 0) {
    throw new InvalidArgumentError(`${what}: options.afterSeq must be an integer from 0 to 2^53-1, got ${describe(afterSeq)}`, 'options.afterSeq');
  }
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_REJECTIONS_PAGE) {
    throw new InvalidArgumentError(`${what}: options.limit must be an integer from 1 to ${MAX_REJECTIONS_PAGE}, got ${describe(limit)}`, 'options.limit');
  }
  return { afterSeq, limit };
}

/** Throws signal.reason if signal has aborted. */
export function checkSignal(signal) {
  if (signal?.aborted) throw signal.reason;
}
