import type { CallToolResult } from '@modelcontextprotocol/server';
import { McpServer } from '@modelcontextprotocol/server';
import { z } from 'zod';
import { outcomeMetaKey } from '../../proxy/index';
import type { Settlement, SettlementOutcome } from './settlement';

/** The arguments `charge_invoice` binds (SPEC §7); the evidence arrives as credential fields the proxy strips. */
export const chargeInvoiceArguments = z.object({
  invoiceId: z.string().min(1).max(200).describe('The invoice id (its jti, urn:uuid:…) from the signed invoice.'),
  amountCents: z.number().int().positive().describe('The invoice total in cents, exactly as signed.'),
  merchantId: z.string().min(1).max(200).describe("The merchant's DID, exactly as signed."),
  approvalId: z
    .string()
    .max(200)
    .optional()
    .describe(
      'The approvalId await_approval returned approved: the household then supplies the invoice and approvals itself, so they need not be copied.',
    ),
});

/**
 * The household's `payments` MCP server, an in-process downstream of the proxy: `charge_invoice`
 * reaches settlement only through the proxy's pipeline, where the `family-spend` policy and
 * single-use evidence decide first (SPEC §7).
 */
export function createPaymentsServer(settlement: Settlement): McpServer {
  const server = new McpServer(
    { name: 'payments', version: '0.1.0' },
    { instructions: 'Household payments. charge_invoice pays a merchant-signed invoice the household approved.' },
  );
  server.registerTool(
    'charge_invoice',
    {
      description:
        'Pay a merchant-signed invoice the household approved, on the household payment rail. Returns a signed PaymentReceipt to give the merchant (fulfill).',
      inputSchema: chargeInvoiceArguments,
    },
    async ({ invoiceId, amountCents, merchantId }) =>
      settlementResult(await settlement.charge({ invoiceId, amountCents, merchantId })),
  );
  return server;
}

/**
 * The one translator from a settlement outcome to a tool result: a receipt; a refusal or decline a
 * model can act on; or an unknown outcome marked so the proxy keeps the evidence held.
 */
export function settlementResult(outcome: SettlementOutcome): CallToolResult {
  switch (outcome.status) {
    case 'succeeded': {
      const { status, invoiceId, paymentRef, amountCents, receipt } = outcome;
      const value = { status, invoiceId, paymentRef, amountCents, receipt };
      return {
        content: [
          {
            type: 'text',
            text: JSON.stringify({ ...value, next: 'Give the receipt to the merchant: fulfill {receipt}.' }),
          },
        ],
        structuredContent: value,
      };
    }
    case 'declined':
      return {
        content: [
          {
            type: 'text',
            text: `The payment was declined: ${outcome.reason}. The approval is unspent: the same evidence can be used again.`,
          },
        ],
        isError: true,
      };
    case 'refused':
      return { content: [{ type: 'text', text: `The payment was refused: ${outcome.reason}.` }], isError: true };
    case 'waiting': {
      // Not charged, and not over: the same request waits for the parent, as any pending approval does.
      const { approvalId, waitingFor, reason } = outcome;
      const who = waitingFor.map((role) => `the ${role}'s passkey in the ${role} window`).join(' and ');
      return {
        content: [
          {
            type: 'text',
            text: `The payment was not made: ${reason}. Approval request ${approvalId} is pending again, waiting for ${who}: wait for the decision (await_approval, or request_approval again with the same invoice), then pay by reference again with the same approvalId.`,
          },
        ],
        structuredContent: { status: 'pending', approvalId, waitingFor: [...waitingFor], reason },
        isError: true,
      };
    }
    case 'unknown':
      return {
        content: [{ type: 'text', text: outcome.reason }],
        isError: true,
        _meta: { [outcomeMetaKey]: 'unknown' },
      };
  }
}
