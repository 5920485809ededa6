// What the JavaScript benchmark scripts share: a sample's figures, the load
// average, a fresh Node process timed from inside, and the two pages of a
// web benchmark (this one, and WEB_BEFORE's).
import { execFileSync } from 'node:child_process';
import { loadavg } from 'node:os';

/** n, min, median (the mean of the middle two of an even count), p95 and max of xs; NaN for none. */
export function stats(xs) {
  const s = Float64Array.from(xs).sort();
  const n = s.length;
  if (n === 0) return { n, min: NaN, median: NaN, p95: NaN, max: NaN };
  const median = n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
  return { n, min: s[0], median, p95: s[Math.max(0, Math.ceil(0.95 * n) - 1)], max: s[n - 1] };
}

/** The load average, "1.23 0.98 0.87". */
export const load = () => loadavg().map((x) => x.toFixed(2)).join(' ');

/**
 * Runs code (module code, top-level await allowed) in a fresh node process
 * in cwd; returns [wall ms, CPU ms of the process (all threads)] from just
 * before code to just after it.
 */
export function freshNode(code, cwd) {
  const timed = `const c0 = process.cpuUsage();
const t0 = performance.now();
${code}
const c = process.cpuUsage(c0);
console.log(performance.now() - t0, (c.user + c.system) / 1000);`;
  return execFileSync(process.execPath, ['--input-type=module', '-e', timed], { cwd, encoding: 'utf8' }).trim().split(' ').map(Number);
}

/**
 * The pages a web benchmark times, each served by its own server from
 * startServer (test/web/harness.mjs): this checkout's web/, and first,
 * when WEB_BEFORE names another copy of web/ (e.g. `git archive main web`),
 * that one. Each side is { name, server, ...fields }.
 */
export async function pageSides(startServer, fields) {
  const sides = [{ name: 'this page', server: await startServer(), ...fields() }];
  const before = process.env.WEB_BEFORE;
  if (before) sides.unshift({ name: `before (${before})`, server: await startServer(['-web', before]), ...fields() });
  return sides;
}
