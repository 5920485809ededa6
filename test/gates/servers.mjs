// Real servers for the node suites, started by the Go helpers the Go tests
// use (go run ./test/rig/pgtest/pgserver, ./test/rig/redistest/redisserver):
// temporary directories, 127.0.0.1 on free ports, stopped when stop() closes
// their standard input (or when this process dies: their watchdogs see it).
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';

export const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

async function start(pkg, hint, args = []) {
  const proc = spawn(process.env.GO ?? 'go', ['run', pkg, ...args], { cwd: root, stdio: ['pipe', 'pipe', 'inherit'] });
  const lines = createInterface({ input: proc.stdout });
  const waiting = [];
  lines.on('line', (l) => waiting.shift()?.(l));
  const nextLine = () => new Promise((resolve) => waiting.push(resolve));
  const url = await Promise.race([nextLine(), new Promise((_, reject) =>
    proc.once('exit', (code) => reject(new Error(`${pkg} exited with ${code} before printing its URL (${hint})`))))]);
  return {
    url,
    async restart() {
      const line = nextLine();
      proc.stdin.write('restart\n');
      if ((await line) !== 'restarted') throw new Error(`${pkg}: restart failed`);
    },
    async stop() {
      if (proc.exitCode !== null) return proc.exitCode;
      const exited = new Promise((resolve) => proc.once('exit', resolve));
      proc.stdin.end();
      return exited;
    },
  };
}

export const startPostgres = () => start('./test/rig/pgtest/pgserver', 'is PostgreSQL installed? scripts/setup.sh');
export const startRedis = () => start('./test/rig/redistest/redisserver', 'is redis-server installed? scripts/setup.sh');
/** A Redis Cluster of three masters; url is the nodes' URLs, comma-separated. */
export const startRedisCluster = () => startRedisClusterOf(3);
const startRedisClusterOf = (n) => start('./test/rig/redistest/redisserver', 'is redis-server installed? scripts/setup.sh', ['-cluster', String(n)]);

/** Creates database name on the PostgreSQL server at url (startPostgres's) and returns its URL. */
export async function createDatabase(url, name) {
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  return url.replace('/postgres?', `/${name}?`);
}
