import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import Anthropic from '@anthropic-ai/sdk';
import { StdioServerTransport, serveStdio } from '@modelcontextprotocol/server/stdio';
import { z } from 'zod';
import { createAnthropicClerk } from './anthropic-clerk.js';
import type { Clerk } from './clerk.js';
import { createDeterministicClerk } from './deterministic-clerk.js';
import { didDocument } from './did-document.js';
import { jwkFromDidKey } from './did-key.js';
import { startHttpServer } from './http-server.js';
import { loadOrCreateMerchantKey } from './key-store.js';
import { openOrderStore } from './order-store.js';
import { createShop, type ShopLog } from './shop.js';
import { createShopServer } from './shop-server.js';
import { openCheckpointWitness } from './witness.js';
import { createWitnessServer } from './witness-server.js';

// Composition root of the shop agent: the only place that reads process.env and argv, and
// the only place that wires key store, order store, clerk and transport.

/** Default clerk model: a current, fast Claude model (the clerk's reply is short). */
const DEFAULT_MODEL = 'claude-haiku-4-5';

const ARG_OPTIONS = {
  http: { type: 'boolean' },
  port: { type: 'string' },
  host: { type: 'string' },
  witness: { type: 'boolean' },
  help: { type: 'boolean' },
} as const;

const USAGE = `Usage: npx tsx shop-agent/main.ts [--http [--port 7600] [--host 127.0.0.1]]

  (no flags)     serve MCP over stdio (2026-07-28 and 2025-11-25 clients)
  --http         serve MCP over Streamable HTTP at /mcp, statelessly (2026-07-28 and 2025-11-25
                 clients; no sessions), and the DID document at /.well-known/did.json
  --port P       HTTP port (default 7600; 0 picks a free port)
  --host H       HTTP bind address (default 127.0.0.1)
  --witness      serve only the audit witness over stdio (operator tools for the household's
                 checkpointer; in HTTP mode the witness is at /witness, beside /mcp)
  --help         show this help

Environment:
  SHOP_AGENT_DATA            data folder for the key and orders (default ./.data/shop)
  SHOP_SETTLEMENT_DID        did:key of the settlement service whose receipts ship orders
  SHOP_SETTLEMENT_DID_FILE   a file holding that did:key, written by the household (docker); the
                             shop waits for it (up to 5 minutes) before it serves
  SHOP_AGENT_NAME            merchant name (default "Main Street Pizza")
  SHOP_AGENT_ALLOWED_HOSTS   extra Host header names accepted in HTTP mode (comma-separated)
  ANTHROPIC_API_KEY          enables the Claude clerk (otherwise a list-price clerk)
  ANTHROPIC_MODEL            clerk model (default ${DEFAULT_MODEL})
  ANTHROPIC_BASE_URL         Messages API base URL
`;

const blankToUndefined = (value: unknown) => (typeof value === 'string' && value.trim() === '' ? undefined : value);

const Env = z.object({
  SHOP_AGENT_DATA: z.preprocess(blankToUndefined, z.string().default('./.data/shop')),
  SHOP_SETTLEMENT_DID: z.preprocess(
    blankToUndefined,
    z
      .string()
      .refine((did) => jwkFromDidKey(did) !== null, 'must be an Ed25519 did:key (did:key:z6Mk…)')
      .optional(),
  ),
  SHOP_SETTLEMENT_DID_FILE: z.preprocess(blankToUndefined, z.string().optional()),
  SHOP_AGENT_NAME: z.preprocess(blankToUndefined, z.string().max(100).default('Main Street Pizza')),
  SHOP_AGENT_ALLOWED_HOSTS: z.preprocess(blankToUndefined, z.string().optional()),
  ANTHROPIC_API_KEY: z.preprocess(blankToUndefined, z.string().optional()),
  ANTHROPIC_MODEL: z.preprocess(blankToUndefined, z.string().default(DEFAULT_MODEL)),
  ANTHROPIC_BASE_URL: z.preprocess(blankToUndefined, z.url().optional()),
});

/** Longest wait for `SHOP_SETTLEMENT_DID_FILE` to appear, and how often it is looked for. */
const SETTLEMENT_FILE_WAIT_MS = 5 * 60_000;
const SETTLEMENT_FILE_POLL_MS = 500;

/**
 * The settlement DID the household published in `file` (SPEC §8, docker: a volume the household
 * writes and the shop mounts read-only). Waits while the file does not exist yet; a file that
 * exists but holds anything but an Ed25519 did:key is refused at once (fail closed).
 */
async function readSettlementDidFile(file: string): Promise<string> {
  const deadline = Date.now() + SETTLEMENT_FILE_WAIT_MS;
  let waiting = false;
  for (;;) {
    let text: string | undefined;
    try {
      text = await readFile(file, 'utf8');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    }
    if (text !== undefined) {
      const did = text.trim();
      if (jwkFromDidKey(did) === null) fail(`SHOP_SETTLEMENT_DID_FILE: ${file} does not hold an Ed25519 did:key`);
      return did;
    }
    if (Date.now() > deadline) fail(`SHOP_SETTLEMENT_DID_FILE: ${file} did not appear within 5 minutes`);
    if (!waiting) log('settlement-waiting', { file });
    waiting = true;
    await delay(SETTLEMENT_FILE_POLL_MS);
  }
}

const log: ShopLog = (event, fields) => {
  process.stderr.write(`${JSON.stringify({ ts: new Date().toISOString(), source: 'shop-agent', event, ...fields })}\n`);
};

/** Faults of the stdio entry (a malformed opening, a write that failed): logged, never on stdout. */
const onerror = (error: Error) => log('request-rejected', { error: error.message.slice(0, 300) });

/**
 * The process's stdin and stdout as the MCP wire, running `onClosed` once when the wire closes:
 * at end of input (the client went away), when stdout breaks, or on shutdown. `serveStdio` owns
 * the transport and its `onclose`, so the shop's own clean-up (its SQLite files) hangs on `close`.
 */
class StdioWire extends StdioServerTransport {
  #onClosed: (() => void) | undefined;

  constructor(onClosed: () => void) {
    super();
    this.#onClosed = onClosed;
  }

  override async close(): Promise<void> {
    await super.close();
    const onClosed = this.#onClosed;
    this.#onClosed = undefined;
    onClosed?.();
  }
}

function fail(message: string): never {
  process.stderr.write(`shop-agent: ${message}\n`);
  process.exit(2);
}

async function main(): Promise<void> {
  let args: ReturnType<typeof parseArgs<{ options: typeof ARG_OPTIONS }>>['values'];
  try {
    args = parseArgs({ options: ARG_OPTIONS, strict: true }).values;
  } catch (error) {
    fail(`${error instanceof Error ? error.message : 'bad arguments'}\n\n${USAGE}`);
  }
  if (args.help === true) {
    process.stdout.write(USAGE);
    return;
  }
  const port = Number(args.port ?? '7600');
  if (!Number.isInteger(port) || port < 0 || port > 65_535) fail(`--port must be 0..65535, got "${args.port}"`);

  const parsed = Env.safeParse(process.env);
  if (!parsed.success) {
    fail(parsed.error.issues.map((issue) => `${issue.path.join('.')}: ${issue.message}`).join('; '));
  }
  const env = parsed.data;
  if (args.witness === true) {
    if (args.http === true) fail('--witness serves stdio; in HTTP mode the witness is at /witness');
    // The witness alone: the merchant key (to countersign) and its own store, no orders, no clerk.
    const key = await loadOrCreateMerchantKey(env.SHOP_AGENT_DATA);
    const witness = openCheckpointWitness({ path: join(env.SHOP_AGENT_DATA, 'witness.sqlite'), key });
    serveStdio(() => createWitnessServer({ witness, log }), {
      transport: new StdioWire(() => witness.close()),
      onerror,
    });
    log('server-started', { transport: 'stdio', role: 'witness', did: key.did });
    return;
  }
  if (env.SHOP_SETTLEMENT_DID !== undefined && env.SHOP_SETTLEMENT_DID_FILE !== undefined)
    fail('set SHOP_SETTLEMENT_DID or SHOP_SETTLEMENT_DID_FILE, not both');
  const settlementDid =
    env.SHOP_SETTLEMENT_DID_FILE === undefined
      ? env.SHOP_SETTLEMENT_DID
      : await readSettlementDidFile(env.SHOP_SETTLEMENT_DID_FILE);

  const key = await loadOrCreateMerchantKey(env.SHOP_AGENT_DATA);
  const orders = openOrderStore(join(env.SHOP_AGENT_DATA, 'orders.sqlite'));
  const clerk: Clerk =
    env.ANTHROPIC_API_KEY === undefined
      ? createDeterministicClerk()
      : createAnthropicClerk({
          client: new Anthropic({
            apiKey: env.ANTHROPIC_API_KEY,
            ...(env.ANTHROPIC_BASE_URL === undefined ? {} : { baseURL: env.ANTHROPIC_BASE_URL }),
            maxRetries: 0,
            timeout: 15_000,
          }),
          model: env.ANTHROPIC_MODEL,
          merchantName: env.SHOP_AGENT_NAME,
        });
  const shop = createShop({
    key,
    orders,
    clerk,
    merchantName: env.SHOP_AGENT_NAME,
    settlementDid,
    log,
  });
  const createMcpServer = () => createShopServer({ shop, log });
  const common = {
    did: key.did,
    clerk: env.ANTHROPIC_API_KEY === undefined ? 'deterministic' : 'anthropic',
    settlementDid: settlementDid ?? null,
  };
  if (settlementDid === undefined)
    log('settlement-missing', { message: 'SHOP_SETTLEMENT_DID is not set: every fulfil will be refused' });

  if (args.http === true) {
    const witness = openCheckpointWitness({ path: join(env.SHOP_AGENT_DATA, 'witness.sqlite'), key });
    const http = await startHttpServer({
      createMcpServer,
      createWitnessServer: () => createWitnessServer({ witness, log }),
      didDocument: didDocument(key),
      host: args.host ?? '127.0.0.1',
      port,
      allowedHostnames: (env.SHOP_AGENT_ALLOWED_HOSTS ?? '')
        .split(',')
        .map((name) => name.trim())
        .filter(Boolean),
      log,
    });
    log('server-started', { transport: 'http', url: `${http.url}/mcp`, port: http.port, ...common });
    const stop = () => {
      void http.close().finally(() => {
        orders.close();
        witness.close();
        process.exit(0);
      });
    };
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
    return;
  }

  // One connection, in the era its opening picks: a 2025 `initialize` or a 2026 request.
  serveStdio(createMcpServer, { transport: new StdioWire(() => orders.close()), onerror });
  log('server-started', { transport: 'stdio', ...common });
}

main().catch((error: unknown) => {
  log('startup-failed', { error: error instanceof Error ? `${error.name}: ${error.message}` : 'unknown' });
  process.exit(1);
});
