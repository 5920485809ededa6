// The reader of Server-Sent Events that the service client's watch and the
// coordinator's console share (wasm/js/service/sse.mjs), over bodies cut
// into chunks anywhere.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { sseFrames } from '../../wasm/js/service/sse.mjs';

// A body that yields text in the chunks given, each as UTF-8 bytes.
const body = (...chunks) => new Blob(chunks).stream();
const read = async (b, opts = {}) => {
  const frames = [];
  for await (const f of sseFrames(b, { maxChars: 64, tooLong: () => new Error('too long'), ...opts })) frames.push(f);
  return frames;
};

const STREAM = ': ping\n\nevent: hello\ndata: {"a":1}\n\nid: 7\nevent: put\ndata: one\ndata:two\n\nid: 8\n\ndata\n\n';
const FRAMES = [
  { event: 'hello', id: '', data: '{"a":1}' },
  { event: 'put', id: '7', data: 'one\ntwo' },
  { event: 'message', id: '', data: '' },
];

test('frames with data, wherever the chunks are cut; comments and frames without data skipped', async () => {
  assert.deepEqual(await read(body(STREAM)), FRAMES);
  for (let cut = 1; cut < STREAM.length; cut++) {
    assert.deepEqual(await read(body(STREAM.slice(0, cut), STREAM.slice(cut))), FRAMES, `cut at ${cut}`);
  }
  // A character of several bytes cut between chunks.
  const bytes = new TextEncoder().encode('data: é€\n\n');
  assert.deepEqual(await read(body(bytes.slice(0, 7), bytes.slice(7, 9), bytes.slice(9))), [{ event: 'message', id: '', data: 'é€' }]);
});

test('onBytes at each chunk, a keepalive included', async () => {
  let chunks = 0;
  await read(body(': keepalive\n\n', 'data: x\n', '\n'), { onBytes: () => chunks++ });
  assert.equal(chunks, 3);
});

test('more than maxChars waiting for the end of a frame throws tooLong(), and cancels the body', async () => {
  let cancelled = false;
  let n = 0;
  const b = new ReadableStream({
    pull(c) {
      if (n++ === 10) c.close();
      else c.enqueue(new TextEncoder().encode('data: ' + 'x'.repeat(40)));
    },
    cancel() { cancelled = true; },
  });
  await assert.rejects(read(b), /too long/);
  assert.equal(cancelled, true);
  // Frames that end within maxChars, however many a chunk holds, are read.
  assert.equal((await read(body(`data: ${'y'.repeat(50)}\n\n`.repeat(10)))).length, 10);
});
