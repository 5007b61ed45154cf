import { z } from 'zod';
import type { IdentityEvent } from '../identity/index';
import type { ProxyEvent } from '../proxy/index';

/**
 * The one event schema of the household (SPEC §8): every decision of the proxy, identity, payments
 * and the runtime, flat enough to filter (by source, kind, outcome, session, order) and to chain
 * into the audit table. No field may carry a secret: tokens, keys, enrollment codes and session
 * tokens never enter an event; DIDs, credential ids and invoice ids are public.
 */
export const HouseholdEvent = z.strictObject({
  /** ISO time the event was recorded. */
  at: z.iso.datetime(),
  source: z.enum(['proxy', 'identity', 'payments', 'runtime']),
  /** Noun then verb, kebab-case (`policy-decision`, `charge-succeeded`). */
  kind: z.string().regex(/^[a-z]+(-[a-z]+)+$/),
  outcome: z.enum(['allow', 'deny', 'ok', 'error', 'info']),
  /**
   * The session the event belongs to, when there is one: for proxy decisions the digest of the
   * discovery scope (never a raw MCP session id or handle, docs/protocol.md).
   */
  session: z.string().max(200).optional(),
  /** The order (the invoice `jti`) it concerns, when known. */
  orderId: z.string().max(200).optional(),
  approvalId: z.string().max(200).optional(),
  /** One sentence a person can read on the live log. */
  message: z.string().max(2000),
  /** Small structured facts: amounts in cents, roles, tool names, durations. */
  data: z
    .record(z.string(), z.union([z.string().max(2000), z.number(), z.boolean(), z.array(z.string().max(200))]))
    .optional(),
});

/** A household event. */
export type HouseholdEvent = z.infer<typeof HouseholdEvent>;

/**
 * Receives validated events. A required listener (the audit table) may return a promise: the bus
 * waits for it before any other listener sees the event.
 */
export type HouseholdEventSink = (event: HouseholdEvent) => unknown;

/** An event as emitters hand it in: the bus stamps the time when none is given. */
export type EmittedEvent = Omit<HouseholdEvent, 'at'> & { readonly at?: string };

/**
 * The in-process event bus: validates every event against the one schema, then hands it to the
 * required listeners (the audit table) at once, in emission order, waits until they took it, and
 * only then fans it out to the others, one event at a time in emission order. A required listener
 * must keep the order it is called in (`AuditLog.append` does), so the chain and the live
 * listeners see one order.
 */
export interface EventBus {
  /** Queues the event; never throws. A required listener's failure is reported, and the others still see it. */
  emit(event: EmittedEvent): void;
  /**
   * As {@link emit}, but resolves only once every required listener (the audit table) took the
   * event, and rejects when one could not, before any other listener sees it: for decisions that
   * must not take effect unrecorded.
   */
  record(event: EmittedEvent): Promise<void>;
  /**
   * A `required` listener takes each event before the others see it, and is called in emission order
   * without waiting for its previous call to settle; its failure is what {@link record} rejects with.
   */
  subscribe(listener: HouseholdEventSink, options?: { readonly required?: boolean }): () => void;
  /** Resolves once every event emitted so far has been recorded and fanned out. */
  flush(): Promise<void>;
}

/**
 * Creates the event bus. An event that fails the schema is a programming error: it is reported to
 * `onInvalid` and dropped, never fanned out half-formed. A throwing listener never stops the others,
 * except that {@link EventBus.record} stops at a required one.
 */
export function createEventBus(options: { readonly onInvalid?: (error: Error) => void } = {}): EventBus {
  const required = new Set<HouseholdEventSink>();
  const listeners = new Set<HouseholdEventSink>();
  const report = (error: unknown) => options.onInvalid?.(error instanceof Error ? error : new Error(String(error)));
  // The live listeners see one event at a time, in emission order: the chain's order.
  let tail: Promise<void> = Promise.resolve();

  /**
   * Hands the event to every required listener now, in emission order, without waiting for the
   * previous event's to settle: the audit table keeps the order it is handed rows in, and commits a
   * burst of them together. Settles once they all took it.
   */
  async function hand(event: HouseholdEvent, strict: boolean): Promise<void> {
    const taken = await Promise.allSettled([...required].map(async (listener) => listener(event)));
    for (const outcome of taken) {
      if (outcome.status === 'fulfilled') continue;
      report(outcome.reason);
      if (strict) throw new Error(`the ${event.kind} event could not be recorded`, { cause: outcome.reason });
    }
  }

  function fanOut(event: HouseholdEvent): void {
    for (const listener of [...listeners]) {
      try {
        // A live listener is not waited for: a slow reader must not hold up the chain.
        Promise.resolve(listener(event)).catch(report);
      } catch (error) {
        report(error);
      }
    }
  }

  function publish(event: EmittedEvent, strict: boolean): Promise<void> {
    const parsed = HouseholdEvent.safeParse({ at: new Date().toISOString(), ...event });
    if (!parsed.success) {
      const error = new Error(`invalid event ${event.kind}: ${z.prettifyError(parsed.error)}`);
      report(error);
      return strict ? Promise.reject(error) : Promise.resolve();
    }
    const taken = hand(parsed.data, strict);
    // Its refusal is the step's, below; until earlier events are through, nothing else awaits it.
    taken.catch(() => undefined);
    // Fanned out after every earlier event, and only once the required listeners took this one.
    const step = tail.then(() => taken).then(() => fanOut(parsed.data));
    tail = step.catch(() => undefined);
    return step;
  }

  return {
    emit: (event) => {
      void publish(event, false);
    },
    record: (event) => publish(event, true),
    subscribe(listener, subscription = {}) {
      const set = subscription.required === true ? required : listeners;
      set.add(listener);
      return () => set.delete(listener);
    },
    flush: () => tail,
  };
}

/** A proxy decision as a household event. */
export function fromProxyEvent(event: ProxyEvent): Omit<HouseholdEvent, 'at'> {
  // A tool held for the operator's review (SPEC §3.13): the live log shows what moved and both hashes.
  if (event.held !== undefined) {
    const { server, tool, reason, diff, hashes } = event.held;
    return {
      source: 'proxy',
      kind: 'tool-held',
      outcome: 'deny',
      message: `tool ${JSON.stringify(tool.slice(0, 200))} of server "${server}" held (${reason}) for the operator's review`,
      data: {
        server,
        tool: tool.slice(0, 2000),
        reason,
        changed: diff.map((change) => change.path.slice(0, 200)),
        listed: hashes.listed,
        ...(hashes.pinned !== undefined && { pinned: hashes.pinned }),
      },
    };
  }
  const outcome =
    event.decision === 'allow' || event.decision === 'deny' || event.decision === 'error' ? event.decision : 'info';
  return {
    source: 'proxy',
    kind: `${event.pipeline}-decision`,
    outcome,
    session: event.scope,
    message: `${event.filter} ${event.decision} ${event.tool}${event.reason ? `: ${event.reason}` : ''}`.slice(0, 2000),
    data: {
      filter: event.filter,
      tool: event.tool.slice(0, 2000),
      principal: event.principal.slice(0, 2000),
      durationUs: event.durationUs,
    },
  };
}

/** An identity event as a household event. */
export function fromIdentityEvent(event: IdentityEvent): Omit<HouseholdEvent, 'at'> {
  switch (event.kind) {
    case 'enrollment-code-issued':
      return {
        source: 'identity',
        kind: event.kind,
        outcome: 'info',
        message: `enrollment code issued for ${event.role} — see terminal`,
        data: { role: event.role },
      };
    case 'enrollment-refused':
      return {
        source: 'identity',
        kind: event.kind,
        outcome: 'deny',
        message: `enrollment refused: ${event.reason}`,
        ...(event.role === undefined ? {} : { data: { role: event.role } }),
      };
    case 'passkey-enrolled':
      return {
        source: 'identity',
        kind: event.kind,
        outcome: 'ok',
        message: `passkey enrolled for the ${event.role}`,
        data: { role: event.role, memberDid: event.memberDid, credentialId: event.credentialId },
      };
    case 'sign-in-succeeded':
      return {
        source: 'identity',
        kind: event.kind,
        outcome: 'ok',
        message: `the ${event.role} signed in`,
        data: { role: event.role, credentialId: event.credentialId },
      };
    case 'passkey-refused':
      return {
        source: 'identity',
        kind: event.kind,
        outcome: 'deny',
        message: `passkey ${event.ceremony} refused: ${event.reason}`,
        data: { ceremony: event.ceremony },
      };
    case 'approval-created':
      return {
        source: 'identity',
        kind: event.kind,
        outcome: 'info',
        orderId: event.invoiceId,
        approvalId: event.approvalId,
        message: `approval requested from ${event.requiredRoles.join(' and ')} for $${(event.totalCents / 100).toFixed(2)}`,
        data: { totalCents: event.totalCents, requiredRoles: [...event.requiredRoles] },
      };
    case 'approval-refused':
      return { source: 'identity', kind: event.kind, outcome: 'deny', message: `approval refused: ${event.reason}` };
    case 'approval-approved':
      return {
        source: 'identity',
        kind: event.kind,
        outcome: 'allow',
        orderId: event.invoiceId,
        approvalId: event.approvalId,
        message: `the ${event.role} approved with a passkey${event.complete ? '; every approval is in' : ''}`,
        data: { role: event.role, complete: event.complete },
      };
    case 'approval-declined':
      return {
        source: 'identity',
        kind: event.kind,
        outcome: 'deny',
        orderId: event.invoiceId,
        approvalId: event.approvalId,
        message: `the ${event.role} declined`,
        data: { role: event.role },
      };
    case 'approval-handed-over':
      return {
        source: 'identity',
        kind: event.kind,
        outcome: 'info',
        orderId: event.invoiceId,
        approvalId: event.approvalId,
        message: `the parent's allowance no longer covers the order (${handoverWords[event.cause]}): nothing was charged, and the order now waits for the parent's passkey`,
        data: { cause: event.cause, allowanceId: event.allowanceId, requiredRoles: ['child', 'parent'] },
      };
    case 'approval-expired':
    case 'approval-settled':
    case 'approval-fulfilled':
      return {
        source: 'identity',
        kind: event.kind,
        outcome: event.kind === 'approval-expired' ? 'deny' : 'ok',
        orderId: event.invoiceId,
        approvalId: event.approvalId,
        message: settledWords[event.kind],
      };
    case 'call-approval-requested':
      return {
        source: 'identity',
        kind: event.kind,
        outcome: 'info',
        approvalId: event.requestId,
        message:
          `approval requested from ${event.requiredRoles.join(' and ')} for exactly one call of ${event.tool}`.slice(
            0,
            2000,
          ),
        data: { tool: event.tool.slice(0, 2000), callHash: event.callHash, requiredRoles: [...event.requiredRoles] },
      };
    case 'call-approval-approved':
      return {
        source: 'identity',
        kind: event.kind,
        outcome: 'allow',
        approvalId: event.requestId,
        message: `the ${event.role} approved the call with a passkey${event.complete ? '; every approval is in' : ''}`,
        data: { tool: event.tool.slice(0, 2000), role: event.role, complete: event.complete },
      };
    case 'call-approval-declined':
      return {
        source: 'identity',
        kind: event.kind,
        outcome: 'deny',
        approvalId: event.requestId,
        message: `the ${event.role} declined the call: it will not run`,
        data: { tool: event.tool.slice(0, 2000), role: event.role },
      };
    case 'call-approval-expired':
    case 'call-approval-spent':
      return {
        source: 'identity',
        kind: event.kind,
        outcome: event.kind === 'call-approval-expired' ? 'deny' : 'ok',
        approvalId: event.requestId,
        message:
          event.kind === 'call-approval-expired'
            ? 'nobody approved the call in time: it will not run'
            : 'the approval authorised its call once and is spent',
        data: { tool: event.tool.slice(0, 2000) },
      };
  }
}

const handoverWords = {
  'budget-spent': 'its budget for this period is spent',
  revoked: 'it was revoked',
  'not-covered': 'it does not cover this order',
} as const;

const settledWords = {
  'approval-expired': 'the invoice expired before every approval was given: nothing can be charged for it',
  'approval-settled': 'paid: the approval is settled by the payment receipt',
  'approval-fulfilled': "the shop's signed delivery commitment is recorded: the order's evidence chain is complete",
} as const;
