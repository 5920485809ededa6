// Shared by the browser tests and the load-time benchmark: starts the dev
// server on a free port and a headless Chromium, and records what the page
// logs and requests.

import { spawn } from 'node:child_process';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createInterface } from 'node:readline';
import { launch as launchChromium } from '../chromium.mjs';

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const SCREENSHOTS = join(ROOT, 'out', 'test', 'screenshots');

/**
 * Starts the dev server (built by `make devserver`; DEVSERVER overrides the
 * path, MODULE_DIR the module folder) on port 0, with args added (e.g. live
 * mode's -coordinator), and resolves with { url, close } once it has printed
 * its URL.
 */
export async function startServer(args = []) {
  const bin = process.env.DEVSERVER ?? join(ROOT, 'out', 'bin', 'devserver');
  const moduleDir = process.env.MODULE_DIR ?? join(ROOT, 'wasm', 'js');
  const child = spawn(bin, ['-port', '0', '-quiet', '-web', join(ROOT, 'web'), '-module', moduleDir, ...args], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const url = await new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', (code) => reject(new Error(`devserver exited with code ${code} before printing its URL`)));
    createInterface({ input: child.stdout }).once('line', resolve);
  });
  if (!/^http:\/\/127\.0\.0\.1:\d+\/$/.test(url)) throw new Error(`devserver printed ${JSON.stringify(url)}`);
  return {
    url,
    async close() {
      if (child.exitCode !== null) return;
      const gone = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      await gone;
    },
  };
}

/**
 * Launches headless Chromium with a throwaway profile (test/chromium.mjs)
 * and a 1360x1000 viewport. Resolves with { context, close }.
 */
export function launch() {
  return launchChromium({ viewport: { width: 1360, height: 1000 } });
}

/**
 * Opens a page that records console errors, page errors and every request.
 * Returns { page, errors, requests }.
 */
export async function openPage(context, viewport) {
  const page = await context.newPage();
  if (viewport) await page.setViewportSize(viewport);
  const errors = [];
  const requests = [];
  page.on('console', (m) => {
    if (m.type() === 'error' || m.type() === 'warning') errors.push(`${m.type()}: ${m.text()}`);
  });
  page.on('pageerror', (e) => errors.push(`pageerror: ${e.message}`));
  page.on('request', (r) => requests.push(r.url()));
  return { page, errors, requests };
}

/**
 * The tabs of one file's tests, each opened once and navigated afresh by
 * every open() that reuses it, since a new tab costs Chromium about 2 s of
 * CPU. open(url, viewport) resolves with openPage's { page, errors,
 * requests } and dialogs (each dismissed), loaded as load() does: a new
 * document, with its own errors, requests and dialogs (the playground keeps
 * nothing beyond its URL). done(page) gives the tab back; a test that
 * fails keeps its tab. A test that needs a tab of its own (an init script,
 * a route) opens one with openPage.
 */
export function tabs(context, viewport = { width: 1360, height: 1000 }) {
  const idle = [];
  const mine = new Map();
  return {
    async open(url, size = viewport) {
      let o = idle.pop();
      if (!o) {
        o = await openPage(context);
        o.dialogs = [];
        o.page.on('dialog', (d) => {
          o.dialogs.push(d.message());
          d.dismiss();
        });
        mine.set(o.page, o);
      }
      await o.page.goto('about:blank');
      o.errors.length = 0;
      o.requests.length = 0;
      o.dialogs.length = 0;
      await o.page.setViewportSize(size);
      await load(o.page, url);
      return o;
    },
    done(page) {
      if (mine.has(page)) idle.push(mine.get(page));
    },
  };
}

/**
 * Moves the page to position i (-1: the end) through the scrubber, as a
 * user would, and resolves with the last position.
 */
export const goTo = (page, i) =>
  page.evaluate((i) => {
    const s = document.getElementById('scrubber');
    const last = Number(s.max);
    s.value = String(i < 0 ? last : i);
    s.dispatchEvent(new Event('input', { bubbles: true }));
    return last;
  }, i);

/**
 * Navigates to url and waits until the page has rendered its first run. The
 * deadlines guard against a hang only: beside other suites on two loaded
 * cores a load (2.7 MB of wasm compiled, the first run drawn) has taken
 * over 15 s.
 */
export async function load(page, url) {
  await page.goto(url, { timeout: 120_000 });
  await page.waitForSelector('body.ready', { timeout: 120_000 });
}
