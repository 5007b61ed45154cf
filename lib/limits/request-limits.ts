import type { CallContext, CallFilter } from '../../proxy/index';

/**
 * Bounds on what one caller can ask of the household (issue 26 defect 6). All traffic arrives from
 * 127.0.0.1 or a load balancer, so "one caller" is a chat session (the MCP session it drives) or an
 * authenticated principal (an `/mcp` token): never an address. The counters live behind
 * {@link RequestLimitStore}, so replicas sharing a store share them.
 */

/** The caps, as issue 26 suggests them. */
export const requestLimits = {
  /** Pending approval requests one caller may have at once. */
  pendingPerRequester: 3,
  /** Pending approval requests the household holds at once, whoever asked: the windows stay readable. */
  pendingPerHousehold: 20,
  /** Invoices one caller may ask the shop for per {@link requestLimits.invoiceWindowMs}. */
  invoicesPerWindow: 10,
  invoiceWindowMs: 60_000,
  /** How long a reserved slot counts while its `request_approval` call is still running (a crash frees it after this). */
  reservationHoldMs: 60_000,
} as const;

/** Why a pending-approval slot was refused. */
export type ReservationRefusal = {
  readonly ok: false;
  readonly scope: 'requester' | 'household';
  readonly pending: number;
};

/** The counters the limits need, atomic across processes sharing the store (SQLite today; PostgreSQL can implement the same). */
export interface RequestLimitStore {
  /**
   * Takes a pending-approval slot for `requester` iff both it and the household are under their caps,
   * counting pending unexpired requests and slots still being filled, in one atomic step.
   */
  reserveApproval(input: {
    readonly requester: string;
    readonly now: number;
    readonly perRequester: number;
    readonly perHousehold: number;
    readonly holdMs: number;
  }): Promise<{ readonly ok: true; readonly reservation: string } | ReservationRefusal>;
  /** The slot now holds this approval request (a request that already had a slot frees this one). */
  bindApproval(reservation: string, approvalId: string): Promise<void>;
  /** Frees a slot whose call created no request. */
  releaseApproval(reservation: string): Promise<void>;
  /** Counts one event for `key` in a sliding window iff fewer than `limit` are in it. */
  take(input: {
    readonly key: string;
    readonly now: number;
    readonly limit: number;
    readonly windowMs: number;
  }): Promise<{ readonly ok: true } | { readonly ok: false; readonly retryAfterMs: number }>;
}

/** What {@link limitRequests} needs. */
export interface LimitRequestsOptions {
  readonly store: RequestLimitStore;
  /** The shop's invoice tool: which server (the name the household configured) and tool. */
  readonly invoiceTool: { readonly server: string; readonly tool: string };
  readonly now?: () => number;
}

/** Who is asking: the principal (SPEC §3.5), which is the chat session in the chat and the token's name on `/mcp`. */
export function requesterOf(context: CallContext): string {
  return `principal:${context.principal.id}`;
}

/**
 * The call filter holding the limits: `request_approval` needs a free pending slot (per caller and
 * per household), reserved before the tool runs and bound to the request it created, so 50 callers
 * at once cannot overshoot; asking the shop for an invoice is rate-limited per caller. Refusals are
 * reasons the model can pass on; nothing is created or signed.
 */
export function limitRequests(options: LimitRequestsOptions): CallFilter {
  const now = options.now ?? Date.now;
  return async function limitRequests(request, context) {
    const requester = requesterOf(context);
    if (request.server?.name === options.invoiceTool.server && request.toolName === options.invoiceTool.tool) {
      const taken = await options.store.take({
        key: `invoice:${requester}`,
        now: now(),
        limit: requestLimits.invoicesPerWindow,
        windowMs: requestLimits.invoiceWindowMs,
      });
      if (taken.ok) return { decision: 'allow' };
      return {
        decision: 'deny',
        reason: `At most ${requestLimits.invoicesPerWindow} invoices a minute per chat: ask again in ${Math.ceil(taken.retryAfterMs / 1000)} s.`,
      };
    }
    if (request.server !== undefined || request.toolName !== 'request_approval') return { decision: 'allow' };
    const slot = await options.store.reserveApproval({
      requester,
      now: now(),
      perRequester: requestLimits.pendingPerRequester,
      perHousehold: requestLimits.pendingPerHousehold,
      holdMs: requestLimits.reservationHoldMs,
    });
    if (!slot.ok) {
      return {
        decision: 'deny',
        reason:
          slot.scope === 'requester'
            ? `This chat already has ${slot.pending} approval requests waiting (at most ${requestLimits.pendingPerRequester}): wait until one is approved, declined or expired before asking again.`
            : `The household already has ${slot.pending} approval requests waiting (at most ${requestLimits.pendingPerHousehold}): try again once some are decided or expired.`,
      };
    }
    return {
      decision: 'allow',
      wrap: async (dispatch) => {
        let approvalId: string | undefined;
        try {
          const outcome = await dispatch();
          const content =
            outcome.status === 'completed' && !outcome.result.isError
              ? (outcome.result.structuredContent as Record<string, unknown> | undefined)
              : undefined;
          approvalId = typeof content?.approvalId === 'string' ? content.approvalId : undefined;
          return outcome;
        } finally {
          // Bound to the request it created, or freed: a refused or failed call holds no slot.
          if (approvalId === undefined) await options.store.releaseApproval(slot.reservation);
          else await options.store.bindApproval(slot.reservation, approvalId);
        }
      },
    };
  };
}
