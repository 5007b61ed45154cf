import type { Tool } from '@modelcontextprotocol/server';

/**
 * Tool-definition pinning (SPEC §3.13, docs/pinning.md): the types every part shares. A
 * definition is the raw tool object a server listed, before any augmenter; its hash is the
 * SHA-256 (lowercase hex) of its canonical JSON (RFC 8785).
 */

/** How a pin came to be: the first listing of its server, the operator's `accept`, or a `pins` file. */
export type PinSource = 'first-listing' | 'accepted' | 'pins-file';

/** The definition the proxy trusts for one tool of one server. */
export interface ToolPin {
  readonly server: string;
  readonly tool: string;
  /** SHA-256 of the canonical definition, lowercase hex. */
  readonly hash: string;
  /** The canonical JSON that was hashed; absent for a `pins` file entry that gives only the hash. */
  readonly definition?: string;
  readonly source: PinSource;
  /** Milliseconds since the epoch. */
  readonly pinnedAt: number;
}

/** Why a listed tool is held instead of admitted. */
export type HoldReason = 'changed' | 'new' | 'rejected';

/** One difference between a pinned and a listed definition: a JSON-pointer path and what happened there. */
export interface DefinitionChange {
  /** `/description`, `/inputSchema/properties/note`, …; `""` for the whole definition. */
  readonly path: string;
  readonly change: 'added' | 'removed' | 'changed';
}

/** A listed tool that is not indexed and not callable until the operator decides. */
export interface HeldTool {
  readonly tool: string;
  readonly reason: HoldReason;
  /** What differs from the pin: empty for a `new` tool (there is nothing to compare with). */
  readonly diff: readonly DefinitionChange[];
  /** The pinned hash (absent for a `new` tool) and the listed one. */
  readonly hashes: { readonly pinned?: string; readonly listed: string };
  /** The listed definition's canonical JSON. */
  readonly definition: string;
}

/** What the store knows of one server's pins, as {@link admit} reads it. */
export interface ServerPins {
  /** Whether the server's first listing was pinned (even an empty one): afterwards every new name is held. */
  readonly known: boolean;
  /** The pins, by tool name. */
  readonly pins: ReadonlyMap<string, ToolPin>;
  /** The hashes the operator rejected, by tool name. */
  readonly rejected: ReadonlyMap<string, ReadonlySet<string>>;
}

/** The outcome of {@link admit} for one listing. */
export interface Admission {
  /** The tools to index, as listed. */
  readonly admitted: readonly Tool[];
  /** The tools held for the operator's review. */
  readonly held: readonly HeldTool[];
  /** Pins to write on the server's first listing (the whole listing), else empty. */
  readonly firstPins: readonly ToolPin[];
  /** Whether this was the server's first listing: write {@link Admission.firstPins} with `pinFirst`. */
  readonly first: boolean;
}

/** What the operator decided about a pending definition. */
export type PinDecision = 'accept' | 'reject';

/** A held definition as the store keeps it: waiting for the operator (`changed`, `new`) or refused (`rejected`). */
export interface HeldDefinition {
  readonly server: string;
  readonly tool: string;
  readonly reason: HoldReason;
  readonly hash: string;
  readonly definition: string;
  readonly diff: readonly DefinitionChange[];
  /** Milliseconds since the epoch of the listing that held it. */
  readonly seenAt: number;
}

/** One tool as `pins list` shows it. */
export interface PinStatus {
  readonly server: string;
  readonly tool: string;
  readonly state: 'pinned' | 'pending-changed' | 'pending-new' | 'rejected';
  /** The pinned hash, when there is a pin. */
  readonly pinned?: string;
  /** The held hash, when a definition waits or was rejected. */
  readonly held?: string;
}

/** What an accept or reject did. */
export interface DecisionReport {
  readonly decision: PinDecision;
  readonly server: string;
  /** The tools decided, with the hash that was accepted or rejected. */
  readonly tools: readonly { readonly tool: string; readonly hash: string }[];
}

/**
 * Where pins live (SPEC §11): async and behind an interface, so a shared store serves several
 * proxy instances; every implementation passes one contract suite. Only the operator's commands
 * call {@link PinStore.decide}: no model-reachable path holds a store.
 */
export interface PinStore {
  /** The pins and rejections of `server`. */
  read(server: string): Promise<ServerPins>;
  /**
   * Writes a server's first pins (its first listing, even an empty one), in one transaction, only
   * if the server is not known yet. False when it is (another proxy pinned first): read again and
   * admit again.
   */
  pinFirst(server: string, pins: readonly ToolPin[]): Promise<boolean>;
  /**
   * Records what a listing of `server` held, in place of what its previous listing held: a
   * definition the server no longer offers no longer waits.
   */
  hold(server: string, held: readonly HeldTool[]): Promise<void>;
  /** The held definitions (waiting and rejected), of one server or of all, ordered by server then tool. */
  held(server?: string): Promise<readonly HeldDefinition[]>;
  /** Every known tool's state, of one server or of all, ordered by server then tool. */
  status(server?: string): Promise<readonly PinStatus[]>;
  /** The pin of one tool, if any. */
  pin(server: string, tool: string): Promise<ToolPin | undefined>;
  /**
   * The operator's decision on what waits (`changed` or `new`): for `tool`, or every waiting tool
   * of `server` when `tool` is absent. Accept makes the held definition the pin; reject records its
   * hash as refused for good and keeps the old pin. Reports no tools when nothing was waiting.
   */
  decide(decision: PinDecision, server: string, tool?: string): Promise<DecisionReport>;
  /**
   * Calls `onDecision('decision')` after every decision any process records in this store, and
   * `onDecision('connected')` each time the watch (re)connects, since one may have gone unheard
   * meanwhile; returns the stop. Only a store that replicas share has it (PostgreSQL): a SQLite
   * file's proxy hears `pins accept` by its pid file.
   */
  watch?(onDecision: (why: 'decision' | 'connected') => void): () => void;
  /** Releases what the store holds open; the owner's to call. */
  close(): Promise<void>;
}
