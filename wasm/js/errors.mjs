// lease-fence's error classes and isStaleFence: plain JavaScript, no
// WebAssembly. lease-fence re-exports them, and lease-fence/sql,
// lease-fence/redis and the fence header import them from here, so
// `instanceof StaleFenceError` holds whichever entry the caller imported and
// those entries load no wasm.
//
// Every class takes (message, options): options is Error's ({ cause }) plus
// the class's own fields, so `new StaleFenceError(m, { rejection, cause })`
// sets both. InvalidArgumentError also takes the argument's path as a string
// in place of options.

import { errorClass, named } from './error-class.mjs';

/** Base class of every error this library throws. */
export class LeaseFenceError extends Error {}
named(LeaseFenceError, 'LeaseFenceError');

/** An argument had the wrong type or value; nothing was changed. `argument` is its path, e.g. "request.sentAt.millis". */
export const InvalidArgumentError = errorClass(LeaseFenceError, 'InvalidArgumentError', {
  argument: (v, options) => (typeof options === 'string' ? options : String(v ?? '')),
});

/** A gate refused a token whose fence is below its floor; `rejection` is the entry appended to gate.rejections. */
export const StaleFenceError = errorClass(LeaseFenceError, 'StaleFenceError', { rejection: null });

/**
 * Whether err is a gate's refusal of a stale fence (StaleFenceError from
 * FenceGate, lease-fence/sql, lease-fence/redis or fence-proxy's answer),
 * however deeply it is wrapped: through `cause` chains and the `errors` of an
 * AggregateError (and a SuppressedError's `error` and `suppressed`). Each
 * object is visited once, so a cycle ends. Plain JavaScript: it needs no
 * WebAssembly.
 */
export function isStaleFence(err) {
  const seen = new Set();
  const todo = [err];
  while (todo.length > 0) {
    const e = todo.pop();
    if (typeof e !== 'object' || e === null || seen.has(e)) continue;
    seen.add(e);
    if (e instanceof StaleFenceError) return true;
    if ('cause' in e) todo.push(e.cause);
    if (Array.isArray(e.errors)) todo.push(...e.errors);
    if (e.name === 'SuppressedError') todo.push(e.error, e.suppressed);
  }
  return false;
}

/** Two instants from different clock domains were compared or subtracted. */
export const ClockDomainError = errorClass(LeaseFenceError, 'ClockDomainError', { expectedDomain: '', actualDomain: '' });

/** A clock source produced a reading that is NaN, infinite or backwards ('not a number', 'infinite' or 'lower than an earlier reading'). */
export const ClockReadingError = errorClass(LeaseFenceError, 'ClockReadingError', { domain: '', problem: '', value: NaN, previous: NaN });

/** A request was completed a second time. */
export const RequestCompletedError = errorClass(LeaseFenceError, 'RequestCompletedError', { requestId: '' });

/** A grant does not answer the request it was completed with; field is 'requestId', 'resource', 'holderId' or 'fence'. */
export const GrantMismatchError = errorClass(LeaseFenceError, 'GrantMismatchError', { field: '', expected: '', actual: '' });

/**
 * The reason a commitAsync write's signal aborted with: a newer fence reached
 * the gate while the write ran (admitted by gate.admit, or a write with a
 * higher fence waiting for this one: newerWaiting). The write's lease was
 * superseded; the gate still waits for the write to finish.
 */
export const SupersededError = errorClass(LeaseFenceError, 'SupersededError', {
  resource: '', holderId: '', fence: 0, newerHolderId: '', newerFence: 0, newerWaiting: false,
});

/**
 * A commitAsync that waited for its turn and gave up (its signal aborted):
 * names the write it waited for (running*). The signal's reason is the cause.
 */
export const GateBusyError = errorClass(LeaseFenceError, 'GateBusyError', {
  resource: '', holderId: '', fence: 0, runningHolderId: '', runningFence: 0, runningMillis: 0,
});
