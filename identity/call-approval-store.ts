import type { Role } from './store';

/**
 * Where a call-approval request is (docs/human-authority.md). `used`: its approvals authorised
 * the call once; the single-use evidence store is what makes that final, this is for the windows.
 */
export type CallApprovalStatus = 'pending' | 'approved' | 'declined' | 'expired' | 'used';

/** A durable request for a person's passkey yes to one exact gated call. */
export interface CallApprovalRecord {
  readonly requestId: string;
  /** The qualified tool name. */
  readonly tool: string;
  /** The call's RFC 8785 bytes `{"tool": …, "arguments": {…}}`: what the window renders and the hash covers. */
  readonly call: string;
  /** base64url SHA-256 of `call`: the passkey challenge. */
  readonly callHash: string;
  readonly requiredRoles: readonly Role[];
  /** `CallApproval` JWT-VCs by role, as each member approved. */
  readonly approvals: Readonly<Partial<Record<Role, string>>>;
  readonly status: CallApprovalStatus;
  /** Why it was declined or expired, in words. */
  readonly reason?: string;
  readonly createdAt: number;
  readonly expiresAt: number;
  readonly updatedAt: number;
}

/**
 * What {@link CallApprovalStore.create} did: inserted the request, found the open one for its call
 * hash (and changed nothing), or found the bound of waiting requests reached (and changed nothing).
 */
export type CallApprovalCreation =
  | { readonly created: true; readonly record: CallApprovalRecord }
  | { readonly created: false; readonly record: CallApprovalRecord }
  | { readonly created: false; readonly full: true };

/**
 * Call-approval requests: their own store and table, beside (not inside) the invoice-centric
 * approvals. Transitions are compare-and-set on the status, so two racing deciders cannot both win,
 * and a call hash has at most one open (pending or approved) request, so two instances asked for
 * the same call at once open one request, not two windows (issue 28).
 */
export interface CallApprovalStore {
  /**
   * Inserts a new request, or returns the open one for its call hash (`created: false`) and
   * changes nothing. With `maxPending`, a new request is inserted only while fewer than that many
   * are pending and unexpired at its `createdAt`, counted and inserted as one step for every
   * instance on the store (`full` otherwise). A request id already used is `IdentityError('conflict')`.
   */
  create(record: CallApprovalRecord, options?: { readonly maxPending?: number }): Promise<CallApprovalCreation>;
  get(requestId: string): Promise<CallApprovalRecord | undefined>;
  /** The newest request for a call hash that is pending or approved, if any (expired or not). */
  findOpen(callHash: string): Promise<CallApprovalRecord | undefined>;
  /** Pending requests, oldest first. */
  listPending(): Promise<readonly CallApprovalRecord[]>;
  /** Stores a role's `CallApproval` iff the request is pending and that role has not approved yet. */
  addApproval(requestId: string, role: Role, credential: string, now: number): Promise<boolean>;
  /** Moves the request to `to` iff its status is one of `from`; `false` otherwise. */
  transition(
    requestId: string,
    change: {
      readonly from: readonly CallApprovalStatus[];
      readonly to: CallApprovalStatus;
      readonly now: number;
      readonly reason?: string;
    },
  ): Promise<boolean>;
  /**
   * Calls `poke` whenever a change of the request commits, through any instance on the store (and
   * when the store cannot tell: after its listener reconnects); returns the stop. Stores shared by
   * several processes that can notify have it (PostgreSQL); a waiter without it polls.
   */
  watch?(requestId: string, poke: () => void): () => void;
}
