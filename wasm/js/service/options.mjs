// The service client's argument checks: each refuses what cannot be sent,
// with an InvalidArgumentError, before anything is sent, and the protocol's
// bounds they check against.
import { InvalidArgumentError } from '../errors.mjs';

// MAX_VALUE_BYTES bounds a lease's value (wire.MaxValueBytes).
export const MAX_VALUE_BYTES = 4096;

// checkValue refuses what cannot be a lease's value before anything is sent.
export function checkValue(v, name) {
  if (typeof v !== 'string' || !v.isWellFormed() || new TextEncoder().encode(v).length > MAX_VALUE_BYTES) {
    throw new InvalidArgumentError(`lease-fence: ${name} must be a well-formed string of at most ${MAX_VALUE_BYTES} bytes of UTF-8`, name);
  }
  return v;
}

// The longest wait one call may ask for (the protocol's bound), and the
// default: hold and observe wait longer as several calls.
export const MAX_WAIT_MILLIS = 2 ** 31;
export const DEFAULT_MAX_WAIT_MILLIS = 30_000;
export const MAX_FENCE = Number.MAX_SAFE_INTEGER;

export function positive(v, name, { integer = false, max = Infinity } = {}) {
  if (typeof v !== 'number' || !Number.isFinite(v) || v <= 0 || v > max || (integer && !Number.isInteger(v))) {
    throw new InvalidArgumentError(`lease-fence: ${name} must be a ${integer ? 'whole' : 'finite'} number above 0${max < Infinity ? ` and at most ${max}` : ''}`, name);
  }
  return v;
}

// checkOptions refuses an own enumerable property of options that is not one
// of names: a misspelt option (or one this version does not have) is an
// error, not a silent default. Only the keys are read.
export function checkOptions(options, names, what) {
  for (const k in options) {
    if (!names.includes(k) && Object.hasOwn(options, k)) {
      throw new InvalidArgumentError(`lease-fence: ${what} has no option ${JSON.stringify(k)}; its options are ${names.join(', ')}`, `options.${k}`);
    }
  }
}

const CALL_OPTIONS = ['signal', 'timeoutMillis'];

export function isOptions(v) {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

export function checkSignal(signal, name) {
  if (signal !== undefined && !(signal instanceof AbortSignal)) {
    throw new InvalidArgumentError(`lease-fence: ${name} must be an AbortSignal`, name);
  }
  return signal;
}

/**
 * optionsOf checks the options argument of what (label names it in the
 * error when it is not an object) and returns its fields among names, each
 * read once: none when it is undefined, and options.signal and
 * options.timeoutMillis checked when names has them.
 */
export function optionsOf(options, names, what, label = 'call options') {
  const o = {};
  if (options === undefined) return o;
  if (!isOptions(options)) throw new InvalidArgumentError(`lease-fence: ${label} must be an object`, 'options');
  checkOptions(options, names, what);
  for (const k of names) o[k] = options[k];
  if (names.includes('signal')) checkSignal(o.signal, 'options.signal');
  if (o.timeoutMillis !== undefined) positive(o.timeoutMillis, 'options.timeoutMillis');
  return o;
}

export function callOptions(options, what) {
  if (what === 'client.acquire' && isOptions(options) && Object.hasOwn(options, 'waitMillis')) {
    throw new InvalidArgumentError('lease-fence: client.acquire has no option "waitMillis": it never waits; client.hold waits for a held resource (and keeps the lease alive)', 'options.waitMillis');
  }
  return optionsOf(options, CALL_OPTIONS, what);
}

// wholeMillis checks a count of milliseconds from 0 to max (Infinity
// allowed when infinite is set).
export function wholeMillis(v, name, max, infinite = false) {
  if (infinite && v === Infinity) return v;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 0 || v > max) {
    throw new InvalidArgumentError(`lease-fence: ${name} must be a whole number of milliseconds from 0 to ${max}${infinite ? ', or Infinity' : ''}`, name);
  }
  return v;
}


// checkResource refuses what cannot be a resource name before anything is
// sent (the coordinator checks the rest: its length limit).
export function checkResource(v, name) {
  if (typeof v !== 'string' || v === '' || !v.isWellFormed()) {
    throw new InvalidArgumentError(`lease-fence: ${name} must be a non-empty, well-formed string`, name);
  }
  return v;
}
