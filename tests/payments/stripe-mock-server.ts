import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync } from 'node:fs';
import { createServer, request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

/** The stripe-mock binary `bash scripts/stripe-mock.sh` installs (pinned version, git-ignored .tools/bin). */
export const stripeMockBinary = fileURLToPath(new URL('../../.tools/bin/stripe-mock', import.meta.url));

/** True when the pinned stripe-mock has been built. */
export function stripeMockInstalled(): boolean {
  return existsSync(stripeMockBinary);
}

/** A running stripe-mock on loopback (HTTP). */
export interface StripeMockServer {
  readonly host: '127.0.0.1';
  readonly port: number;
  close(): Promise<void>;
}

/**
 * Starts stripe-mock on free loopback ports (HTTP and HTTPS both system-chosen, so parallel runs
 * never collide) and resolves once it reports the HTTP address it listens on. Runs with
 * `-strict-version-check`, so a request with a `Stripe-Version` other than the spec's is refused.
 */
export async function startStripeMock(): Promise<StripeMockServer> {
  const child = spawn(
    stripeMockBinary,
    ['-http-addr', '127.0.0.1:', '-https-addr', '127.0.0.1:', '-strict-version-check'],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const port = await new Promise<number>((resolve, reject) => {
    const output: string[] = [];
    const onLine = (line: string) => {
      output.push(line);
      const match = /Listening for HTTP at address: 127\.0\.0\.1:(\d+)/.exec(line);
      if (match?.[1] !== undefined) resolve(Number(match[1]));
    };
    for (const stream of [child.stdout, child.stderr]) createInterface({ input: stream }).on('line', onLine);
    child.once('error', reject);
    child.once('exit', (code) =>
      reject(new Error(`stripe-mock exited (${code}) before listening:\n${output.join('\n')}`)),
    );
  });
  return { host: '127.0.0.1', port, close: () => stop(child) };
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, 'exit');
  child.kill('SIGTERM');
  await exited;
}

/** One request that went through a {@link RecordingProxy}, with the status its target answered. */
export interface RecordedExchange {
  readonly method: string;
  readonly path: string;
  /** Request headers, without `authorization`. */
  readonly headers: IncomingHttpHeaders;
  readonly body: string;
  readonly status: number;
  readonly responseBody: string;
}

/** A loopback HTTP proxy in front of a target that records each exchange and may rewrite JSON answers. */
export interface RecordingProxy {
  readonly host: '127.0.0.1';
  readonly port: number;
  readonly exchanges: readonly RecordedExchange[];
  close(): Promise<void>;
}

/** Options for {@link startRecordingProxy}. */
export interface RecordingProxyOptions {
  readonly target: { readonly host: string; readonly port: number };
  /** Rewrites a 2xx JSON answer before the client sees it; the recorded `responseBody` is the target's original. */
  readonly rewrite?: (answer: Record<string, unknown>) => Record<string, unknown>;
}

/**
 * Starts the recording proxy. stripe-mock is stateless and does not echo headers, so this is how
 * a test sees what the SDK actually sent (the `Idempotency-Key`) and what stripe-mock answered.
 */
export async function startRecordingProxy(options: RecordingProxyOptions): Promise<RecordingProxy> {
  const exchanges: RecordedExchange[] = [];
  const server = createServer((incoming, outgoing) => {
    const chunks: Buffer[] = [];
    incoming.on('data', (chunk: Buffer) => chunks.push(chunk));
    incoming.on('end', () => {
      const body = Buffer.concat(chunks);
      const forwarded = httpRequest(
        {
          host: options.target.host,
          port: options.target.port,
          method: incoming.method,
          path: incoming.url,
          headers: { ...incoming.headers, host: `${options.target.host}:${options.target.port}` },
        },
        (answer) => {
          const answerChunks: Buffer[] = [];
          answer.on('data', (chunk: Buffer) => answerChunks.push(chunk));
          answer.on('end', () => {
            const status = answer.statusCode ?? 0;
            const responseBody = Buffer.concat(answerChunks).toString('utf8');
            const { authorization: _secret, ...headers } = incoming.headers;
            exchanges.push({
              method: incoming.method ?? '',
              path: incoming.url ?? '',
              headers,
              body: body.toString('utf8'),
              status,
              responseBody,
            });
            const sent =
              options.rewrite !== undefined && status >= 200 && status < 300
                ? JSON.stringify(options.rewrite(JSON.parse(responseBody) as Record<string, unknown>))
                : responseBody;
            const { 'content-length': _length, 'transfer-encoding': _encoding, ...answerHeaders } = answer.headers;
            outgoing.writeHead(status, { ...answerHeaders, 'content-length': Buffer.byteLength(sent) });
            outgoing.end(sent);
          });
        },
      );
      forwarded.on('error', (error) => outgoing.destroy(error));
      forwarded.end(body);
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  return {
    host: '127.0.0.1',
    port,
    exchanges,
    async close() {
      server.closeAllConnections();
      server.close();
      await once(server, 'close');
    },
  };
}
