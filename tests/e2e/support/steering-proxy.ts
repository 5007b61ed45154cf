/**
 * One loopback origin in front of several app instances, the way a load balancer puts them behind
 * one address (issue 28): a small reverse proxy on `node:http` that keeps the browser's `Host`
 * (the app's Host rule answers only for its configured origin) and streams both ways, SSE
 * included. The test decides who serves what: a request carrying the cookie `instance=<name>` goes
 * to that instance, any other to the first one. Every request is recorded with who served it.
 */
import { createServer, request as forward, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

/** One request the proxy forwarded. */
export interface Forwarded {
  readonly instance: string;
  readonly method: string;
  /** The path and query, as the browser sent them. */
  readonly url: string;
}

/** A running proxy. */
export interface SteeringProxy {
  readonly port: number;
  /** Every request forwarded so far, in arrival order. */
  forwarded(): readonly Forwarded[];
  close(): Promise<void>;
}

/** The instance a request's `instance` cookie names, when it is one of `names`. */
function steeredTo(request: IncomingMessage, names: readonly string[]): string | undefined {
  for (const part of (request.headers.cookie ?? '').split(';')) {
    const [key, value] = part.trim().split('=');
    if (key === 'instance' && value !== undefined && names.includes(value)) return value;
  }
  return undefined;
}

/** Starts the proxy on a free loopback port in front of the instances' ports, by name (the first is the default). */
export async function startSteeringProxy(instances: Readonly<Record<string, () => number>>): Promise<SteeringProxy> {
  const names = Object.keys(instances);
  const fallback = names[0];
  if (fallback === undefined) throw new Error('a proxy needs at least one instance');
  const log: Forwarded[] = [];
  const sockets = new Set<Socket>();
  const server: Server = createServer((incoming, outgoing) => {
    const instance = steeredTo(incoming, names) ?? fallback;
    log.push({ instance, method: incoming.method ?? 'GET', url: incoming.url ?? '/' });
    const upstream = forward(
      {
        host: '127.0.0.1',
        port: instances[instance]?.(),
        method: incoming.method,
        path: incoming.url,
        // The browser's headers as sent, `Host` included: the instance sees the one origin.
        headers: incoming.headers,
      },
      (answer) => {
        outgoing.writeHead(answer.statusCode ?? 502, answer.headers);
        // An SSE stream's frames go out as they come.
        outgoing.flushHeaders();
        answer.pipe(outgoing);
      },
    );
    upstream.on('error', () => {
      if (!outgoing.headersSent) outgoing.writeHead(502).end();
      else outgoing.destroy();
    });
    // A browser that went away (a closed page, a reconnecting EventSource) ends the upstream request too.
    outgoing.on('close', () => upstream.destroy());
    incoming.pipe(upstream);
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    forwarded: () => log,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}
