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

/** Navigates to url and waits until the page has rendered its first run. */
export async function load(page, url) {
  await page.goto(url);
  await page.waitForSelector('body.ready', { timeout: 15000 });
}
