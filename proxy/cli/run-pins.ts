import { existsSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { resolveConfigPath } from '../config';
import { ProxyError } from '../errors';
import { openPostgresPinStore } from '../pins/postgres-pin-store';
import { openSqlitePinStore } from '../pins/sqlite-pin-store';
import type { HeldDefinition, PinDecision, PinStore } from '../pins/types';
import { safeJsonParse } from '../policy/safe-json';
import type { ProxyEnv } from './env';
import { signalRunningProxy } from './pid-file';
import { parseStoreUrl } from './store-url';

/** Where `pins` writes: the operator's terminal. */
export interface PinsIo {
  out(line: string): void;
  err(line: string): void;
}

/** Options of {@link runPins}. */
export interface RunPinsOptions {
  /** The arguments after `pins`. */
  readonly argv: readonly string[];
  readonly env: ProxyEnv;
  readonly io: PinsIo;
}

/** Exit codes of `pins` (docs/pinning.md). */
export const PINS_EXIT = { done: 0, nothingPending: 1, usage: 2 } as const;

/** The help of `extensible-mcp pins`. */
export const pinsHelp = `extensible-mcp pins: review tool definitions held by the proxy (docs/pinning.md).

Usage:
  extensible-mcp pins list [--json]                  every tool's state (--json: with full hashes)
  extensible-mcp pins diff <server> [tool]           what changed in each pending definition
  extensible-mcp pins accept <server> (<tool> | --all)
                                                     the pending definition becomes the pin
  extensible-mcp pins reject <server> [tool]         the pending definition is refused for good

Options (each command):
  --config FILE   The proxy's config (found as the proxy finds it).
  --store URL     The proxy's store (sqlite:FILE or postgres://…, also $EXTENSIBLE_MCP_STORE;
                  default: proxy.sqlite beside the config).

accept and reject then send SIGHUP to the proxy running on that config (its pid file), which
checks its servers' last listings against the store again: an accepted tool is searchable and
callable at once. Exit codes: 0 done, 1 nothing pending to decide (or to show), 2 bad usage or config.`;

function parsePinsArgs(argv: readonly string[]) {
  return parseArgs({
    args: [...argv],
    allowPositionals: true,
    options: {
      config: { type: 'string' },
      store: { type: 'string' },
      json: { type: 'boolean', default: false },
      all: { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h', default: false },
    },
  });
}

/**
 * Whether a terminal may act on `code` or it hides text (C0 and C1 controls but tab and line feed,
 * zero-width and bidi marks): a held definition is the server's text, shown escaped, never interpreted.
 */
function unsafe(code: number): boolean {
  if (code === 0x09 || code === 0x0a) return false;
  return (
    code < 0x20 ||
    (code >= 0x7f && code <= 0x9f) ||
    (code >= 0x200b && code <= 0x200f) ||
    (code >= 0x2028 && code <= 0x202e) ||
    (code >= 0x2060 && code <= 0x2069) ||
    code === 0xfeff
  );
}

/** `text` with every character {@link unsafe} for a terminal written as a `\uXXXX` escape. */
function shown(text: string): string {
  let out = '';
  for (const character of text) {
    const code = character.codePointAt(0) ?? 0;
    out += unsafe(code) ? `\\u${code.toString(16).padStart(4, '0')}` : character;
  }
  return out;
}

/** A tool name as a line shows it: bare when it is an ordinary name, else quoted and escaped. */
function toolLabel(tool: string): string {
  return /^[A-Za-z0-9_./-]{1,128}$/.test(tool) ? tool : shown(JSON.stringify(tool));
}

/** A canonical definition, indented for reading. */
function pretty(canonical: string): string {
  const parsed = safeJsonParse(canonical);
  return shown(parsed.ok ? JSON.stringify(parsed.value, null, 2) : canonical);
}

const isPending = (held: HeldDefinition) => held.reason === 'changed' || held.reason === 'new';

async function list(store: PinStore, io: PinsIo, json: boolean): Promise<number> {
  const status = await store.status();
  if (json) {
    io.out(shown(JSON.stringify(status, null, 2)));
    return PINS_EXIT.done;
  }
  if (status.length === 0) io.out('no tools pinned yet');
  for (const entry of status) {
    const pinned = entry.pinned === undefined ? '' : ` pinned ${entry.pinned.slice(0, 12)}`;
    const held = entry.held === undefined ? '' : ` listed ${entry.held.slice(0, 12)}`;
    io.out(`${entry.server} ${toolLabel(entry.tool)} ${entry.state}${pinned}${held}`);
  }
  return PINS_EXIT.done;
}

async function diff(store: PinStore, io: PinsIo, server: string, tool: string | undefined): Promise<number> {
  const pending = (await store.held(server)).filter(
    (held) => isPending(held) && (tool === undefined || held.tool === tool),
  );
  if (pending.length === 0) {
    io.out(`nothing pending for ${tool === undefined ? `server "${server}"` : `${server} ${toolLabel(tool)}`}`);
    return PINS_EXIT.nothingPending;
  }
  for (const held of pending) {
    const pin = await store.pin(server, held.tool);
    io.out(`${server} ${toolLabel(held.tool)}: ${held.reason === 'new' ? 'new name, no pin' : 'changed'}`);
    if (pin !== undefined) io.out(`  pinned hash ${pin.hash}`);
    io.out(`  listed hash ${held.hash}`);
    for (const change of held.diff) io.out(`  ${change.change} ${shown(change.path || '(the whole definition)')}`);
    if (pin !== undefined) {
      io.out('  pinned definition:');
      io.out(pin.definition === undefined ? '  (hash only, from the pins file)' : pretty(pin.definition));
    }
    io.out('  listed definition:');
    io.out(pretty(held.definition));
  }
  return PINS_EXIT.done;
}

async function decide(
  target: PinsTarget,
  options: { io: PinsIo; decision: PinDecision; server: string; tool: string | undefined },
): Promise<number> {
  const { io, decision, server, tool } = options;
  const report = await target.store.decide(decision, server, tool);
  if (report.tools.length === 0) {
    io.out(
      `nothing pending to ${decision} for ${tool === undefined ? `server "${server}"` : `${server} ${toolLabel(tool)}`}`,
    );
    return PINS_EXIT.nothingPending;
  }
  const verb = decision === 'accept' ? 'accepted' : 'rejected';
  for (const decided of report.tools) io.out(`${verb} ${server} ${toolLabel(decided.tool)} (${decided.hash})`);
  io.out(target.afterDecision());
  return PINS_EXIT.done;
}

/** The store a pins command works on, opened by its front end, and how a decision reaches the running process. */
export interface PinsTarget {
  readonly store: PinStore;
  /** Tells the running process the store changed (or says how it will learn), in one line for the operator. */
  afterDecision(): string;
  /** Closes what opening the target opened. */
  close(): Promise<void> | void;
}

/** Options of {@link runPinsCommand}: a front end's name, help and store. */
export interface RunPinsCommandOptions {
  /** The arguments after `pins`. */
  readonly argv: readonly string[];
  readonly io: PinsIo;
  /** How the command is invoked, for messages (`extensible-mcp pins`). */
  readonly name: string;
  readonly help: string;
  /** Opens the store the flags name, or says in words why not (a usage error). */
  open(flags: {
    readonly config?: string;
    readonly store?: string;
  }): Promise<PinsTarget | string> | PinsTarget | string;
}

/**
 * `extensible-mcp pins list | diff | accept | reject` (SPEC §3.13, docs/pinning.md): the
 * operator's review of held tool definitions, on the store the proxy uses, found as the proxy
 * finds it (`--store`, else beside the config). The only writer of a decision: no model-reachable
 * path holds a pin store. Exit codes: 0 done, 1 nothing pending, 2 bad usage or config.
 */
export async function runPins(options: RunPinsOptions): Promise<number> {
  return runPinsCommand({
    argv: options.argv,
    io: options.io,
    name: 'extensible-mcp pins',
    help: pinsHelp,
    open: (flags) => openProxyTarget(flags, options.env),
  });
}

/** The proxy's store, found as the proxy finds it; a decision is signalled to the proxy on that config. */
async function openProxyTarget(
  flags: { readonly config?: string; readonly store?: string },
  env: ProxyEnv,
): Promise<PinsTarget | string> {
  try {
    const configPath = resolveConfigPath({
      ...(flags.config !== undefined && { flag: flags.config }),
      ...(env.configPath !== undefined && { env: env.configPath }),
    });
    const location = parseStoreUrl(flags.store ?? env.store, configPath);
    if (location.kind === 'memory') {
      return 'a memory: store lives inside its proxy process only; pins commands need its sqlite:FILE store';
    }
    // Never create a store file here: a missing file means the wrong config or store, not an empty one.
    if (location.kind === 'sqlite' && !existsSync(location.path)) {
      return `no store at ${location.path}: has the proxy run with this config (or --store)?`;
    }
    const store =
      location.kind === 'sqlite'
        ? openSqlitePinStore({ path: location.path })
        : await openPostgresPinStore({ url: location.url });
    return {
      store,
      afterDecision() {
        const signal = signalRunningProxy(configPath);
        return signal.signalled
          ? `signalled the running proxy (pid ${signal.pid}); it checks its servers' listings against the store now`
          : `no running proxy signalled (pid file ${signal.reason}); the decision applies at its next start or SIGHUP`;
      },
      close: () => store.close(),
    };
  } catch (error) {
    if (ProxyError.isInstance(error)) return error.message;
    throw error;
  }
}

/**
 * The pins commands on any front end's store (the proxy's CLI, the household's): parses
 * `list | diff | accept | reject`, opens the store through `open`, and runs the command. Exit
 * codes: 0 done, 1 nothing pending, 2 bad usage or a store that cannot be opened.
 */
export async function runPinsCommand(options: RunPinsCommandOptions): Promise<number> {
  const { io, name } = options;
  const usage = (message: string) => {
    io.err(`${name}: ${message}\nRun ${name} --help for usage.`);
    return PINS_EXIT.usage;
  };
  let parsed: ReturnType<typeof parsePinsArgs>;
  try {
    parsed = parsePinsArgs(options.argv);
  } catch (error) {
    return usage(error instanceof Error ? error.message : String(error));
  }
  const { values, positionals } = parsed;
  if (values.help) {
    io.out(options.help);
    return PINS_EXIT.done;
  }
  const [command, server, tool, ...rest] = positionals;
  if (rest.length > 0) return usage(`unexpected argument "${rest[0]}"`);
  switch (command) {
    case 'list':
      if (server !== undefined) return usage(`unexpected argument "${server}"`);
      break;
    case 'diff':
    case 'reject':
      if (server === undefined) return usage(`${command} needs a server name`);
      break;
    case 'accept':
      if (server === undefined) return usage('accept needs a server name');
      // Accepting everything is never the default: a tool, or --all, and not both.
      if ((tool === undefined) === !values.all) return usage('accept needs exactly one of a tool name or --all');
      break;
    case undefined:
      return usage('a command is needed: list, diff, accept or reject');
    default:
      return usage(`unknown command "${command}"`);
  }
  if (values.json && command !== 'list') return usage('--json is for pins list');
  if (values.all && command !== 'accept') return usage('--all is for pins accept');

  const target = await options.open({
    ...(values.config !== undefined && { config: values.config }),
    ...(values.store !== undefined && { store: values.store }),
  });
  if (typeof target === 'string') return usage(target);
  try {
    if (command === 'list') return await list(target.store, io, values.json);
    if (server === undefined) return usage(`${command} needs a server name`);
    if (command === 'diff') return await diff(target.store, io, server, tool);
    return await decide(target, { io, decision: command, server, tool });
  } finally {
    await target.close();
  }
}
