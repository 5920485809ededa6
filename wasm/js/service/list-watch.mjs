// list and watch (POST /v1/list, POST /v1/watch): the pages of the live
// leases, and their events as Server-Sent Events read from the answer's
// body (fetch's, or node-http.mjs's reader of it), resumed after a
// disconnect. What each gives its caller is documented in
// ../service-client.d.ts (LeaseServiceClient's listPage, list and watch).
import { InvalidArgumentError } from '../errors.mjs';
import { LeaseServiceError } from './errors.mjs';
import { optionsOf, wholeMillis } from './options.mjs';
import { listBody, MAX_PREFIX_BYTES, parseError, readBody, utf8Length } from './protocol.mjs';
import { OVERFLOW, sseFrames } from './sse.mjs';
import { sleep } from './timers.mjs';
import { RETRIED_4XX } from './transport.mjs';

const LIST_OPTIONS = ['signal', 'timeoutMillis', 'prefix', 'cursor', 'limit', 'waiters'];
const WATCH_OPTIONS = ['signal', 'prefix', 'stream', 'afterSeq'];
const MAX_FRAME_CHARS = 1 << 20;
const tooLong = () => new LeaseServiceError('lease-fence: a watch frame is too long', { code: 'bad_reply', attempts: 1 });

export async function listPage(transport, options) {
  const { signal, timeoutMillis, prefix, cursor, limit, waiters } = optionsOf(options, LIST_OPTIONS, 'client.listPage', 'list options');
  const body = listBody(prefix, cursor, limit, waiters);
  const reply = await transport.send('list', body, { signal, timeoutMillis });
  return reply.page;
}

export async function* list(client, options) {
  const opts = optionsOf(options, LIST_OPTIONS, 'client.list', 'list options');
  let cursor = opts.cursor;
  do {
    const page = await client.listPage({ ...opts, cursor });
    yield* page.leases;
    cursor = page.cursor;
  } while (cursor !== undefined);
}

export async function* watch(transport, options) {
  const opts = optionsOf(options, WATCH_OPTIONS, 'client.watch', 'watch options');
  const { signal, prefix = '' } = opts;
  let { stream, afterSeq } = opts;
  if (typeof prefix !== 'string' || utf8Length(prefix) > MAX_PREFIX_BYTES) {
    throw new InvalidArgumentError(`lease-fence: options.prefix must be a string of at most ${MAX_PREFIX_BYTES} bytes`, 'options.prefix');
  }
  if (stream !== undefined && (typeof stream !== 'string' || stream === '')) {
    throw new InvalidArgumentError('lease-fence: options.stream must be a non-empty string', 'options.stream');
  }
  if (afterSeq !== undefined) wholeMillis(afterSeq, 'options.afterSeq', Number.MAX_SAFE_INTEGER);
  const k = transport.bases.length;
  let base = transport.cur;
  let failures = 0;
  let last;
  while (!signal?.aborted) {
    if (failures > 0) {
      if (failures >= transport.attempts) {
        throw last instanceof LeaseServiceError ? last
          : new LeaseServiceError(`lease-fence: watch could not connect after ${failures} attempts`, { code: 'no_answer', attempts: failures, cause: last });
      }
      base = (base + 1) % k;
      const pause = transport.backoff(failures + 1);
      if (pause > 0) {
        try {
          await sleep(transport.timers, pause, signal);
        } catch {
          return;
        }
      }
    }
    const body = { prefix };
    if (stream !== undefined) Object.assign(body, { stream, afterSeq: afterSeq ?? 0 });
    const conn = new AbortController();
    const onAbort = () => conn.abort(signal.reason);
    signal?.addEventListener('abort', onAbort, { once: true });
    try {
      let res;
      try {
        const send = transport.fetch;
        res = await send(`${transport.bases[base]}/v1/watch`, {
          method: 'POST', headers: { ...transport.headers, accept: 'text/event-stream' }, body: JSON.stringify(body),
          signal: conn.signal, redirect: 'manual',
        });
      } catch (e) {
        if (signal?.aborted) return;
        failures++;
        last = e;
        continue;
      }
      if (res.status !== 200) {
        const err = parseError('watch', res.status, await readBody(res), failures + 1);
        if (res.status >= 500 || RETRIED_4XX.has(res.status)) {
          failures++;
          last = err;
          continue;
        }
        throw err;
      }
      failures = 0;
      try {
        for await (const { event, data } of sseFrames(res.body, { maxChars: MAX_FRAME_CHARS, tooLong })) {
          const v = JSON.parse(data);
          if (event === 'hello') {
            stream = v.stream;
            afterSeq = v.seq;
            if (!v.resumed) yield Object.freeze({ type: 'hello', stream: v.stream, seq: v.seq, resumed: false });
          } else if (event === OVERFLOW) {
            break; // the coordinator closes it: resume after the last event
          } else {
            afterSeq = v.seq;
            yield Object.freeze(v);
          }
        }
        // The stream ended (an overflow, the coordinator's drain):
        // connect again at once, resuming after the last event.
      } catch (e) {
        if (signal?.aborted) return;
        failures++;
        last = e;
      }
    } finally {
      signal?.removeEventListener('abort', onAbort);
      conn.abort();
    }
  }
}
