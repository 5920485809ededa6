// A TCP proxy between a client and a server that cuts, once, the first
// connection whose client sends a chunk matching a pattern: after
// forwarding it (the server acts, the client never hears) or instead of
// forwarding it. Later connections pass through.
import net from 'node:net';

export async function cutProxy(target, pattern, { forward }) {
  const [host, port] = target;
  let cut = false;
  const sockets = new Set();
  const server = net.createServer((c) => {
    sockets.add(c);
    const up = net.connect(port, host);
    sockets.add(up);
    up.on('data', (d) => { if (!c.destroyed) c.write(d); });
    const close = () => { c.destroy(); up.destroy(); };
    up.on('error', close);
    c.on('error', close);
    up.on('close', close);
    c.on('close', close);
    c.on('data', (d) => {
      if (!cut && pattern.test(d.toString('latin1'))) {
        cut = true;
        if (forward) {
          up.removeAllListeners('data');
          up.write(d);
          up.once('data', close); // the server answered: drop the answer
        } else {
          close();
        }
        return;
      }
      up.write(d);
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: server.address().port,
    get cut() { return cut; },
    close: () => new Promise((resolve) => { for (const s of sockets) s.destroy(); server.close(resolve); }),
  };
}
