// lease-fence's error classes and isStaleFence: plain JavaScript, no
// WebAssembly. lease-fence re-exports them, and lease-fence/sql,
// lease-fence/redis and the fence header import them from here, so
// `instanceof StaleFenceError` holds whichever entry the caller imported and
// those entries load no wasm.
//
// Every class takes (message, options): options is Error's ({ cause }) plus
// the class's own fields, so `new StaleFenceError(m, { rejection, cause })`
// sets both. InvalidArgumentError also takes the argument's path as a string
// in place of options. What each class means is documented in
// lease-fence.d.ts.

import { errorClass, named } from './error-class.mjs';

export class LeaseFenceError extends Error {}
named(LeaseFenceError, 'LeaseFenceError');

export const InvalidArgumentError = errorClass(LeaseFenceError, 'InvalidArgumentError', {
  argument: (v, options) => (typeof options === 'string' ? options : String(v ?? '')),
});

export const StaleFenceError = errorClass(LeaseFenceError, 'StaleFenceError', { rejection: null });

// isStaleFence also looks into a SuppressedError's error and suppressed, and
// visits each object once, so a cycle ends.
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

export const ClockDomainError = errorClass(LeaseFenceError, 'ClockDomainError', { expectedDomain: '', actualDomain: '' });

export const ClockReadingError = errorClass(LeaseFenceError, 'ClockReadingError', { domain: '', problem: '', value: NaN, previous: NaN });

export const RequestCompletedError = errorClass(LeaseFenceError, 'RequestCompletedError', { requestId: '' });

export const GrantMismatchError = errorClass(LeaseFenceError, 'GrantMismatchError', { field: '', expected: '', actual: '' });

export const SupersededError = errorClass(LeaseFenceError, 'SupersededError', {
  resource: '', holderId: '', fence: 0, newerHolderId: '', newerFence: 0, newerWaiting: false,
});

export const GateBusyError = errorClass(LeaseFenceError, 'GateBusyError', {
  resource: '', holderId: '', fence: 0, runningHolderId: '', runningFence: 0, runningMillis: 0,
});
