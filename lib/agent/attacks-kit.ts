import { randomUUID } from 'node:crypto';
import type { ApprovalRecord, ApprovalStore, Role } from '../../identity/index';
import type { Gateway } from '../../proxy/index';
import { invoiceTerms, jsonOf, textOf } from './invoice-terms';
import { type McpSession, openMcpSession } from './mcp-session';
import type { TurnContext } from './tool-runner';
import { callSummary, resultSummary } from './tool-summaries';

/** What the attack console needs besides the turn: the proxy to open fresh sessions on, and the household's approvals. */
export interface AttackOptions {
  /** The embedded proxy: every move runs in a fresh MCP session on it, like any client's. */
  readonly gateway: Gateway;
  /** The household's approval requests: where a move finds the real evidence only a human can make. */
  readonly approvals: Pick<ApprovalStore, 'listRecent'>;
}

/** One step's answer, as the move reads it. */
export interface AttackStep {
  readonly tool: string;
  readonly isError: boolean;
  readonly text: string;
  readonly json: Record<string, unknown> | undefined;
}

/** A refusal as it came back from the proxy, the policy, the household or the shop: their words, not the console's. */
export interface AttackRefusal {
  readonly step: string;
  readonly reason: string;
}

/** How a move ended. */
export type MoveOutcome =
  | { readonly status: 'refused'; readonly refusals: readonly AttackRefusal[] }
  /** The move needs a real artifact only a human can make, and the household has none yet. */
  | { readonly status: 'needs-evidence'; readonly reason: string }
  /** A step that should have been refused went through: shown loudly, never hidden. */
  | { readonly status: 'not-refused'; readonly reason: string };

/** A real approval request of this household, with the terms decoded from its signed invoice. */
export interface RealEvidence {
  readonly record: ApprovalRecord;
  readonly lines: ReadonlyArray<{ readonly sku: string; readonly qty: number; readonly unitPriceCents: number }>;
  readonly deliverTo: string;
}

/** Statuses whose request carries every approval it needed. */
const approvedStatuses: ReadonlySet<ApprovalRecord['status']> = new Set(['approved', 'settled', 'fulfilled']);
/** Statuses of a request the household already paid. */
const paidStatuses: ReadonlySet<ApprovalRecord['status']> = new Set(['settled', 'fulfilled']);
/** How far back a move looks for real evidence. */
const recentLimit = 50;

/**
 * The toolbox a move runs with: one fresh MCP session on the real proxy, opened for this move and
 * named after the chat, whose steps show in the chat as tool rows; the household's real evidence;
 * and a record of every refusal and every charge attempt.
 */
export interface AttackKit {
  /** The chat's last address, or a plausible one: the attacker chooses it. */
  readonly deliverTo: string;
  /** Runs a meta-tool in the move's session (no search first), with its chat rows. */
  meta(tool: 'search_tools' | 'call_tool' | 'load_mcp_server', args: Record<string, unknown>): Promise<AttackStep>;
  /** `call_tool` of `tool` in the move's session, without searching first. */
  call(tool: string, args: Record<string, unknown>): Promise<AttackStep>;
  /** Searches until `tool` is among the results (as a model would), so the discovery gate lets it through. */
  discover(tool: string, query: string): Promise<void>;
  /** Marks a step that must be refused: its refusal is recorded; if it went through, the move is not refused. */
  expectRefused(step: AttackStep, whatWentThrough: string): boolean;
  /** The most recent request this household approved (any status from approved on), optionally needing a role. */
  latestApproved(options?: { readonly role?: Role; readonly paid?: boolean }): Promise<RealEvidence | undefined>;
  /** The outcome so far: refused with every refusal, or the first step that went through. */
  outcome(): MoveOutcome;
  /** Whether any `payments__charge_invoice` step of this move succeeded (it never should). */
  charged(): boolean;
  close(): Promise<void>;
}

/** Opens the move's fresh session (bound to the chat by name) and the kit around it. */
export async function openAttackKit(context: TurnContext, options: AttackOptions, move: string): Promise<AttackKit> {
  // A fresh session: its discovery set is empty whatever the chat's own session has searched.
  const session: McpSession = await openMcpSession(options.gateway, {
    name: `chat-${context.session.sessionId}-attack-${move}`,
    chatSession: context.session.sessionId,
    fresh: true,
    // A move never asks the human for anything: a form would be declined.
    elicit: async () => ({ action: 'decline' }),
  });
  const refusals: AttackRefusal[] = [];
  let wentThrough: string | undefined;
  let charged = false;

  async function meta(tool: string, args: Record<string, unknown>): Promise<AttackStep> {
    const callId = randomUUID();
    const label = tool === 'call_tool' && typeof args.tool_name === 'string' ? args.tool_name.slice(0, 200) : tool;
    await context.emit({ type: 'tool-call', callId, tool: label, summary: callSummary(tool, args) });
    let isError: boolean;
    let text: string;
    let json: Record<string, unknown> | undefined;
    try {
      const result = await session.callTool(tool, args, context.signal);
      isError = result.isError === true;
      text = textOf(result);
      json = jsonOf(result);
    } catch (error) {
      if (context.signal.aborted) throw error;
      isError = true;
      text = `The tool call failed: ${error instanceof Error ? error.message : 'unknown error'}`;
      json = undefined;
    }
    await context.emit({
      type: 'tool-result',
      callId,
      tool: label,
      isError,
      summary: resultSummary({ tool, args, isError, text, json }),
    });
    if (label === 'payments__charge_invoice' && !isError) charged = true;
    return { tool: label, isError, text, json };
  }

  return {
    deliverTo: context.session.lastOrder?.deliverTo ?? '12 Main St',
    meta,
    call: (tool, args) => meta('call_tool', { tool_name: tool, arguments: args }),
    async discover(tool, query) {
      const found = await meta('search_tools', { query, top_k: 10 });
      const names = Array.isArray(found.json?.results)
        ? (found.json.results as { name?: unknown }[]).map((result) => result.name)
        : [];
      if (!names.includes(tool)) await meta('search_tools', { query: tool.replaceAll('_', ' '), top_k: 50 });
    },
    expectRefused(step, whatWentThrough) {
      if (step.isError) {
        refusals.push({ step: step.tool, reason: step.text });
        return true;
      }
      wentThrough ??= whatWentThrough;
      return false;
    },
    async latestApproved(filter = {}) {
      for (const record of await options.approvals.listRecent(recentLimit)) {
        if (!(filter.paid ? paidStatuses : approvedStatuses).has(record.status)) continue;
        if (record.approvals.child === undefined) continue;
        if (filter.role !== undefined && record.approvals[filter.role] === undefined) continue;
        const terms = invoiceTerms(record.invoice, record.merchantDid);
        if (terms === undefined) continue;
        return { record, lines: terms.lines, deliverTo: terms.order.deliverTo };
      }
      return undefined;
    },
    outcome() {
      if (wentThrough !== undefined) return { status: 'not-refused', reason: wentThrough };
      return { status: 'refused', refusals };
    },
    charged: () => charged,
    close: () => session.close(),
  };
}
