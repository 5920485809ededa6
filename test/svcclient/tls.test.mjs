// LeaseServiceClient against the native coordinator with tokens (-auth) and
// TLS from a private CA made at run time (out/bin/pkigen, crypto/x509): the
// CA given to Node with NODE_EXTRA_CA_CERTS (in a child Node process, which
// reads it at start), and the CA and a client certificate in an
// https.Agent (the node transport) or a fetch of one's own over
// node:https (the fetch transport), against a server that requires one
// (-tls-client-ca). Without the CA, or without the token, the
// calls are refused; the token is never printed.
//
// Run by `make test-svcclient`, which builds the coordinator and pkigen.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import { tmpdir } from 'node:os';
import path from 'node:path';
import util from 'node:util';
import { InvalidArgumentError } from 'lease-fence';
import { LeaseServiceError } from 'lease-fence/service-client';
import { LeaseServiceClient, send, sender, TRANSPORT } from './transport.mjs';
import { coordinatorBin as bin, root, startCoordinator, stop } from './children.mjs';

const pkigen = process.env.PKIGEN || path.join(root, 'out/bin/pkigen');

const dir = mkdtempSync(path.join(tmpdir(), 'lease-fence-tls-'));
const token = randomBytes(32).toString('base64url');
let pki;
const children = [];

function start(args) {
  return startCoordinator(['-memory', ...args], children);
}

let plain, mutual; // {url, log}

before(async () => {
  assert.ok(existsSync(bin), `${bin} is not built: run make coordinator`);
  assert.ok(existsSync(pkigen), `${pkigen} is not built: run make test-svcclient`);
  pki = JSON.parse(execFileSync(pkigen, [dir], { encoding: 'utf8' }));
  const tokens = path.join(dir, 'tokens.json');
  writeFileSync(tokens, JSON.stringify([{ name: 'js', tokenSha256: createHash('sha256').update(token).digest('hex'), resources: ['js/*'] }]));
  plain = await start(['-auth', tokens, '-tls-cert', pki.server, '-tls-key', pki.serverKey]);
  mutual = await start(['-tls-cert', pki.server, '-tls-key', pki.serverKey, '-tls-client-ca', pki.ca]);
});

after(async () => {
  await Promise.all(children.map((c) => stop(c, 'SIGTERM')));
  rmSync(dir, { recursive: true, force: true });
});

// nodeFetch is a fetch over node:https with TLS options of one's own (a CA,
// a client certificate): what to pass as LeaseServiceClient's fetch where
// the host's fetch cannot take them. It sends the string body the client
// gives and honours the signal.
function nodeFetch(tls) {
  return (url, init) =>
    new Promise((resolve, reject) => {
      const req = https.request(url, { method: init.method, headers: init.headers, signal: init.signal, ...tls }, (res) => {
        const chunks = [];
        res.on('data', (c) => chunks.push(c));
        res.on('end', () => resolve(new Response(Buffer.concat(chunks), { status: res.statusCode, headers: res.headers })));
        res.on('error', reject);
      });
      req.on('error', reject);
      req.end(init.body);
    });
}

// withTLS gives the client options that send with TLS settings of one's
// own on the transport under test: an https.Agent with them (the node
// transport), or nodeFetch (the fetch transport).
function withTLS(tls) {
  return TRANSPORT === 'node' ? { agent: new https.Agent({ keepAlive: true, ...tls }) } : { fetch: nodeFetch(tls) };
}

// tlsSender is withTLS's sender, fetch-shaped, for a test to wrap.
function tlsSender(tls) {
  return TRANSPORT === 'node' ? sender(new https.Agent({ keepAlive: true, ...tls })) : nodeFetch(tls);
}

async function cycle(client, resource) {
  const l = await client.acquire(resource);
  const r = await client.renew(l);
  await client.release(r);
  return { fence: l.token.fence, renewed: r.token.fence };
}

test('NODE_EXTRA_CA_CERTS: Node trusts the private CA; the token is sent', async () => {
  const script = `
    import { LeaseServiceClient } from 'lease-fence/service-client';
    const c = new LeaseServiceClient({ baseURL: process.env.URL, holderId: 'js-1', token: process.env.TOKEN, attempts: 1, transport: process.env.SVCCLIENT_TRANSPORT || 'node' });
    const l = await c.acquire('js/r');
    const r = await c.renew(l);
    await c.release(r);
    console.log(JSON.stringify({ fence: l.token.fence, renewed: r.token.fence, printed: String(c) + util.inspect(c) }));
  `;
  const out = execFileSync(process.execPath, ['--input-type=module', '-e', `import util from 'node:util';${script}`], {
    cwd: root,
    encoding: 'utf8',
    env: { ...process.env, NODE_EXTRA_CA_CERTS: pki.ca, URL: plain.url, TOKEN: token },
  });
  const got = JSON.parse(out);
  assert.equal(got.renewed, got.fence);
  assert.ok(!got.printed.includes(token), 'the client prints its token');
});

// A certificate that cannot be verified, or that is not for the host, is
// final: one attempt, the reason on the first line, not "no answer".
function certificateRefused(what) {
  return (e) => {
    assert.ok(e instanceof LeaseServiceError, String(e));
    assert.equal(e.code, 'tls_certificate');
    assert.equal(e.status, 0);
    assert.equal(e.attempts, 1);
    assert.equal(e.retryable, false);
    const [first] = e.message.split('\n');
    assert.match(first, new RegExp(`^lease-fence: acquire: the TLS certificate of https://127\\.0\\.0\\.1:\\d+ ${what} \\(`));
    assert.match(first, /not retried: trust its CA/);
    assert.ok(!e.message.includes(token));
    return true;
  };
}

test('a certificate that cannot be verified is final and named: not retried, not "no answer"', async () => {
  // This process was not started with NODE_EXTRA_CA_CERTS: the transport's defaults.
  let sent = 0;
  const counting = (url, init) => {
    sent++;
    return send(url, init);
  };
  const noCA = new LeaseServiceClient({ baseURL: plain.url, holderId: 'js-1', token, fetch: counting });
  await assert.rejects(noCA.acquire('js/r'), certificateRefused('cannot be verified'));
  assert.equal(sent, 1);
  // TLS settings of one's own without the CA: the same.
  const own = new LeaseServiceClient({ baseURL: plain.url, holderId: 'js-1', token, ...withTLS({}) });
  await assert.rejects(own.acquire('js/r'), certificateRefused('cannot be verified'));
});

test('a certificate for another name is final and named', async () => {
  // The CA is trusted, but the name checked is one the certificate does not have.
  let sent = 0;
  const inner = tlsSender({ ca: readFileSync(pki.ca), servername: 'elsewhere.invalid' });
  const wrongName = new LeaseServiceClient({
    baseURL: plain.url, holderId: 'js-1', token, fetch: (url, init) => {
      sent++;
      return inner(url, init);
    },
  });
  await assert.rejects(wrongName.acquire('js/r'), certificateRefused('is not for its host'));
  assert.equal(sent, 1);
});

test('without the token, 401', async () => {
  const noToken = new LeaseServiceClient({ baseURL: plain.url, holderId: 'js-1', ...withTLS({ ca: readFileSync(pki.ca) }) });
  await assert.rejects(noToken.acquire('js/r'), (e) => e instanceof LeaseServiceError && e.code === 'unauthorized' && e.status === 401 && e.attempts === 1);
  const wrongScope = new LeaseServiceClient({ baseURL: plain.url, holderId: 'js-1', token, ...withTLS({ ca: readFileSync(pki.ca) }) });
  await assert.rejects(wrongScope.acquire('other/r'), (e) => e.code === 'forbidden' && e.status === 403 && !e.message.includes(token));
  const ok = new LeaseServiceClient({ baseURL: plain.url, holderId: 'js-1', token, ...withTLS({ ca: readFileSync(pki.ca) }) });
  const { fence, renewed } = await cycle(ok, 'js/r');
  assert.equal(renewed, fence);
  assert.ok(!util.inspect(ok).includes(token) && !String(ok).includes(token));
});

test('mutual TLS: a fetch with the client certificate is served, one without is refused', async () => {
  const ca = readFileSync(pki.ca);
  const withCert = new LeaseServiceClient({
    baseURL: mutual.url,
    holderId: 'm-1',
    ...withTLS({ ca, cert: readFileSync(pki.client), key: readFileSync(pki.clientKey) }),
  });
  const { fence, renewed } = await cycle(withCert, 'm/r');
  assert.equal(renewed, fence);
  const without = new LeaseServiceClient({ baseURL: mutual.url, holderId: 'm-1', ...withTLS({ ca }), attempts: 1 });
  await assert.rejects(without.acquire('m/r'), (e) => e instanceof LeaseServiceError && e.code === 'no_answer');
});

test('docs/js.md\'s example of an https.Agent with a CA and a client certificate runs as written', async () => {
  const doc = readFileSync(path.join(root, 'docs/js.md'), 'utf8');
  const m = /<!-- tls-agent:start -->\n```js\n([\s\S]*?)```\n<!-- tls-agent:end -->/.exec(doc);
  assert.ok(m, 'docs/js.md has no tls-agent block');
  // In the repository, so that lease-fence resolves as it does for a user; the files it reads beside it.
  const where = path.join(root, 'out/test/docs-tls');
  mkdirSync(where, { recursive: true });
  copyFileSync(pki.ca, path.join(where, 'ca.pem'));
  copyFileSync(pki.client, path.join(where, 'client.pem'));
  copyFileSync(pki.clientKey, path.join(where, 'client-key.pem'));
  writeFileSync(path.join(where, 'example.mjs'), m[1]);
  const out = execFileSync(process.execPath, ['example.mjs'], { cwd: where, encoding: 'utf8', env: { ...process.env, COORDINATOR_URL: mutual.url } });
  const want = m[1].trimEnd().split('\n');
  assert.deepEqual(out.trimEnd().split('\n'), want.slice(want.indexOf('// Output:') + 1).map((l) => l.replace(/^\/\/ ?/, '')));
});

test('the token option is checked', () => {
  for (const bad of ['', 'with space', 'line\nbreak', 42, 'ünï']) {
    assert.throws(() => new LeaseServiceClient({ baseURL: plain.url, holderId: 'x', token: bad }), InvalidArgumentError);
  }
});

test('the coordinator logged no token', () => {
  assert.ok(plain.log.join('').includes('token=js'), 'the calls are logged with the token name');
  const hash = createHash('sha256').update(token).digest('hex');
  for (const l of [plain.log.join(''), mutual.log.join('')]) {
    assert.ok(!l.includes(token) && !l.toLowerCase().includes(hash.slice(0, 16)));
  }
});
