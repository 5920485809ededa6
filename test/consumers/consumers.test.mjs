// Every host in docs/js.md's "Using it in your build" table, tried as a user
// would: `npm pack` this package, install the tarball (offline; it has no
// dependencies) into a fresh folder holding the small apps in app/, build
// each app with its tool, run it, and check its output. Each app runs the
// same round trip (acquire, commit through a gate, a stale fence refused)
// and reports the global object's own properties that loading added.
//
// Builds and the Node-side runs happen in parallel; the browser bundles run
// in one headless Chromium, one page each; the Worker runs under
// `wrangler dev` (offline, state in the temp folder, port chosen by wrangler).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { extname, join, normalize } from 'node:path';
import { fileURLToPath } from 'node:url';
import { launch } from '../chromium.mjs';

const repo = fileURLToPath(new URL('../../', import.meta.url));
const bin = (name) => join(repo, 'node_modules', '.bin', name);
const started = performance.now();

const expected = { added: [], fence: 1, written: 'written', refused: true, rejections: 1 };
const service = { service: { fence: 1, written: 'written', released: true } };
const inBrowser = { ...expected, process: 'undefined' };

let dir, app, server, base, browser;
const servers = [];
const steps = {};

function run(file, args, options = {}) {
  return new Promise((resolve, reject) => {
    execFile(file, args, { cwd: app, maxBuffer: 1 << 26, ...options, env: { ...process.env, ...options.env } }, (err, stdout, stderr) => {
      if (err) reject(new Error(`${file} ${args.join(' ')} failed: ${err.message}\n${stdout.slice(-2000)}\n${stderr.slice(-4000)}`));
      else resolve(stdout);
    });
  });
}

const lastJSON = (stdout) => JSON.parse(stdout.trim().split('\n').pop());

// step starts fn now and keeps its promise for the test that checks it.
const timings = {};
function step(name, fn) {
  const t0 = performance.now();
  steps[name] = fn();
  steps[name].then(() => {
    timings[name] = Math.round(performance.now() - t0);
  }, () => {});
  steps[name].catch(() => {}); // reported by the test that awaits it
}

const types = { '.html': 'text/html', '.js': 'text/javascript', '.mjs': 'text/javascript', '.wasm': 'application/wasm' };

// serve starts a dev server (wrangler dev, vite dev) on a port it picks and
// resolves with the URL it prints once it is ready.
function serve(file, args, cwd, ready, env = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, {
      cwd,
      detached: true, // its own process group, ended as one in after()
      env: { ...process.env, NO_COLOR: '1', CI: '1', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    servers.push(child);
    let log = '';
    const seen = (chunk) => {
      log += chunk;
      const m = ready.exec(log.replace(/\x1b\[[0-9;]*m/g, ''));
      if (m) resolve(m[1]);
    };
    child.stdout.on('data', seen);
    child.stderr.on('data', seen);
    child.on('exit', (code) => reject(new Error(`${file} ${args.join(' ')} exited with ${code} before it was ready:\n${log.slice(-4000)}`)));
  });
}

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'lease-fence-consumers-'));
  app = join(dir, 'app');
  cpSync(new URL('./app/', import.meta.url), app, { recursive: true });
  writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'lease-fence-consumer', private: true, type: 'module' }));
  const [packed] = JSON.parse(await run('npm', ['pack', '--json', '--pack-destination', dir], { cwd: repo }));
  await run('npm', ['install', '--offline', '--no-audit', '--no-fund', '--loglevel=error', join(dir, packed.filename)]);

  // Everything that only needs the installed package starts at once.
  step('node', () => run(process.execPath, ['node.mjs']).then(lastJSON));
  step('deno', () => run(bin('deno'), ['run', '--allow-read', '--allow-env', 'node.mjs'], { env: { DENO_DIR: join(dir, 'deno'), NO_COLOR: '1' } }).then(lastJSON));
  step('bun', () => run(bin('bun'), ['node.mjs'], { env: { BUN_INSTALL_CACHE_DIR: join(dir, 'bun') } }).then(lastJSON));
  step('cjs', () => run(process.execPath, ['cjs.cjs']).then(lastJSON));
  step('ts-cjs', async () => {
    await run(bin('tsc'), ['-p', 'ts-cjs']);
    return lastJSON(await run(process.execPath, ['ts-cjs/out/main.js']));
  });
  step('ts-bundler', async () => {
    await run(bin('tsc'), ['-p', 'ts-bundler']);
    return lastJSON(await run(process.execPath, ['ts-bundler/out/main.js']));
  });
  step('esbuild-node', async () => {
    await run(bin('esbuild'), ['esbuild-node.mjs', '--bundle', '--format=esm', '--platform=node', '--target=node20',
      '--loader:.wasm=binary', '--outfile=out/esbuild-node/app.mjs', '--log-level=warning']);
    // The bundle stands alone: run it from a folder with no node_modules.
    const alone = join(dir, 'alone');
    mkdirSync(alone);
    cpSync(join(app, 'out/esbuild-node/app.mjs'), join(alone, 'app.mjs'));
    return lastJSON(await run(process.execPath, ['app.mjs'], { cwd: alone }));
  });
  step('esbuild-browser', async () => {
    await run(bin('esbuild'), ['esbuild-browser.mjs', '--bundle', '--format=esm', '--platform=browser',
      '--loader:.wasm=file', '--outdir=out/esbuild-browser', '--log-level=warning']);
    writeFileSync(join(app, 'out/esbuild-browser/index.html'), '<!doctype html><meta charset="utf-8"><link rel="icon" href="data:,"><script type="module" src="esbuild-browser.js"></script>');
    return readFileSync(join(app, 'out/esbuild-browser/esbuild-browser.js'), 'utf8');
  });
  step('webpack', async () => {
    await run(bin('webpack'), ['--config', 'webpack.config.mjs', '--no-stats']);
    writeFileSync(join(app, 'out/webpack/index.html'), '<!doctype html><meta charset="utf-8"><link rel="icon" href="data:,"><script src="app.js"></script>');
  });
  step('vite', () => run(bin('vite'), ['build', '--config', 'vite.config.mjs']));
  step('rollup', async () => {
    await run(bin('rollup'), ['-c', 'rollup.config.mjs', '--silent'], { env: { LEASE_FENCE_REPO: repo } });
    writeFileSync(join(app, 'out/rollup/index.html'), '<!doctype html><meta charset="utf-8"><link rel="icon" href="data:,"><script type="module" src="browser-default.js"></script>');
  });
  step('worker', () => serve(bin('wrangler'), ['dev', '--ip', '127.0.0.1', '--port', '0', '--inspector-port', '0',
    '--persist-to', join(dir, 'wrangler-state'), '--log-level', 'info'], join(app, 'worker'), /Ready on (http:\/\/127\.0\.0\.1:\d+)/,
  { WRANGLER_SEND_METRICS: 'false', CLOUDFLARE_CF_FETCH_ENABLED: 'false', XDG_CONFIG_HOME: join(dir, 'config') }));
  step('vite-dev', () => serve(bin('vite'), ['--config', 'vite-dev.config.mjs'], app, /Local:\s+(http:\/\/127\.0\.0\.1:\d+\/)/));
  step('chromium', async () => {
    browser = await launch();
  });

  const out = join(app, 'out');
  server = createServer((req, res) => {
    const path = normalize(decodeURIComponent(new URL(req.url, 'http://x').pathname));
    try {
      const body = readFileSync(join(out, path));
      res.writeHead(200, { 'content-type': types[extname(path)] ?? 'application/octet-stream' }).end(body);
    } catch {
      res.writeHead(404).end();
    }
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${server.address().port}/`;
});

after(async () => {
  for (const child of servers) {
    if (child.exitCode === null && child.signalCode === null) process.kill(-child.pid, 'SIGTERM');
  }
  await browser?.close();
  server?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
  console.log(`consumer suite: ${((performance.now() - started) / 1000).toFixed(1)} s; ms per step from the start of the builds: ${JSON.stringify(timings)}`);
});

// page opens out/<name>/index.html and returns what the app left in
// window.result, with the page's errors if it left none.
async function page(name, url = `${base}${name}/index.html`) {
  await steps.chromium;
  const tab = await browser.context.newPage();
  const problems = [];
  tab.on('pageerror', (e) => problems.push(String(e)));
  tab.on('console', (m) => m.type() === 'error' && problems.push(m.text()));
  try {
    await tab.goto(url);
    await Promise.race([
      tab.waitForFunction(() => window.result !== undefined),
      new Promise((resolve, reject) => tab.on('pageerror', reject)),
    ]);
    return { result: await tab.evaluate(() => window.result), problems };
  } finally {
    await tab.close();
  }
}

describe('a consumer built from the packed tarball runs the round trip', () => {
  test('Node, ES module import (the node entry)', async () => {
    assert.deepEqual(await steps.node, { entry: 'node.mjs', ...expected, ...service });
  });

  test('Deno (the node entry)', async () => {
    assert.deepEqual(await steps.deno, { entry: 'node.mjs', ...expected, ...service });
  });

  test('Bun (the node entry)', async () => {
    assert.deepEqual(await steps.bun, { entry: 'node.mjs', ...expected, ...service });
  });

  test('Node, CommonJS require() then load(), and the service client\'s require() then load()', async () => {
    assert.deepEqual(await steps.cjs, { ...expected, ...service, sameLibrary: true });
  });

  test('TypeScript module nodenext in a CommonJS project, the library and the service client: compiles and runs', async () => {
    assert.deepEqual(await steps['ts-cjs'], { ...expected, serviceClient: 'a' });
  });

  test('TypeScript moduleResolution bundler: lease-fence/init, WasmSource, the service client; compiles and runs', async () => {
    assert.deepEqual(await steps['ts-bundler'], { ...expected, serviceClient: 'function' });
  });

  test('esbuild --platform=node, wasm embedded with the binary loader, with the service client, run without node_modules', async () => {
    assert.deepEqual(await steps['esbuild-node'], { ...expected, ...service });
  });

  test('esbuild --platform=browser, lease-fence/init with the file loader (and the service client), in Chromium', async () => {
    const bundle = await steps['esbuild-browser'];
    assert.doesNotMatch(bundle, /(\bfrom\s*|\bimport\s*\(?\s*|\brequire\s*\(\s*)["']node:/, 'the browser bundle imports nothing from node:');
    const { result, problems } = await page('esbuild-browser');
    assert.deepEqual({ result, problems }, { result: { ...inBrowser, serviceClient: 'function' }, problems: [] });
  });

  // Each bundler's page, built (url undefined: the built folder's) or
  // served by vite dev from source, the package pre-bundled.
  for (const [name, title, served] of [
    ['webpack', 'webpack 5 (the browser entry; webpack copies the wasm)'],
    ['vite', 'Vite build (the browser entry; Vite copies the wasm)'],
    ['vite-dev', 'vite dev (the page served from source, the package pre-bundled)', true],
    ['rollup', 'Rollup with node-resolve (the browser entry; a plugin emits the wasm)'],
  ]) {
    test(`${title}, in Chromium`, async () => {
      const url = await steps[name];
      const { result, problems } = await page(name, served ? url : undefined);
      assert.deepEqual({ result, problems }, { result: inBrowser, problems: [] });
    });
  }

  test('Cloudflare Worker under wrangler dev (the workerd entry)', async () => {
    const url = await steps.worker;
    for (let i = 0; i < 2; i++) {
      const res = await fetch(url);
      assert.equal(res.status, 200, await res.clone().text());
      const { Go, fs, serviceClient, ...rest } = await res.json();
      assert.deepEqual({ Go, fs, serviceClient }, { Go: 'undefined', fs: 'undefined', serviceClient: 'function' });
      assert.deepEqual({ added: [], ...rest }, expected);
    }
  });
});
