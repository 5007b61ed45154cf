import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { StdioServerTransport } from '@modelcontextprotocol/server/stdio';

/** The `mcp-elicitation-proxy` bin. */
export const TRANSPARENT_BIN = fileURLToPath(new URL('../../bin/mcp-elicitation-proxy.mjs', import.meta.url));
/** The asking fixture server, run with `node --import tsx`. */
export const ASKING_SERVER = fileURLToPath(new URL('./asking-server.ts', import.meta.url));

/** Writes `text` as `name` in a fresh folder and returns its path. */
export async function writeTemporary(name: string, text: string): Promise<string> {
  const folder = await mkdtemp(join(tmpdir(), 'transparent-'));
  const path = join(folder, name);
  await writeFile(path, text);
  return path;
}

/** Collects a stream's text and lets a test wait for a fragment (no sleeps). */
export function watchedText(stream: { on(event: 'data', listener: (chunk: Buffer) => void): unknown }): {
  text(): string;
  waitFor(pattern: RegExp): Promise<RegExpMatchArray>;
} {
  let text = '';
  const waiters: { pattern: RegExp; resolve: (match: RegExpMatchArray) => void }[] = [];
  stream.on('data', (chunk: Buffer) => {
    text += chunk.toString();
    for (const waiter of [...waiters]) {
      const match = text.match(waiter.pattern);
      if (match) {
        waiters.splice(waiters.indexOf(waiter), 1);
        waiter.resolve(match);
      }
    }
  });
  return {
    text: () => text,
    waitFor(pattern) {
      const match = text.match(pattern);
      if (match) return Promise.resolve(match);
      return new Promise((resolve) => waiters.push({ pattern, resolve }));
    },
  };
}

/** A running proxy process serving Streamable HTTP. */
export interface HttpProxyProcess {
  readonly child: ChildProcessWithoutNullStreams;
  readonly url: string;
  readonly log: ReturnType<typeof watchedText>;
  stop(): Promise<void>;
}

/** Starts `mcp-elicitation-proxy --http --port 0` on `configPath` and waits for its URL. */
export async function startHttpProxy(configPath: string, extra: string[] = []): Promise<HttpProxyProcess> {
  const child = spawn(process.execPath, [TRANSPARENT_BIN, '--config', configPath, '--http', '--port', '0', ...extra], {
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  const exited = new Promise<void>((resolve) => child.once('close', () => resolve()));
  const log = watchedText(child.stderr);
  const [, url] = await Promise.race([
    log.waitFor(/at (http:\/\/\S+\/mcp)/),
    exited.then(() => {
      throw new Error(`the proxy exited: ${log.text()}`);
    }),
  ]);
  return {
    child,
    url: url as string,
    log,
    async stop() {
      child.kill('SIGTERM');
      await exited;
    },
  };
}

/** A running proxy process serving stdio, with a client transport over its pipes. */
export interface StdioProxyProcess {
  readonly child: ChildProcessWithoutNullStreams;
  /** The SDK's newline-delimited stdio transport over the child's pipes, for a client to connect with. */
  readonly transport: StdioServerTransport;
  readonly log: ReturnType<typeof watchedText>;
  /** Resolves when it exits: its exit code and the signal that ended it, if any. */
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/**
 * Starts `mcp-elicitation-proxy` on `configPath` over stdio. The test spawns the child itself
 * (instead of `StdioClientTransport`) so that it can close the child's stdin and read its exit code.
 */
export function startStdioProxy(configPath: string): StdioProxyProcess {
  const child = spawn(process.execPath, [TRANSPARENT_BIN, '--config', configPath], { stdio: ['pipe', 'pipe', 'pipe'] });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  // Reading its stdout, writing its stdin: the server transport's two streams, swapped.
  return {
    child,
    transport: new StdioServerTransport(child.stdout, child.stdin),
    log: watchedText(child.stderr),
    exited,
  };
}
