import { resolve } from 'node:path';
import {
  createIdentityHandlers,
  type DidDocument,
  type IdentityHandlers,
  type IssuedEnrollmentCode,
  type Role,
} from '../../identity/index';
import type { SearchMode } from '../../proxy/index';
import type { ChatService, PlannerInfo } from '../agent/types';
import { type HouseholdEnv, readHouseholdEnv } from '../env';
import { holdHouseholdPidFile } from '../hold-household-pid-file';
import { type HouseholdRuntime, startHouseholdRuntime } from '../runtime';
import { createAppChatService } from './chat-wiring';
import type { LogSource } from './live-log';
import { createMcpEndpoint, type McpEndpoint } from './mcp-endpoint';
import { createOrderAudit, type OrderAudit } from './order-audit';
import { createShopMcpEndpoint } from './shop-mcp-endpoint';

/** Everything the app's route handlers reach: one per server process. */
export interface HouseholdApp {
  /** The one origin state-changing requests may come from (`EXTENSIBLE_MCP_ORIGIN`). */
  readonly origin: string;
  readonly chat: ChatService;
  readonly identity: IdentityHandlers;
  readonly mcp: McpEndpoint;
  /** The shop served transparently at `/mcp/pizza`, gated by the household; a 404 when `/mcp` is. */
  readonly shopMcp: McpEndpoint;
  /** The household admin's DID document, served at `/.well-known/did.json`. */
  readonly adminDidDocument: DidDocument;
  /** How tool search ranks right now: keyword search while the embedding model loads. */
  searchMode(): SearchMode;
  /** The audit page's reader: orders and their evidence chains, re-verified on each request. */
  readonly audit: OrderAudit;
  /** The live log's source: the hash-chained audit table and the rows every instance appends. */
  readonly log: LogSource;
  close(): Promise<void>;
}

/** What {@link createHouseholdApp} composes. */
export interface CreateHouseholdAppOptions {
  readonly runtime: HouseholdRuntime;
  readonly env: HouseholdEnv;
  readonly chat: ChatService;
  /** `/mcp`'s (and `/mcp/pizza`'s) named bearer tokens; none → both are a 404. */
  readonly httpTokens?: readonly { readonly name: string; readonly token: string }[];
}

/** Composes the app's surfaces over a started household runtime (tests pass their own runtime and chat). */
export function createHouseholdApp(options: CreateHouseholdAppOptions): HouseholdApp {
  const { runtime, env, chat } = options;
  const mcp = createMcpEndpoint({
    gateway: runtime.gateway,
    origin: env.origin,
    tokens: options.httpTokens ?? [],
  });
  const shopMcp = createShopMcpEndpoint({
    shop: runtime.transparentShop,
    origin: env.origin,
    tokens: options.httpTokens ?? [],
  });
  return {
    origin: env.origin,
    chat,
    identity: createIdentityHandlers({
      passkeys: runtime.identity.passkeys,
      origin: env.origin,
      onUnexpectedError: (error) => console.error('identity route fault', error),
    }),
    mcp,
    shopMcp,
    adminDidDocument: runtime.identity.household.adminDocument,
    searchMode: () => runtime.gateway.searchMode,
    log: runtime.identity.store.audit,
    audit: createOrderAudit({
      store: runtime.identity.store.identity,
      household: runtime.identity.household,
      webauthn: { rpId: env.rpId, origin: env.origin },
      allowances: runtime.identity.store.allowances,
      log: runtime.identity.store.audit,
    }),
    async close() {
      await mcp.close();
      await shopMcp.close();
      await chat.close();
      await runtime.close();
    },
  };
}

/**
 * Starts the household as the app process runs it: the environment, the composed runtime (the shop
 * as a stdio child unless `PIZZA_URL`), the chat agent, and a banner on the terminal with the URLs,
 * the agent and this start's enrollment codes (the terminal is the only place codes go).
 */
export async function startHouseholdApp(
  options: { readonly print?: (line: string) => void } = {},
): Promise<HouseholdApp> {
  const print = options.print ?? ((line: string) => console.log(line));
  const env = readHouseholdEnv();
  const runtime = await startHouseholdRuntime({
    env,
    // The staged model, found from the repository root the app runs in (never fetched by the app).
    embeddings: { modelDir: resolve('.models'), allowRemote: false, cacheDir: env.dataDir },
    // The operator's terminal: the proxy's lines (servers connecting, failing, held tools, the shop's stderr).
    logger: {
      info: (line) => print(`  proxy: ${line}`),
      error: (message, error) => console.error(message, error ?? ''),
    },
  });
  try {
    const chat = createAppChatService(runtime, env);
    const app = createHouseholdApp({
      runtime,
      env,
      chat,
      httpTokens: [...(env.httpToken === undefined ? [] : [{ name: 'mcp', token: env.httpToken }]), ...env.httpTokens],
    });
    // `npm run household -- pins accept` signals this process (the one holding the runtime), which
    // checks the shop's listing against the store again: an accepted tool works without a restart.
    const pidFile = holdHouseholdPidFile({ gateway: runtime.gateway, dataDir: env.dataDir, log: print });
    for (const line of bannerLines({
      origin: env.origin,
      planner: chat.planner,
      codes: runtime.identity.codes,
      keptRoles: runtime.identity.keptRoles,
    })) {
      print(line);
    }
    if (env.testClockFile !== undefined) {
      print('  WARNING: EXTENSIBLE_MCP_TEST_CLOCK_FILE moves the household clock: for browser tests only.');
    }
    return {
      ...app,
      async close() {
        pidFile.release();
        await app.close();
      },
    };
  } catch (error) {
    await runtime.close();
    throw error;
  }
}

/** The start banner: where to go, which agent runs, and the enrollment codes of roles not enrolled yet. */
export function bannerLines(options: {
  readonly origin: string;
  readonly planner: PlannerInfo;
  readonly codes: readonly IssuedEnrollmentCode[];
  /** Roles whose code from an earlier start (or another instance) is still live, so none was issued now. */
  readonly keptRoles?: readonly Role[];
}): string[] {
  const kept = options.keptRoles ?? [];
  const { origin } = options;
  return [
    '',
    `Order Pizza is running at ${origin}`,
    `  Chat:          ${origin}/`,
    `  Child window:  ${origin}/approve?as=child`,
    `  Parent window: ${origin}/approve?as=parent`,
    `  Agent:         ${plannerLabel(options.planner)}`,
    ...options.codes.map(({ role, code }) => `  Enrollment code for ${role}: ${code}`),
    ...kept.map(
      (role) =>
        `  Enrollment code for ${role}: the one printed earlier is still unused (a new one: npm run household -- rotate-codes --role ${role}).`,
    ),
    ...(options.codes.length === 0 && kept.length === 0
      ? ['  Both roles have a passkey (new codes: npm run household -- rotate-codes).']
      : []),
    '',
  ];
}

/** Which agent drives the chat, in the words the header uses. */
export function plannerLabel(planner: PlannerInfo): string {
  return planner.kind === 'claude' ? `Claude (model ${planner.model})` : 'Offline planner — no API key needed';
}

// One app per server process. The slot lives on globalThis so that dev-mode module reloads
// (which re-evaluate this file) find the running household instead of starting a second one.
const slotKey = Symbol.for('extensible-mcp.household-app');
type Slot = { [slotKey]?: Promise<HouseholdApp> };
const slot = globalThis as Slot;

/** The process's household app, started on first use; a failed start is retried by the next caller. */
export function getHouseholdApp(): Promise<HouseholdApp> {
  let app = slot[slotKey];
  if (app === undefined) {
    app = startHouseholdApp();
    slot[slotKey] = app;
    app.catch(() => {
      if (slot[slotKey] === app) delete slot[slotKey];
    });
  }
  return app;
}

/** Marks the process whose signals already close the household app (see {@link closeHouseholdAppOnSignals}). */
const signalsKey = Symbol.for('extensible-mcp.household-app.signals');

/** Longest wait for the household to close at a signal before the process goes on exiting. */
const shutdownDeadlineMs = 8000;

/**
 * Closes the process's household app — the gateway, then the closing audit checkpoint, the
 * witnesses and the store (issue 26) — when the process is told to stop (SIGTERM from `docker stop`
 * or a supervisor, SIGINT from a terminal), and only then lets the listeners that were there before
 * (`next start`'s own, which exits) run; with none, exits with 128 + the signal's number. Without
 * this, `next start` exits at once on SIGTERM and the rows since the last checkpoint stay unsigned.
 * A close that hangs past a deadline does not keep the process from stopping.
 */
export function closeHouseholdAppOnSignals(options: { readonly log?: (line: string) => void } = {}): void {
  // Once per process: a second call (a dev-mode reload of the hook) must not wrap the first.
  const installed = globalThis as { [signalsKey]?: true };
  if (installed[signalsKey]) return;
  installed[signalsKey] = true;
  const log = options.log ?? ((line: string) => console.error(line));
  for (const [signal, number] of [
    ['SIGTERM', 15],
    ['SIGINT', 2],
  ] as const) {
    const earlier = process.listeners(signal);
    process.removeAllListeners(signal);
    let closing = false;
    process.on(signal, () => {
      // A second signal while closing changes nothing: the first one's close is under way.
      if (closing) return;
      closing = true;
      void closeRunningApp(log).then(() => {
        if (earlier.length === 0) process.exit(128 + number);
        for (const listener of earlier) listener(signal);
      });
    });
  }
}

/** Closes the process's household app if one started; a fault or a hang is logged, never thrown. */
async function closeRunningApp(log: (line: string) => void): Promise<void> {
  const app = slot[slotKey];
  if (app === undefined) return;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const deadline = new Promise<void>((resolve) => {
    timer = setTimeout(() => {
      log(`the household did not close within ${shutdownDeadlineMs / 1000} s: stopping anyway`);
      resolve();
    }, shutdownDeadlineMs);
    timer.unref();
  });
  const closed = app.then(
    (running) => running.close(),
    () => undefined,
  );
  try {
    await Promise.race([
      closed.catch((error: unknown) => log(`the household did not close cleanly: ${String(error)}`)),
      deadline,
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** Installs `app` as the process's household app (tests, or a host that composes its own); `undefined` clears it. */
export function setHouseholdApp(app: HouseholdApp | undefined): void {
  if (app === undefined) delete slot[slotKey];
  else slot[slotKey] = Promise.resolve(app);
}
