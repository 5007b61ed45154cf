import type { Tool } from '@modelcontextprotocol/server';
import { createPinAdmission, type PinAdmission } from '../gateway/pin-admission';
import type { EventHook } from '../gateway/types';
import { pinDefinition } from '../pins/pin-definition';
import type { PinStore } from '../pins/types';

/** Options of {@link createPinnedCatalog}. */
export interface PinnedCatalogOptions {
  /** Every page of the upstream's raw `tools/list` on one connection. */
  readonly list: () => Promise<Tool[]>;
  /** The name the upstream is pinned under: the YAML's `proxy.name`, so `pins diff <proxy.name>` reviews it. */
  readonly server: string;
  /** Where definitions are pinned; absent, nothing is pinned and every listed tool is admitted. */
  readonly store?: PinStore | undefined;
  readonly log: (line: string) => void;
  /** Where each hold goes as a `tool-held` event. */
  readonly emit: EventHook;
}

/**
 * One upstream connection's tools as the client may see and call them: its last listing, through
 * the same admission as search mode when pins are configured.
 */
export interface PinnedCatalog {
  /** The admitted tools by name, listed afresh (through admission) when none is known or on `refresh`. */
  tools(refresh: boolean): Promise<ReadonlyMap<string, Tool>>;
  /** Whether `tool` is exactly a definition the last listing admitted (same canonical hash). */
  admits(tool: Tool): boolean;
  /** The review message refusing a call to `tool` while it is held; else `undefined`. */
  held(tool: string): string | undefined;
  /** The upstream said its tools changed: with pins, list again now, so holds are logged and refused at once. */
  changed(): void;
  /** Admits the last listing again against the store as it is now (SIGHUP); `true` when what is admitted changed. */
  readmit(): Promise<boolean>;
}

/** The admitted tools' names and hashes, to tell whether a re-admission changed what the client sees. */
function fingerprint(tools: ReadonlyMap<string, string>): string {
  return JSON.stringify([...tools].sort(([left], [right]) => (left < right ? -1 : left > right ? 1 : 0)));
}

/**
 * The catalog of one upstream connection. Without pins it is the raw listing. With pins each
 * listing goes through {@link createPinAdmission} on the raw definitions, so a held tool is left
 * out of what the client lists, its call is refused naming the review, and it is logged and
 * reported as a `tool-held` event, exactly as in search mode.
 */
export function createPinnedCatalog(options: PinnedCatalogOptions): PinnedCatalog {
  const { server, store } = options;
  /** What the last admission let through, by name, with each definition's hash. */
  let admitted = new Map<string, Tool>();
  let hashes = new Map<string, string>();
  /**
   * Each admitted definition's JSON as the admission saw it: a `tools/list` page that relays the
   * very same bytes is admitted without hashing each tool again on every request. A definition
   * spelled otherwise (another key order) is hashed, so the cache never decides differently.
   */
  let texts = new Map<string, string>();
  /** The listing in progress or done; cleared when the upstream's tools changed (without pins) or it failed. */
  let listing: Promise<void> | undefined;

  const admission: PinAdmission | undefined =
    store === undefined
      ? undefined
      : createPinAdmission({
          store,
          index: (_server, tools) => {
            admitted = new Map(tools.map((tool) => [tool.name, tool]));
            hashes = new Map(tools.map((tool) => [tool.name, pinDefinition(tool).hash]));
            texts = new Map(tools.map((tool) => [tool.name, JSON.stringify(tool)]));
          },
          log: options.log,
          emit: options.emit,
          // The client sees the upstream's own names.
          qualify: (_server, tool) => tool,
        });

  async function list(): Promise<void> {
    const tools = await options.list();
    if (admission === undefined) admitted = new Map(tools.map((tool) => [tool.name, tool]));
    else await admission.list(server, tools);
  }

  function relist(): Promise<void> {
    const next = list();
    listing = next;
    // A failed listing is not kept: the next request lists again.
    next.catch(() => {
      if (listing === next) listing = undefined;
    });
    return next;
  }

  return {
    async tools(refresh) {
      await (listing === undefined || refresh ? relist() : listing);
      // Read after the wait: a re-admission may have replaced what is admitted since.
      return admitted;
    },
    admits(tool) {
      if (admission === undefined) return true;
      const hash = hashes.get(tool.name);
      if (hash === undefined) return false;
      return texts.get(tool.name) === JSON.stringify(tool) || hash === pinDefinition(tool).hash;
    },
    held(tool) {
      return admission?.refusal(tool)?.reason;
    },
    changed() {
      if (admission === undefined) listing = undefined;
      else
        void relist().catch((error: unknown) => options.log(`could not list the upstream's tools: ${String(error)}`));
    },
    async readmit() {
      if (admission === undefined) return false;
      const before = fingerprint(hashes);
      await admission.readmit();
      return fingerprint(hashes) !== before;
    },
  };
}
