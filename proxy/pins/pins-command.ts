import { parseArgs } from 'node:util';
import { safeJsonParse } from '../policy/safe-json';
import type { HeldDefinition, PinDecision, PinStore } from './types';

/** Where `pins` writes: the operator's terminal. */
export interface PinsIo {
  out(line: string): void;
  err(line: string): void;
}

/** Exit codes of `pins` (docs/pinning.md). */
export const PINS_EXIT = { done: 0, nothingPending: 1, usage: 2 } as const;

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
