import type { CallToolResult } from '@modelcontextprotocol/server';
import { z } from 'zod';
import type { CallContext, LocalTool } from '../proxy/index';
import type { Approvals, RequestOutcome } from './approvals';
import { IdentityError } from './identity-error';

/** Longest `await_approval` wait (SPEC §5.4). */
export const maxWaitSeconds = 120;

const RequestApproval = z.strictObject({
  invoice: z.string().min(1).max(16_384).describe('The merchant-signed invoice (a compact JWS) from request_invoice.'),
});
const AwaitApproval = z.strictObject({
  approvalId: z.uuid().describe('The approvalId request_approval returned.'),
  timeoutSeconds: z
    .number()
    .int()
    .min(1)
    .max(maxWaitSeconds)
    .default(60)
    .describe(`How long to wait for the household's decision, at most ${maxWaitSeconds} s.`),
});
const RecordFulfillment = z.strictObject({
  commitment: z.string().min(1).max(16_384).describe('The merchant-signed commitment (a compact JWS) from fulfill.'),
});

/**
 * The approval local tools of SPEC §5.4 (`request_approval`, `await_approval`,
 * `record_fulfillment`). The proxy searches and calls them through the same pipelines as any
 * tool. None takes a role, a merchant or a passkey: what the model can pass is only signed
 * evidence other parties produced, and ids.
 */
export function approvalTools(approvals: Approvals): LocalTool[] {
  return [
    {
      name: 'request_approval',
      description:
        'Ask the household to approve a merchant-signed invoice before paying it. The family members who must approve it (the child; above $10.00 also the parent) do so in their approval windows. A client that can open URLs (URL elicitation) is sent to those windows, and this call answers once they decided, as await_approval does; otherwise it returns at once with an approvalId and the windows (approveUrls), then call await_approval. Orders above $200.00 cannot be approved.',
      inputSchema: inputSchemaOf(RequestApproval),
      handler: guarded(async (args, context) => {
        const input = parse(RequestApproval, args);
        const outcome = await approvals.request(input.invoice);
        // A retry after the invoice expired finds the request made for it: how that ended is the answer.
        const requested = outcome.ok ? outcome : await approvals.existing(input.invoice);
        const asked = requested === undefined ? undefined : await askInWindows(approvals, requested, context);
        if (asked !== undefined) return asked;
        if (!outcome.ok) return errorResult(`The approval request was refused: ${outcome.reason}.`);
        const { ok: _ok, ...result } = outcome;
        return jsonResult(result);
      }),
    },
    {
      name: 'await_approval',
      description:
        "Wait for the household's decision on an approval request. Returns status approved with the evidence to pay with (invoice, childApproval, parentApproval), or pending (call again), declined or expired (offer to order again).",
      inputSchema: inputSchemaOf(AwaitApproval),
      handler: guarded(async (args, context) => {
        const input = parse(AwaitApproval, args);
        const outcome = await approvals.wait({
          approvalId: input.approvalId,
          timeoutMs: input.timeoutSeconds * 1000,
          ...(context.signal === undefined ? {} : { signal: context.signal }),
        });
        return jsonResult(outcome);
      }),
    },
    {
      name: 'record_fulfillment',
      description:
        "Record the merchant's signed commitment to deliver (from fulfill) against the paid order, completing the order's evidence chain.",
      inputSchema: inputSchemaOf(RecordFulfillment),
      handler: guarded(async (args) => {
        const input = parse(RecordFulfillment, args);
        const outcome = await approvals.recordFulfillment(input.commitment);
        if (!outcome.ok) return errorResult(`The commitment was not recorded: ${outcome.reason}.`);
        return jsonResult({ approvalId: outcome.record.approvalId, status: outcome.record.status });
      }),
    },
  ];
}

/**
 * Asks the household the protocol's way (SPEC §5.4, §3.12): a URL elicitation per role still
 * needed, to that role's approval window for this request, answered once the request is decided:
 * approved → what `await_approval` gives (the evidence); declined or expired → refused with the
 * reason, nothing charged. `undefined` when the client cannot open URLs (or would not): it keeps
 * today's `pending` and `await_approval`. The app's own chat declares forms only, so its turns
 * stay server-side.
 */
async function askInWindows(
  approvals: Approvals,
  requested: Extract<RequestOutcome, { ok: true }>,
  context: CallContext,
): Promise<CallToolResult | undefined> {
  const { approvalId } = requested;
  const view = context.elicit === undefined ? undefined : await approvals.get(approvalId);
  if (context.elicit === undefined || view === undefined) return undefined;
  const order = `${dollars(view.terms.totalCents)} at ${view.terms.merchantName}`;
  const waiting = view.requiredRoles.filter((role) => !view.approvedRoles.includes(role));
  const answer = await context.elicit({
    mode: 'url',
    id: `approval/${approvalId}`,
    pages: Object.fromEntries(
      waiting.map((role) => [
        role,
        {
          message: `The ${role} approves or declines the order of ${order} with their passkey, in their approval window.`,
          url: `${requested.approveUrls[role]}&request=${encodeURIComponent(approvalId)}`,
        },
      ]),
    ),
    // Reads the request only: a long-poll that ends early when a window decides it.
    settled: async ({ timeoutMs, signal }) =>
      (await approvals.wait({ approvalId, timeoutMs, signal })).status !== 'pending',
  });
  if (answer.action !== 'accept') return undefined;
  const decided = await approvals.wait({ approvalId, timeoutMs: 0 });
  if (decided.status === 'approved') return jsonResult(decided);
  if (decided.status === 'pending') return undefined;
  return {
    content: [
      {
        type: 'text',
        text: `Refused: ${decided.reason}. Nothing was charged.`,
      },
    ],
    structuredContent: decided,
    isError: true,
  };
}

function dollars(cents: number): string {
  return `$${(cents / 100).toFixed(2)}`;
}

function inputSchemaOf(schema: z.ZodType): LocalTool['inputSchema'] {
  const { $schema: _draft, ...jsonSchema } = z.toJSONSchema(schema, { io: 'input' });
  return jsonSchema as LocalTool['inputSchema'];
}

/** Bad arguments and unknown ids are the caller's to fix: a clear tool error, never a fault. */
function guarded(handler: LocalTool['handler']): LocalTool['handler'] {
  return async (args, context) => {
    try {
      return await handler(args, context);
    } catch (error) {
      if (error instanceof IdentityError && (error.code === 'bad-request' || error.code === 'not-found')) {
        return errorResult(error.message);
      }
      throw error;
    }
  };
}

function parse<T>(schema: z.ZodType<T>, args: unknown): T {
  const result = schema.safeParse(args);
  if (!result.success) throw new IdentityError('bad-request', z.prettifyError(result.error));
  return result.data;
}

function jsonResult(value: Record<string, unknown>): CallToolResult {
  return { content: [{ type: 'text', text: JSON.stringify(value) }], structuredContent: value };
}

function errorResult(message: string): CallToolResult {
  return { content: [{ type: 'text', text: message }], isError: true };
}
