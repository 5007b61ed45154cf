import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Tool } from '@modelcontextprotocol/server';
import { Server } from '@modelcontextprotocol/server';
import {
  createGateway,
  createHostBuiltins,
  type DownstreamProtocol,
  type DownstreamSpec,
  type Gateway,
  type GatewayOptions,
  loadBundle,
  type PolicyBundle,
  type ProxyLogger,
} from '../../proxy/index';

/** Things a test opened, closed after it (newest first) whatever happened. */
export function cleanupStack(): { push(cleanup: () => unknown): void; run(): Promise<void> } {
  const cleanups: (() => unknown)[] = [];
  return {
    push: (cleanup) => {
      cleanups.push(cleanup);
    },
    async run() {
      for (const cleanup of cleanups.splice(0).reverse()) await Promise.resolve(cleanup()).catch(() => undefined);
    },
  };
}

/** A logger that keeps its lines and lets a test wait for one, instead of sleeping. */
export function waitableLogger(): ProxyLogger & { lines: string[]; waitFor(fragment: string): Promise<string> } {
  const lines: string[] = [];
  const waiters: { fragment: string; resolve: (line: string) => void }[] = [];
  const add = (line: string) => {
    lines.push(line);
    for (const waiter of [...waiters]) {
      if (!line.includes(waiter.fragment)) continue;
      waiters.splice(waiters.indexOf(waiter), 1);
      waiter.resolve(line);
    }
  };
  return {
    lines,
    info: add,
    error: (line, error) => add(`${line}: ${error instanceof Error ? error.message : String(error)}`),
    waitFor(fragment) {
      const seen = lines.find((line) => line.includes(fragment));
      if (seen !== undefined) return Promise.resolve(seen);
      return new Promise((resolve) => waiters.push({ fragment, resolve }));
    },
  };
}

/** Builds and starts a gateway (lexical search, quiet log), closed by `cleanups`. */
export async function startedGateway(
  cleanups: ReturnType<typeof cleanupStack>,
  options: GatewayOptions,
): Promise<Gateway> {
  const gateway = createGateway({ embeddings: false, logger: waitableLogger(), ...options });
  cleanups.push(() => gateway.close());
  const report = await gateway.start();
  if (report.failed.length > 0) throw new Error(`servers failed to start: ${JSON.stringify(report.failed)}`);
  return gateway;
}

/** The real `spend-limit` teaching bundle (Rego). */
export function loadSpendLimit(): Promise<PolicyBundle> {
  const directory = fileURLToPath(new URL('../../policies/spend-limit', import.meta.url));
  return loadBundle({ directory, builtins: createHostBuiltins() });
}

/** Options of {@link bankServer}. */
export interface BankServerOptions {
  /** Receives the raw arguments of every call the bank really got. */
  readonly received: unknown[];
  /** The bank's own schema also requires `requesterCredential` (it knows the policy's evidence field). */
  readonly declaresCredential?: boolean;
}

/** An in-process "bank" MCP server with one tool, `pay`, that records what reached it. */
export function bankServer(options: BankServerOptions): Server {
  const server = new Server({ name: 'bank', version: '1.0.0' }, { capabilities: { tools: {} } });
  const pay: Tool = {
    name: 'pay',
    description: 'Pay an amount in cents to a payee',
    inputSchema: {
      type: 'object',
      properties: {
        amountCents: { type: 'integer', description: 'Amount in cents' },
        payee: { type: 'string', description: 'Who is paid' },
        ...(options.declaresCredential && {
          requesterCredential: { type: 'string', description: 'SpendRequest from the requester' },
        }),
      },
      required: ['amountCents', 'payee', ...(options.declaresCredential ? ['requesterCredential'] : [])],
    },
  };
  server.setRequestHandler('tools/list', () => ({ tools: [pay] }));
  server.setRequestHandler('tools/call', (request) => {
    options.received.push(request.params.arguments);
    return { content: [{ type: 'text', text: 'paid' }] };
  });
  return server;
}

/**
 * A fresh state folder for the mortal stdio fixture, and readers for what it recorded. The fixture
 * is a 2025-11-25 server, and its spec pins that version unless `protocol` says otherwise: every
 * process started from its command counts as a start, so under `auto` the one `server/discover`
 * probe process of its first connection (issue 31) is a start too.
 */
export function mortalFixture(
  cleanups: ReturnType<typeof cleanupStack>,
  options: { readonly maxStarts?: number; readonly protocol?: DownstreamProtocol } = {},
): { spec: DownstreamSpec; calls(): string[]; starts(): string[] } {
  const directory = mkdtempSync(join(tmpdir(), 'emcp-mortal-'));
  cleanups.push(() => rmSync(directory, { recursive: true, force: true }));
  const lines = (file: string): string[] => {
    try {
      return readFileSync(join(directory, file), 'utf8').split('\n').filter(Boolean);
    } catch {
      return [];
    }
  };
  return {
    spec: {
      kind: 'stdio',
      command: process.execPath,
      args: [
        '--import',
        'tsx',
        fileURLToPath(new URL('./mortal-stdio-server.ts', import.meta.url)),
        directory,
        ...(options.maxStarts !== undefined ? [String(options.maxStarts)] : []),
      ],
      protocol: options.protocol ?? '2025-11-25',
    },
    calls: () => lines('calls'),
    starts: () => lines('starts'),
  };
}
