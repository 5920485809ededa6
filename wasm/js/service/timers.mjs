// The service client's waiting: its default timers and backoff, a sleep an
// AbortSignal ends, and how durations read in messages.

// setTimeout's longest delay; a timer due later is set again when it fires.
export const MAX_TIMER_MILLIS = 2 ** 31 - 1;
// A failed renewal is tried again after a quarter of the lesser of the
// renewal interval and the time left, and never sooner than this.
export const MIN_RETRY_MILLIS = 10;

export function defaultBackoff(n) {
  return Math.min(25 * 2 ** (n - 2), 1000);
}

// durationText says ms as "12 ms", "3.4 ms" or "2.35 s".
export function durationText(ms) {
  const a = Math.abs(ms);
  if (a >= 10_000) return `${(ms / 1000).toFixed(1)} s`;
  if (a >= 1000) return `${(ms / 1000).toFixed(2)} s`;
  if (a >= 10) return `${Math.round(ms)} ms`;
  return `${ms.toFixed(1)} ms`;
}

export const defaultTimers = Object.freeze({
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (handle) => clearTimeout(handle),
});

// sleep waits ms on timers or until signal aborts, whichever is first.
export function sleep(timers, ms, signal) {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const onAbort = () => {
      timers.clearTimeout(t);
      reject(signal.reason);
    };
    const t = timers.setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal.addEventListener('abort', onAbort, { once: true });
  });
}
