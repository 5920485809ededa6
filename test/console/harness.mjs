// What the console's browser tests share: a real coordinator (COORDINATOR,
// built by make coordinator) started with -ui on 127.0.0.1:0, calls to its
// API from Node, and headless Chromium (test/chromium.mjs) on its /ui/.
import { spawn } from 'node:child_process';
import { randomBytes, createHash } from 'node:crypto';
import { once } from 'node:events';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { stop, waitFor } from '../svcclient/children.mjs';

export const COORDINATOR = process.env.COORDINATOR ?? new URL('../../out/bin/coordinator', import.meta.url).pathname;

/**
 * Starts the coordinator with args (plus -addr 127.0.0.1:PORT, port 0 unless
 * given, and -quiet). Resolves with { url, port, proc, log, stop() }.
 */
export async function startCoordinator(args, port = 0) {
  const proc = spawn(COORDINATOR, ['-addr', `127.0.0.1:${port}`, '-quiet', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  const log = [];
  const url = await waitFor(proc, log, /^listening on (http:\/\/127\.0\.0\.1:\d+)$/, 'the coordinator');
  return {
    url,
    port: Number(new URL(url).port),
    proc,
    log,
    stop: () => stop(proc, 'SIGKILL'),
  };
}

/** POSTs body to path; resolves with { status, body }. */
export async function api(url, path, body, token) {
  const headers = { 'content-type': 'application/json' };
  if (token) headers.authorization = `Bearer ${token}`;
  const res = await fetch(url + path, { method: 'POST', headers, body: JSON.stringify(body) });
  return { status: res.status, body: await res.json() };
}

let n = 0;
/** A lease call's request: acquire or renew of resource by holder. */
export function request(kind, resource, holderId, extra = {}) {
  n++;
  return { requestId: `req-${process.pid}-${n}-${randomBytes(4).toString('hex')}`, resource, holderId, sentAt: { millis: performance.now(), domain: holderId }, kind, ...extra };
}

/** Acquires resource for holder (waiting up to waitMillis); resolves with the answer's body. */
export async function acquire(url, resource, holderId, { token, waitMillis } = {}) {
  const secret = randomBytes(24).toString('hex');
  const extra = { secret };
  if (waitMillis) extra.waitMillis = waitMillis;
  const a = await api(url, '/v1/acquire', request('acquire', resource, holderId, extra), token);
  if (a.status !== 200) throw new Error(`acquire ${resource}: ${a.status} ${JSON.stringify(a.body)}`);
  return { ...a.body, secret };
}

/** Renews or releases the lease g (an acquire's answer) of resource. */
export async function renew(url, resource, holderId, g, token) {
  return api(url, '/v1/renew', request('renew', resource, holderId, { fence: g.grant.fence, secret: g.secret }), token);
}
export async function release(url, resource, holderId, g, token) {
  return api(url, '/v1/release', { requestId: `rel-${randomBytes(6).toString('hex')}`, resource, holderId, fence: g.grant.fence, secret: g.secret }, token);
}

/** Writes a tokens file into dir for tokens [{ name, token, resources, holders, admin }]; returns its path. */
export function writeTokens(dir, tokens) {
  const file = join(dir, 'tokens.json');
  writeFileSync(file, JSON.stringify(tokens.map((t) => ({
    name: t.name,
    tokenSha256: createHash('sha256').update(t.token).digest('hex'),
    resources: t.resources,
    holders: t.holders ?? ['*'],
    ...(t.admin ? { admin: true } : {}),
  }))));
  return file;
}

/**
 * Follows the coordinator's events from Node (POST /v1/watch; with
 * refusals, GET /ui/api/rejections and its gates' refusals), as the test's
 * witness of when an event was sent: next(pred) resolves with the first
 * event (past or future) for which pred is true, its seenAt the wall clock
 * when this witness read it; seen() returns those read so far.
 */
export function watchFromNode(url, token, { refusals = false } = {}) {
  const seen = [];
  const waiting = [];
  const ac = new AbortController();
  let hello;
  const ready = new Promise((resolve) => { hello = resolve; });
  (async () => {
    const headers = { 'content-type': 'application/json' };
    if (token) headers.authorization = `Bearer ${token}`;
    const res = refusals
      ? await fetch(`${url}/ui/api/rejections`, { headers, signal: ac.signal })
      : await fetch(`${url}/v1/watch`, { method: 'POST', headers, body: '{}', signal: ac.signal });
    const dec = new TextDecoder();
    let buf = '';
    for await (const chunk of res.body) {
      buf += dec.decode(chunk, { stream: true });
      let i;
      while ((i = buf.indexOf('\n\n')) >= 0) {
        const block = buf.slice(0, i);
        buf = buf.slice(i + 2);
        const data = block.split('\n').find((l) => l.startsWith('data: '));
        if (block.includes('event: hello')) hello();
        if (!data || block.includes('event: hello')) continue;
        const ev = { ...JSON.parse(data.slice(6)), seenAt: Date.now() };
        seen.push(ev);
        for (const w of [...waiting]) {
          if (w.pred(ev)) {
            waiting.splice(waiting.indexOf(w), 1);
            w.resolve(ev);
          }
        }
      }
    }
  })().catch(() => {});
  return {
    next(pred) {
      const ev = seen.find(pred);
      if (ev) return Promise.resolve(ev);
      return new Promise((resolve) => waiting.push({ pred, resolve }));
    },
    /** Resolves once the stream said hello: every later event will be read. */
    ready,
    /** The events read so far, in the order of the stream. */
    seen: () => [...seen],
    close: () => ac.abort(),
  };
}

/**
 * A TCP relay on 127.0.0.1:0 to port: the page is loaded through it, so
 * that cut() can drop every connection the page has (its event stream
 * included) while the coordinator runs on, and hold() can keep what the
 * coordinator sends from the page (a silent stream, the connection open)
 * until flow().
 */
export async function startRelay(port) {
  const net = await import('node:net');
  const socks = new Set();
  let held = false;
  const server = net.createServer((a) => {
    const b = net.connect(port, '127.0.0.1');
    socks.add(a);
    socks.add(b);
    a.pipe(b).pipe(a);
    if (held) b.pause();
    const end = () => {
      a.destroy();
      b.destroy();
      socks.delete(a);
      socks.delete(b);
    };
    a.on('error', end).on('close', end);
    b.on('error', end).on('close', end);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    cut() {
      for (const s of socks) s.destroy();
      socks.clear();
    },
    hold() {
      held = true;
      for (const s of socks) if (s.remotePort === port) s.pause();
    },
    flow() {
      held = false;
      for (const s of socks) if (s.remotePort === port) s.resume();
    },
    close() {
      for (const s of socks) s.destroy();
      return new Promise((resolve) => server.close(resolve));
    },
  };
}

export const FENCE_PROXY = process.env.FENCE_PROXY ?? new URL('../../out/bin/fence-proxy', import.meta.url).pathname;

/**
 * Starts fence-proxy (a fresh state file in dir) in front of upstream on
 * 127.0.0.1:0. Resolves with { url, stop() }.
 */
export async function startFenceProxy(dir, upstream) {
  const proc = spawn(FENCE_PROXY, ['-init', '-state', join(dir, 'fence-proxy.db'), '-upstream', upstream, '-listen', '127.0.0.1:0', '-quiet'], { stdio: ['ignore', 'pipe', 'pipe'] });
  const url = await waitFor(proc, [], /^listening on (http:\/\/127\.0\.0\.1:\d+)$/, 'fence-proxy');
  return {
    url,
    stop: () => stop(proc, 'SIGKILL'),
  };
}
