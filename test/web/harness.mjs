// Shared by the browser tests and the load-time benchmark: starts the dev
// server on a free port and a headless Chromium, records what the page
// logs and requests, and checks every position of a run in one call to
// the page (atEach).

import { before, after } from 'node:test';
import { spawn } from 'node:child_process';
import { mkdir } from 'node:fs/promises';
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
 * A test file's dev server and Chromium, started before its tests (with
 * out/test/screenshots made) and ended after them. args are the server's
 * (startServer), or an async function called in the before hook that
 * resolves with them. Returns { server, browser, tab }, set by the before
 * hook: startServer's and launch's answers, and tabs(browser.context,
 * viewport, initScript).
 */
export function useBrowser({ args = [], viewport, initScript } = {}) {
  const web = { server: null, browser: null, tab: null };
  before(async () => {
    await mkdir(SCREENSHOTS, { recursive: true });
    web.server = await startServer(typeof args === 'function' ? await args() : args);
    web.browser = await launch();
    web.tab = tabs(web.browser.context, viewport, initScript);
  });
  after(async () => {
    await web.browser?.close();
    await web.server?.close();
  });
  return web;
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
 * every open() that reuses it: a new tab and the playground loaded in it
 * cost Chromium half as much CPU again as the same load in a tab it has
 * (docs/benchmarks.md, "Test suite times"). open(url, viewport) resolves
 * with openPage's { page, errors, requests } and dialogs (each dismissed),
 * loaded as load() does: a new document, with its own errors, requests
 * and dialogs (the playground keeps nothing beyond its URL). done(page)
 * gives the tab back; a test that fails keeps its tab. initScript (a
 * string), if given, runs in every document of every tab
 * (page.addInitScript). A test that needs a tab of its own (another init
 * script, a route) opens one with openPage.
 */
export function tabs(context, viewport = { width: 1360, height: 1000 }, initScript = null) {
  const idle = [];
  const mine = new Map();
  return {
    async open(url, size = viewport) {
      let o = idle.pop();
      if (!o) {
        o = await openPage(context);
        if (initScript) await o.page.addInitScript(initScript);
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
 * In the page: moves to each position of at (-1: the end; null: every
 * position, 0 to the last) through the scrubber, as goTo does, and calls
 * check(arg) there, in the same task. The page renders a position in the
 * scrubber's input event, so check sees what goTo then check would; but no
 * frame is painted between two positions (a round trip to the page per
 * position let Chromium paint each). check is self-contained, as for
 * page.evaluate (checks.mjs labelProblems), or such a function's source.
 * Resolves with { last, at, results }: the last position, the positions
 * visited (-1 made last) and what check returned at each.
 */
export const atEach = (page, at, check, arg = null) => page.evaluate(`(${walk})(${JSON.stringify(at)}, ${check}, ${JSON.stringify(arg)})`);

function walk(at, check, arg) {
  const s = document.getElementById('scrubber');
  const last = Number(s.max);
  const positions = (at ?? Array.from({ length: last + 1 }, (_, k) => k)).map((i) => (i < 0 ? last : i));
  const results = positions.map((i) => {
    s.value = String(i);
    s.dispatchEvent(new Event('input', { bubbles: true }));
    return check(arg);
  });
  return { last, at: positions, results };
}

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
