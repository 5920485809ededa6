// Server-Sent Events read from a fetch body, with no import: the one
// reader of the service client's watch (list-watch.mjs) and of the
// coordinator's console (cmd/coordinator -ui serves this file as
// /ui/sse.mjs, embedded by wasm/js/embed.go).

/**
 * The event of the last frame of a stream whose reader fell behind (Go's
 * internal/sse/overflow.Event, whose test checks this line): the server
 * closes the stream, and the reader resumes after the last event it had.
 */
export const OVERFLOW = 'overflow';

/**
 * Yields { event, id, data } for each frame of body (a ReadableStream, or
 * anything with getReader()) that has data; comments and keepalives are
 * skipped, but onBytes is called at each chunk read. Throws tooLong() when
 * more than maxChars wait for the end of a frame.
 */
export async function* sseFrames(body, { maxChars, tooLong, onBytes = () => {} }) {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buf = '';
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      onBytes();
      buf += decoder.decode(value, { stream: true });
      // The frames of a chunk are cut from it where they lie; what is left
      // after the last one is kept once.
      let start = 0;
      let i;
      while ((i = buf.indexOf('\n\n', start)) >= 0) {
        const block = buf.slice(start, i);
        start = i + 2;
        let event = 'message';
        let id = '';
        const data = [];
        for (const line of block.split('\n')) {
          if (line === '' || line.startsWith(':')) continue;
          const c = line.indexOf(':');
          const name = c < 0 ? line : line.slice(0, c);
          let val = c < 0 ? '' : line.slice(c + 1);
          if (val.startsWith(' ')) val = val.slice(1);
          if (name === 'event') event = val;
          else if (name === 'data') data.push(val);
          else if (name === 'id') id = val;
        }
        if (data.length) yield { event, id, data: data.join('\n') };
      }
      if (start) buf = buf.slice(start);
      if (buf.length > maxChars) throw tooLong();
    }
  } finally {
    reader.cancel().catch(() => {});
  }
}
