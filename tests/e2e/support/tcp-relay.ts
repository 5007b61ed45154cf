/**
 * A TCP relay on loopback between the browser and the app: the specs see every byte both ways
 * (every SSE frame, for the leak scan) and can drop every open connection at once, the way a
 * flaky network does, to watch the pages reconnect.
 */
import { createConnection, createServer, type Socket } from 'node:net';

/** A running relay. */
export interface TcpRelay {
  readonly port: number;
  /** Everything the app sent back, as text. */
  responses(): string;
  /** The head of every request the browser sent (request line and headers). */
  requestHeads(): readonly string[];
  /** Destroys every open connection, both sides; new connections are relayed as before. */
  dropAll(): void;
  close(): Promise<void>;
}

/** Relays `127.0.0.1:<port>` to `127.0.0.1:<target()>` (read per connection: the app may start after the relay). */
export async function startTcpRelay(target: () => number): Promise<TcpRelay> {
  const open = new Set<Socket>();
  const heads: string[] = [];
  const received: Buffer[] = [];
  const server = createServer((browser) => {
    const app = createConnection(target(), '127.0.0.1');
    open.add(browser).add(app);
    let head = '';
    browser.on('data', (chunk: Buffer) => {
      // One request head per request on this connection (keep-alive sends several).
      head += chunk.toString('latin1');
      for (let end = head.indexOf('\r\n\r\n'); end >= 0; end = head.indexOf('\r\n\r\n')) {
        heads.push(head.slice(0, end));
        head = '';
      }
      app.write(chunk);
    });
    app.on('data', (chunk: Buffer) => {
      received.push(chunk);
      browser.write(chunk);
    });
    const end = () => {
      browser.destroy();
      app.destroy();
      open.delete(browser);
      open.delete(app);
    };
    for (const socket of [browser, app]) {
      socket.on('error', end);
      socket.on('close', end);
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  const dropAll = () => {
    for (const socket of open) socket.destroy();
    open.clear();
  };
  return {
    port: typeof address === 'object' && address ? address.port : 0,
    responses: () => Buffer.concat(received).toString('utf8'),
    requestHeads: () => [...heads],
    dropAll,
    async close() {
      dropAll();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
