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

/** Base class of every error this library throws. */
export class LeaseFenceError extends Error {
  static {
    Object.defineProperty(this.prototype, 'name', { value: 'LeaseFenceError', writable: true, configurable: true });
  }
}

function named(cls, name) {
  Object.defineProperty(cls.prototype, 'name', { value: name, writable: true, configurable: true });
  return cls;
}

// errorOptions returns what Error's constructor takes from options: { cause }
// when options has one, so that an absent cause stays absent.
function errorOptions(options) {
  return isObject(options) && 'cause' in options ? { cause: options.cause } : undefined;
}

function field(options, key, otherwise) {
  return isObject(options) && options[key] !== undefined ? options[key] : otherwise;
}

/** An argument had the wrong type or value; nothing was changed. */
export class InvalidArgumentError extends LeaseFenceError {
  constructor(message, options) {
    super(message, errorOptions(options));
    /** The argument's path, e.g. "request.sentAt.millis". */
    this.argument = typeof options === 'string' ? options : String(field(options, 'argument', ''));
  }
}
named(InvalidArgumentError, 'InvalidArgumentError');

/** A gate refused a token whose fence is below its floor. */
export class StaleFenceError extends LeaseFenceError {
  constructor(message, options) {
    super(message, errorOptions(options));
    /** The entry this refusal appended to gate.rejections. */
    this.rejection = field(options, 'rejection', null);
  }
}
named(StaleFenceError, 'StaleFenceError');

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
export class ClockDomainError extends LeaseFenceError {
  constructor(message, options) {
    super(message, errorOptions(options));
    this.expectedDomain = field(options, 'expectedDomain', '');
    this.actualDomain = field(options, 'actualDomain', '');
  }
}
named(ClockDomainError, 'ClockDomainError');

/** A clock source produced a reading that is NaN, infinite or backwards. */
export class ClockReadingError extends LeaseFenceError {
  constructor(message, options) {
    super(message, errorOptions(options));
    this.domain = field(options, 'domain', '');
    /** 'not a number', 'infinite' or 'lower than an earlier reading'. */
    this.problem = field(options, 'problem', '');
    this.value = field(options, 'value', NaN);
    this.previous = field(options, 'previous', NaN);
  }
}
named(ClockReadingError, 'ClockReadingError');

/** A request was completed a second time. */
export class RequestCompletedError extends LeaseFenceError {
  constructor(message, options) {
    super(message, errorOptions(options));
    this.requestId = field(options, 'requestId', '');
  }
}
named(RequestCompletedError, 'RequestCompletedError');

/** A grant does not answer the request it was completed with. */
export class GrantMismatchError extends LeaseFenceError {
  constructor(message, options) {
    super(message, errorOptions(options));
    /** 'requestId', 'resource', 'holderId' or 'fence'. */
    this.field = field(options, 'field', '');
    this.expected = field(options, 'expected', '');
    this.actual = field(options, 'actual', '');
  }
}
named(GrantMismatchError, 'GrantMismatchError');

/**
 * The reason a commitAsync write's signal aborted with: a newer fence reached
 * the gate while the write ran (admitted by gate.admit, or a write with a
 * higher fence waiting for this one). The write's lease was superseded; the
 * gate still waits for the write to finish.
 */
export class SupersededError extends LeaseFenceError {
  constructor(message, options) {
    super(message, errorOptions(options));
    this.resource = field(options, 'resource', '');
    /** The running write's holder and fence. */
    this.holderId = field(options, 'holderId', '');
    this.fence = field(options, 'fence', 0);
    /** The newer fence and its holder. */
    this.newerHolderId = field(options, 'newerHolderId', '');
    this.newerFence = field(options, 'newerFence', 0);
    /** True when a write with the newer fence waits for this one; false when gate.admit admitted it. */
    this.newerWaiting = field(options, 'newerWaiting', false);
  }
}
named(SupersededError, 'SupersededError');

/**
 * A commitAsync that waited for its turn and gave up (its signal aborted):
 * names the write it waited for. The signal's reason is the cause.
 */
export class GateBusyError extends LeaseFenceError {
  constructor(message, options) {
    super(message, errorOptions(options));
    this.resource = field(options, 'resource', '');
    /** The write that gave up. */
    this.holderId = field(options, 'holderId', '');
    this.fence = field(options, 'fence', 0);
    /** The write that was running, and how long it had run. */
    this.runningHolderId = field(options, 'runningHolderId', '');
    this.runningFence = field(options, 'runningFence', 0);
    this.runningMillis = field(options, 'runningMillis', 0);
  }
}
named(GateBusyError, 'GateBusyError');

function isObject(v) {
  return (typeof v === 'object' && v !== null) || typeof v === 'function';
}
