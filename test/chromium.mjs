// What the browser tests share: headless Chromium (playwright-core driving
// Debian's chromium-headless-shell, /usr/bin/chromium-headless-shell;
// CHROMIUM overrides the path) with a throwaway profile, and the answers of
// a test server that serves a page and the package's module files to it.
// The headless shell is Chromium's Blink and V8 without the browser's UI
// layer: the same pages in about half the CPU time of /usr/bin/chromium
// run headless (docs/benchmarks.md, "Test suite times").
import { mkdtemp, rm } from 'node:fs/promises';
import { readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';

export const CHROMIUM_ARGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/**
 * Launches headless Chromium with a fresh profile in a temp folder; options
 * are added to launchPersistentContext's (e.g. viewport). Resolves with
 * { context, close }; close() ends the browser and removes the profile.
 */
export async function launch(options = {}) {
  const profile = await mkdtemp(join(tmpdir(), 'lease-fence-chromium-'));
  let context;
  try {
    context = await chromium.launchPersistentContext(profile, {
      executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium-headless-shell',
      headless: true,
      args: CHROMIUM_ARGS,
      ...options,
    });
  } catch (e) {
    await rm(profile, { recursive: true, force: true });
    throw e;
  }
  return {
    context,
    async close() {
      try {
        await context.close();
      } finally {
        await rm(profile, { recursive: true, force: true });
      }
    },
  };
}

const jsDir = new URL('../wasm/js/', import.meta.url);
// A page may load only what the package publishes.
const packaged = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')).files;

/**
 * Answers the request for name (its path without the leading slash):
 * index.html is page, a .mjs file the package publishes from wasm/js/ is
 * that file, lease-fence.wasm is sent as wasmType, anything else is a 404.
 */
export function servePackage(res, name, page, wasmType = 'application/wasm') {
  if (name === 'index.html') {
    res.writeHead(200, { 'content-type': 'text/html' }).end(page);
  } else if (name.endsWith('.mjs') && packaged.includes(`wasm/js/${name}`)) {
    res.writeHead(200, { 'content-type': 'text/javascript' }).end(readFileSync(new URL(name, jsDir)));
  } else if (name === 'lease-fence.wasm') {
    res.writeHead(200, { 'content-type': wasmType }).end(readFileSync(new URL(name, jsDir)));
  } else {
    res.writeHead(404).end();
  }
}
