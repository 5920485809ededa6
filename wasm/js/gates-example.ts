// Type-checks the gate entries' declarations (tsc -p wasm/js/tsconfig.json).
import { StaleFenceError, type FenceToken } from 'lease-fence';
import { openSqlFence, FenceStoreError, type SqlPool } from 'lease-fence/sql';
import { openRedisFence, redisKey, CommandError, type RedisLikeClient } from 'lease-fence/redis';

export async function sqlExample(pool: SqlPool, token: FenceToken): Promise<number> {
  const store = await openSqlFence(pool, { dialect: 'postgres', table: 'lease_fence' });
  try {
    return await store.commit(token, async (client) => (await client.query('UPDATE t SET x = 1')).rows.length, { signal: AbortSignal.timeout(5000) });
  } catch (err) {
    if (err instanceof StaleFenceError || err instanceof FenceStoreError) return -1;
    throw err;
  }
}

export async function redisExample(client: RedisLikeClient, token: FenceToken): Promise<void> {
  const store = openRedisFence(client, { maxRejections: 100 });
  const key = redisKey(token.resource, 'config');
  try {
    await store.commit(token, { keys: [key], commands: [['HSET', key, 'version', 42]] });
  } catch (err) {
    if (err instanceof CommandError) console.log(err.index, err.written);
  }
  console.log(await store.floor(token.resource), (await store.rejections(token.resource)).length);
}
