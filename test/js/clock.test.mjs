// Clock domains and guarded clocks.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import {
  createClock, createManualClock, createMonotonicClock,
  ClockDomainError, ClockReadingError, InvalidArgumentError, LeaseFenceError,
} from 'lease-fence';

describe('instants', () => {
  test('a reading is { millis, domain } in the clock\'s domain', () => {
    const c = createManualClock('a', { start: 42 });
    const t = c.now();
    assert.equal(t.millis, 42);
    assert.equal(t.domain, 'a');
    assert.equal(c.domain, 'a');
    assert.deepEqual(JSON.parse(JSON.stringify(t)), { millis: 42, domain: 'a' });
  });

  test('since subtracts within a domain', () => {
    const c = createManualClock('a', { start: 10 });
    const t1 = c.now();
    c.advance(25.5);
    assert.equal(c.now().since(t1), 25.5);
    assert.equal(t1.since({ millis: 4, domain: 'a' }), 6);
  });

  test('since across domains throws ClockDomainError instead of a number', () => {
    const a = createManualClock('a').now();
    const b = createManualClock('b').now();
    assert.throws(() => a.since(b), (e) => e instanceof ClockDomainError && e.expectedDomain === 'a' && e.actualDomain === 'b');
    assert.throws(() => a.since({ millis: 0, domain: 'b' }), ClockDomainError);
  });

  test('two clocks with the same readings stay apart', () => {
    const x = createManualClock('x', { start: 100 });
    const y = createManualClock('y', { start: 100 });
    assert.throws(() => x.now().since(y.now()), ClockDomainError);
  });

  test('since checks its argument', () => {
    const t = createManualClock('a').now();
    assert.throws(() => t.since(5), (e) => e instanceof InvalidArgumentError && e.argument === 'earlier');
    assert.throws(() => t.since({ millis: NaN, domain: 'a' }), (e) => e.argument === 'earlier.millis');
    assert.throws(() => t.since({ millis: 1 }), (e) => e.argument === 'earlier.domain');
  });
});

describe('manual clocks', () => {
  test('stepPerRead moves the clock on every read', () => {
    const c = createManualClock('m', { start: 100, stepPerRead: 7 });
    assert.deepEqual([c.now().millis, c.now().millis, c.now().millis], [100, 107, 114]);
  });

  test('a clock without a step stands still between calls', () => {
    const c = createManualClock('m');
    assert.equal(c.now().millis, 0);
    assert.equal(c.now().millis, 0);
    c.advance(3);
    assert.equal(c.now().millis, 3);
  });

  test('set moves forward and never backwards', () => {
    const c = createManualClock('m', { start: 50 });
    c.set(80);
    assert.equal(c.now().millis, 80);
    assert.throws(() => c.set(79), (e) => e instanceof ClockReadingError && e.problem === 'lower than an earlier reading');
    assert.equal(c.now().millis, 80, 'a refused set changes nothing');
  });

  test('advance refuses negative, NaN and infinite amounts', () => {
    const c = createManualClock('m');
    for (const bad of [-1, NaN, Infinity, '5', undefined]) {
      assert.throws(() => c.advance(bad), InvalidArgumentError, String(bad));
    }
    assert.equal(c.now().millis, 0);
  });

  test('bad options are refused', () => {
    assert.throws(() => createManualClock(''), (e) => e instanceof InvalidArgumentError && e.argument === 'domain');
    assert.throws(() => createManualClock('m', { stepPerRead: -1 }), (e) => e.argument === 'options.stepPerRead');
    assert.throws(() => createManualClock('m', { start: Infinity }), (e) => e.argument === 'options.start');
    assert.throws(() => createManualClock('m', 'fast'), (e) => e.argument === 'options');
  });
});

describe('guarded clock sources', () => {
  test('a source that steps backwards throws ClockReadingError and keeps the last good reading', () => {
    const readings = [10, 20, 15, 25];
    const c = createClock('ntp', () => readings.shift());
    assert.equal(c.now().millis, 10);
    assert.equal(c.now().millis, 20);
    assert.throws(() => c.now(), (e) => e instanceof ClockReadingError && e.value === 15 && e.previous === 20 && e.domain === 'ntp');
    assert.equal(c.now().millis, 25);
  });

  test('NaN, infinite and non-number readings are refused', () => {
    for (const [v, problem] of [[NaN, 'not a number'], [Infinity, 'infinite'], [-Infinity, 'infinite'], ['7', 'not a number'], [7n, 'not a number']]) {
      const c = createClock('src', () => v);
      assert.throws(() => c.now(), (e) => e instanceof ClockReadingError && e.problem === problem, String(v));
    }
  });

  test('an exception from the source reaches the caller unchanged', () => {
    const boom = new RangeError('sensor offline');
    const c = createClock('src', () => { throw boom; });
    assert.throws(() => c.now(), (e) => e === boom);
  });

  test('a source may not call back into the library', () => {
    const other = createManualClock('other');
    const c = createClock('src', () => other.now().millis);
    assert.throws(() => c.now(), (e) => e instanceof LeaseFenceError && /must not call into lease-fence/.test(e.message));
    assert.equal(other.now().millis, 0, 'the library still works afterwards');
  });

  test('createClock checks its arguments', () => {
    assert.throws(() => createClock('src', 5), (e) => e instanceof InvalidArgumentError && e.argument === 'readMillis');
    assert.throws(() => createClock(undefined, () => 1), (e) => e.argument === 'domain');
  });

  test('the monotonic clock never goes backwards', () => {
    const c = createMonotonicClock('mono');
    let prev = c.now();
    for (let i = 0; i < 1000; i++) {
      const t = c.now();
      assert.ok(t.since(prev) >= 0);
      prev = t;
    }
    assert.equal(prev.domain, 'mono');
  });

  test('Date.now wrapped by createClock', () => {
    const c = createClock('wall', () => Date.now());
    const t = c.now();
    assert.equal(t.domain, 'wall');
    assert.ok(Number.isFinite(t.millis));
  });
});
