import { randomUUID } from 'node:crypto';
import type { CallToolResult } from '@modelcontextprotocol/server';
import type { Approvals, CallApprovals, Role, WaitOutcome } from '../../identity/index';
import type { EventBus } from '../events';
import { invoiceTerms, jsonOf, textOf } from './invoice-terms';
import type { McpSession } from './mcp-session';
import { callSummary, resultSummary } from './tool-summaries';
import type { ResumePoint } from './turn-leases';
import type { ChatEvent, ChatEventBody } from './types';

/** A quoted order the planner can ask for again ("order again"). */
export interface QuotedOrder {
  readonly lines: ReadonlyArray<{ readonly sku: string; readonly qty: number; readonly unitPriceCents?: number }>;
  readonly deliverTo?: string;
}

/** What a chat session keeps server-side besides its event log. */
export interface ChatSessionState {
  readonly sessionId: string;
  readonly mcp: McpSession;
  /** The last signed invoice's lines and address, or the clerk's last proposal. */
  lastOrder?: QuotedOrder;
  /** The id of the last invoice the shop signed in this chat: what "cancel my order" cancels. */
  lastInvoiceId?: string;
  readonly approveUrls: Map<string, Readonly<Partial<Record<Role, string>>>>;
  readonly invoiceApprovals: Map<string, string>;
  readonly payments: Map<string, { readonly paymentRef: string; readonly amountCents: number }>;
  /** The last 'approval' state emitted per request, so an unchanged request is not repeated. */
  readonly approvalStates: Map<string, string>;
}

/** Everything one turn's tool steps need. */
export interface TurnContext {
  readonly session: ChatSessionState;
  readonly emit: (body: ChatEventBody) => Promise<ChatEvent>;
  readonly signal: AbortSignal;
  readonly approvals: Pick<Approvals, 'get' | 'wait'>;
  /** Gated non-payment calls (`approval_required`): the loop waits on them as on a payment's approval. */
  readonly callApprovals?: Pick<CallApprovals, 'wait'>;
  readonly events: Pick<EventBus, 'subscribe'>;
  /** The merchant the household pinned: an invoice from anyone else is not shown as an order. */
  readonly merchantDid: string | undefined;
  /**
   * Records where another instance would pick this turn up if this one died (with `null`: nothing
   * left to pick up). Absent when the turn has no lease (a test's bare context).
   */
  readonly resumable?: (point: ResumePoint | null) => Promise<void>;
}

/** One meta-tool call's outcome. */
export interface ToolOutcome {
  readonly result: CallToolResult;
  readonly isError: boolean;
  readonly text: string;
  readonly json: Record<string, unknown> | undefined;
}

/**
 * Runs one meta-tool call through the session's MCP session, with its 'tool-call' and 'tool-result'
 * events, and turns what the tools returned into the chat's state events: the signed terms as an
 * 'order', the approval request as an 'approval', the payment and the delivery commitment as a
 * 'receipt'. The page's facts come from these results (signed bytes), never from a model's words.
 */
export async function runTool(
  context: TurnContext,
  call: { readonly tool: string; readonly args: Record<string, unknown>; readonly callId?: string },
): Promise<ToolOutcome> {
  const { tool, args } = call;
  const callId = call.callId ?? randomUUID();
  await context.emit({ type: 'tool-call', callId, tool: toolLabel(tool, args), summary: callSummary(tool, args) });
  let result: CallToolResult;
  try {
    result = await context.session.mcp.callTool(tool, args, context.signal);
  } catch (error) {
    if (context.signal.aborted) throw error;
    // A transport fault is fed back like any tool error: the turn explains it rather than crashing.
    result = {
      isError: true,
      content: [
        { type: 'text', text: `The tool call failed: ${error instanceof Error ? error.message : 'unknown error'}` },
      ],
    };
  }
  const isError = result.isError === true;
  const text = textOf(result);
  const json = jsonOf(result);
  await context.emit({
    type: 'tool-result',
    callId,
    tool: toolLabel(tool, args),
    isError,
    summary: resultSummary({ tool, args, isError, text, json }),
  });
  if (!isError && json !== undefined && tool === 'call_tool') {
    await recordState(context, String(args.tool_name ?? ''), args.arguments, json);
  }
  return { result, isError, text, json };
}

/** The name the chat shows for a step: the tool behind `call_tool`, else the meta-tool. */
function toolLabel(tool: string, args: Readonly<Record<string, unknown>>): string {
  return tool === 'call_tool' && typeof args.tool_name === 'string' ? args.tool_name.slice(0, 200) : tool;
}

async function recordState(
  context: TurnContext,
  tool: string,
  innerArgs: unknown,
  json: Record<string, unknown>,
): Promise<void> {
  const { session } = context;
  switch (tool) {
    case 'pizza__request_invoice': {
      const terms = typeof json.invoice === 'string' ? invoiceTerms(json.invoice, context.merchantDid) : undefined;
      if (terms === undefined) return;
      session.lastOrder = { lines: terms.lines, deliverTo: terms.order.deliverTo };
      await context.emit(terms.order);
      return;
    }
    case 'request_approval': {
      if (typeof json.approvalId !== 'string') return;
      const urls = json.approveUrls;
      session.approveUrls.set(
        json.approvalId,
        typeof urls === 'object' && urls !== null ? (urls as Partial<Record<Role, string>>) : {},
      );
      await emitApproval(context, json.approvalId);
      return;
    }
    case 'payments__charge_invoice': {
      const { invoiceId, paymentRef, amountCents } = json;
      if (json.status !== 'succeeded' || typeof invoiceId !== 'string' || typeof paymentRef !== 'string') return;
      if (typeof amountCents !== 'number') return;
      session.payments.set(invoiceId, { paymentRef, amountCents });
      await context.emit({ type: 'receipt', invoiceId, paymentRef, amountCents });
      const approvalId = session.invoiceApprovals.get(invoiceId) ?? approvalIdOf(innerArgs);
      if (approvalId !== undefined) await emitApproval(context, approvalId);
      return;
    }
    case 'pizza__fulfill': {
      const { invoiceId, etaMinutes } = json;
      const paid = typeof invoiceId === 'string' ? session.payments.get(invoiceId) : undefined;
      if (typeof invoiceId !== 'string' || paid === undefined || typeof etaMinutes !== 'number') return;
      await context.emit({ type: 'receipt', invoiceId, ...paid, etaMinutes });
      return;
    }
    case 'record_fulfillment':
      if (typeof json.approvalId === 'string') await emitApproval(context, json.approvalId);
      return;
    default:
      return;
  }
}

function approvalIdOf(args: unknown): string | undefined {
  const value = typeof args === 'object' && args !== null ? (args as Record<string, unknown>).approvalId : undefined;
  return typeof value === 'string' ? value : undefined;
}

/** Emits where an approval stands now, read from the household's store, unless that was the last one emitted. */
async function emitApproval(context: TurnContext, approvalId: string): Promise<void> {
  const view = await context.approvals.get(approvalId);
  if (view === undefined) return;
  const state = `${view.status}|${view.approvedRoles.join(',')}`;
  if (context.session.approvalStates.get(approvalId) === state) return;
  context.session.approvalStates.set(approvalId, state);
  context.session.invoiceApprovals.set(view.terms.invoiceId, approvalId);
  await context.emit({
    type: 'approval',
    approvalId,
    invoiceId: view.terms.invoiceId,
    status: view.status,
    requiredRoles: view.requiredRoles,
    approvedRoles: view.approvedRoles,
    approveUrls: context.session.approveUrls.get(approvalId) ?? {},
    ...(view.reason === undefined ? {} : { reason: view.reason }),
    ...(view.allowance === undefined ? {} : { allowance: view.allowance }),
    members: view.members,
    ...(view.handover === undefined ? {} : { handover: view.handover }),
  });
}

/**
 * The approval request a refused charge handed back to the household, if that is why it was not
 * paid: an order approved on the parent's allowance alone that the allowance no longer covers
 * waits for the parent (`structuredContent` `{status: 'pending', approvalId, waitingFor, reason}`).
 * The loop then waits for it as for any pending approval, and pays by reference again once approved.
 */
export function chargeWaitsForApproval(
  outcome: ToolOutcome,
): { readonly approvalId: string; readonly waitingFor: readonly Role[]; readonly reason: string } | undefined {
  const content = outcome.result.structuredContent as
    | { status?: unknown; approvalId?: unknown; waitingFor?: unknown; reason?: unknown }
    | undefined;
  if (!outcome.isError || content?.status !== 'pending' || typeof content.approvalId !== 'string') return undefined;
  const waitingFor = Array.isArray(content.waitingFor)
    ? content.waitingFor.filter((role): role is Role => role === 'child' || role === 'parent')
    : [];
  return {
    approvalId: content.approvalId,
    waitingFor,
    reason: typeof content.reason === 'string' ? content.reason : outcome.text,
  };
}

/** How long one wait lasts before the loop re-reads the request (decisions of another process). */
const rereadMs = 5_000;

/**
 * The loop, not the model, waits for the household's decision (SPEC §8): it wakes on every
 * identity event about this request (a role approving, a decline, expiry), emits an 'approval'
 * event whenever the request changed, and returns once it is decided, in the shape
 * `await_approval` answers. Throws when the turn is aborted.
 */
export async function awaitApproval(context: TurnContext, approvalId: string): Promise<WaitOutcome> {
  let wake = new AbortController();
  // Subscribed before the first read, so a decision between the read and the wait is not missed.
  const unsubscribe = context.events.subscribe((event) => {
    if (event.approvalId === approvalId) wake.abort();
  });
  const onAbort = () => wake.abort();
  context.signal.addEventListener('abort', onAbort);
  try {
    for (;;) {
      context.signal.throwIfAborted();
      wake = new AbortController();
      const view = await context.approvals.get(approvalId);
      if (view === undefined) {
        return {
          status: 'expired',
          approvalId,
          reason: 'the approval request no longer exists; ask for a new invoice',
        };
      }
      await emitApproval(context, approvalId);
      if (view.status !== 'pending') return await context.approvals.wait({ approvalId, timeoutMs: 1 });
      await context.approvals.wait({ approvalId, timeoutMs: rereadMs, signal: wake.signal });
    }
  } finally {
    context.signal.removeEventListener('abort', onAbort);
    unsubscribe();
  }
}
