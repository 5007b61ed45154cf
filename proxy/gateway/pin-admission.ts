import type { Tool } from '@modelcontextprotocol/server';
import { qualifyName } from '../names';
import { admit } from '../pins/admit';
import type { HeldTool, HoldReason, PinStore } from '../pins/types';
import type { EventHook, ToolHeldFacts } from './types';

/** Options of {@link createPinAdmission}. */
export interface PinAdmissionOptions {
  readonly store: PinStore;
  /** Indexes what a listing admitted, in place of what the server's previous listing admitted. */
  readonly index: (server: string, tools: readonly Tool[]) => void;
  readonly log: (line: string) => void;
  readonly emit: EventHook;
  /** The operator's pins command, as refusals and log lines name it; default `extensible-mcp pins`. */
  readonly reviewCommand?: string;
  /**
   * How a client names `server`'s `tool`: in the refusals and the events. Default
   * `{server}__{tool}` (search mode); transparent mode passes the bare name its client sees.
   */
  readonly qualify?: (server: string, tool: string) => string;
}

/** Tool-definition pinning between a server's listing and the index (SPEC §3.13, docs/pinning.md). */
export interface PinAdmission {
  /** Admits a server's raw listing against the store and indexes what was admitted; never throws. */
  list(server: string, tools: readonly Tool[]): Promise<void>;
  /** Admits every server's last listing again, against the store as it is now (SIGHUP, after `pins accept`). */
  readmit(): Promise<void>;
  /** Forgets a server that left: its last listing and what it held. */
  remove(server: string): void;
  /** The refusal of a call to `tool` (a qualified name) while it is held, and its server; else `undefined`. */
  refusal(tool: string): { readonly server: string; readonly reason: string } | undefined;
}

/** The model-facing refusal of a held tool: it names the review, never the held definition. */
function refusalOf(
  server: string,
  held: { readonly tool: string; readonly reason: HoldReason },
  command: string,
  qualify: (server: string, tool: string) => string,
): string {
  const qualified = JSON.stringify(qualify(server, held.tool));
  const review = `${command} diff ${server} ${held.tool}`;
  switch (held.reason) {
    case 'changed':
      return `The definition of ${qualified} changed and is held for the operator's review (${review}).`;
    case 'new':
      return `${qualified} is new to server "${server}" and is held for the operator's review (${review}).`;
    case 'rejected':
      return `The definition of ${qualified} was rejected by the operator; it cannot be called.`;
  }
}

/** How the log names a hold: the tool, why, what moved, both hashes, and the command to review it. */
function describeHold(server: string, held: HeldTool, command: string): string {
  const moved = held.diff.length === 0 ? '' : `: ${held.diff.map((change) => change.path || '(whole)').join(', ')}`;
  const hashes = `${held.hashes.pinned === undefined ? '' : `pinned ${held.hashes.pinned.slice(0, 12)}, `}listed ${held.hashes.listed.slice(0, 12)}`;
  const name = JSON.stringify(String(held.tool).slice(0, 80));
  return `server "${server}": tool ${name} held (${held.reason}${moved}; ${hashes}); review it with ${command} diff ${server}`;
}

/**
 * The admission step every listing of every server goes through (first connection, `list_changed`,
 * a restart, a SIGHUP re-admission): the raw definitions, before any augmenter, are checked with
 * {@link admit}; only admitted tools reach the index. A held tool is logged and reported as a
 * `tool-held` event, and a call to it is refused naming the review. The listings of one server are
 * admitted one at a time, in the order they arrived, so an older listing never replaces a newer
 * one. A store that fails indexes nothing of that listing (fail closed).
 */
export function createPinAdmission(options: PinAdmissionOptions): PinAdmission {
  const { store, index, log, emit } = options;
  const command = options.reviewCommand ?? 'extensible-mcp pins';
  const qualify = options.qualify ?? qualifyName;
  /** Each server's latest raw listing, for a re-admission. */
  const listings = new Map<string, readonly Tool[]>();
  /** What each server's latest admission held, by qualified name. */
  const held = new Map<string, Map<string, string>>();
  /** The admission in progress per server: the next listing waits for it. */
  const queues = new Map<string, Promise<void>>();

  async function check(server: string, tools: readonly Tool[]): Promise<void> {
    let admission = admit(server, tools, await store.read(server));
    // A first listing is pinned only while the server is still unknown; another proxy on the
    // same store may have pinned first, and then its pins decide.
    if (admission.first && !(await store.pinFirst(server, admission.firstPins))) {
      admission = admit(server, tools, await store.read(server));
    }
    if (!admission.first) await store.hold(server, admission.held);
    if (listings.get(server) !== tools) return;
    held.set(
      server,
      new Map(admission.held.map((tool) => [qualify(server, tool.tool), refusalOf(server, tool, command, qualify)])),
    );
    index(server, admission.admitted);
    if (admission.first) log(`server "${server}": first listing, ${admission.firstPins.length} tools pinned`);
    for (const tool of admission.held) {
      log(describeHold(server, tool, command));
      const facts: ToolHeldFacts = {
        server,
        tool: tool.tool,
        reason: tool.reason,
        diff: tool.diff,
        hashes: tool.hashes,
      };
      emit({
        ts: new Date().toISOString(),
        principal: 'operator',
        scope: 'none',
        pipeline: 'listing',
        filter: 'toolPins',
        tool: qualify(server, tool.tool),
        decision: 'deny',
        reason: `tool-held: ${tool.reason}`,
        durationUs: 0,
        held: facts,
      });
    }
  }

  function enqueue(server: string, tools: readonly Tool[]): Promise<void> {
    const previous = queues.get(server) ?? Promise.resolve();
    const next = previous
      .then(() => check(server, tools))
      .catch((error: unknown) => {
        // Fail closed: nothing of a listing that could not be checked is searchable or callable.
        if (listings.get(server) === tools) {
          index(server, []);
          held.delete(server);
        }
        log(
          `server "${server}": its tools could not be checked against their pins, none is indexed: ${error instanceof Error ? error.message : String(error)}`,
        );
      });
    queues.set(server, next);
    void next.finally(() => {
      if (queues.get(server) === next) queues.delete(server);
    });
    return next;
  }

  return {
    list(server, tools) {
      listings.set(server, tools);
      return enqueue(server, tools);
    },

    async readmit() {
      await Promise.all([...listings].map(([server, tools]) => enqueue(server, tools)));
    },

    remove(server) {
      listings.delete(server);
      held.delete(server);
    },

    refusal(tool) {
      for (const [server, refusals] of held) {
        const reason = refusals.get(tool);
        if (reason !== undefined) return { server, reason };
      }
      return undefined;
    },
  };
}
