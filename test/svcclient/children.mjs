// What the service-client tests start and end: the native coordinator
// (out/bin/coordinator, or $COORDINATOR) and the Worker under wrangler dev,
// each on a free loopback port, their output kept line by line.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const root = fileURLToPath(new URL('../..', import.meta.url));
export const coordinatorBin = process.env.COORDINATOR || join(root, 'out/bin/coordinator');

// collect appends stream's lines to lines, calling onLine with each.
function collect(stream, lines, onLine) {
  let rest = '';
  stream.setEncoding('utf8');
  stream.on('data', (chunk) => {
    rest += chunk;
    let i;
    while ((i = rest.indexOf('\n')) >= 0) {
      const line = rest.slice(0, i);
      rest = rest.slice(i + 1);
      lines.push(line);
      onLine?.(line);
    }
  });
  stream.on('end', () => {
    if (rest) lines.push(rest);
  });
}

// waitFor resolves with the first group of the first match of re in
// child's output (both streams, kept in lines), and fails if the child
// exits first or nothing matches within 120 s.
export function waitFor(child, lines, re, what) {
  return new Promise((resolve, reject) => {
    const guard = setTimeout(() => reject(new Error(`${what}: not ready after 120 s:\n${lines.join('\n')}`)), 120_000);
    const onLine = (line) => {
      const m = re.exec(line);
      if (m) {
        clearTimeout(guard);
        resolve(m[1]);
      }
    };
    collect(child.stdout, lines, onLine);
    collect(child.stderr, lines, onLine);
    child.on('exit', (code) => {
      clearTimeout(guard);
      reject(new Error(`${what} exited (${code}) before it was ready:\n${lines.join('\n')}`));
    });
  });
}

/**
 * Starts the native coordinator with -addr 127.0.0.1:0 and args; resolves
 * with { url, log, child } once it listens (http or https). children, if
 * given, gets the child, for stop().
 */
export async function startCoordinator(args, children) {
  assert.ok(existsSync(coordinatorBin), `${coordinatorBin} is not built: run make coordinator`);
  const log = [];
  const child = spawn(coordinatorBin, ['-addr', '127.0.0.1:0', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  children?.push(child);
  const url = await waitFor(child, log, /listening on (https?:\/\/127\.0\.0\.1:\d+)/, 'coordinator');
  return { url, log, child };
}

/**
 * Starts the Worker under wrangler dev (offline, --inspector-port 0, its
 * state in a temporary folder removed when it exits) with args added to
 * wrangler's; resolves with { url, log, child } once it is ready.
 */
export async function startWorker(args, children) {
  assert.ok(existsSync(join(root, 'wasm/worker/build/app.wasm')), 'the Worker is not built: run make worker');
  const dir = mkdtempSync(join(tmpdir(), 'lease-fence-worker-'));
  const log = [];
  const child = spawn(join(root, 'node_modules/.bin/wrangler'), [
    'dev', '--ip', '127.0.0.1', '--port', '0', '--inspector-port', '0', '--persist-to', dir, '--log-level', 'info',
    '--show-interactive-dev-session=false', ...args,
  ], {
    cwd: join(root, 'wasm/worker'),
    env: { ...process.env, WRANGLER_SEND_METRICS: 'false', CLOUDFLARE_CF_FETCH_ENABLED: 'false', CI: '1', NO_COLOR: '1' },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true, // its own process group, ended as one
  });
  children?.push(child);
  child.on('exit', () => rmSync(dir, { recursive: true, force: true }));
  const url = await waitFor(child, log, /Ready on (http:\/\/127\.0\.0\.1:\d+)/, 'wrangler dev');
  workerLogs.set(url, { log, quoted: 0 });
  return { url, log, child };
}

// The output of each Worker started here, by its URL, for workerFault.
const workerLogs = new Map();

/**
 * For an answer of a Worker started here that the Worker did not write
 * (status 5xx, not JSON: wrangler dev's error page for an exception thrown
 * in the Worker, or its proxy's own refusals), a description with the lines
 * wrangler dev and workerd printed since the last one quoted; otherwise
 * undefined. The service answers every error as JSON, so such an answer is
 * never the service's.
 */
export function workerFault(url, status, text) {
  if (status < 500 || /^\s*\{/.test(text)) return undefined;
  const w = workerLogs.get(new URL(url).origin);
  if (!w) return undefined;
  const lines = w.log.slice(w.quoted);
  w.quoted = w.log.length;
  return `wrangler dev answered ${status} (not the service's JSON) to ${new URL(url).pathname}: ${text.slice(0, 300)}\n` +
    `its output since the last quote (${lines.length} lines):\n${lines.slice(-200).join('\n')}`;
}

// stop ends a child (wrangler: its whole process group) with signal
// (SIGINT unless given), and with SIGKILL if it is still there 15 s later.
export function stop(child, signal = 'SIGINT') {
  if (!child || child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  const done = new Promise((resolve) => child.once('exit', resolve));
  const send = (sig) => {
    try {
      if (child.spawnargs[0].endsWith('wrangler')) process.kill(-child.pid, sig);
      else child.kill(sig);
    } catch {
      // already gone
    }
  };
  send(signal);
  const kill = setTimeout(() => send('SIGKILL'), 15_000);
  return done.finally(() => clearTimeout(kill));
}
