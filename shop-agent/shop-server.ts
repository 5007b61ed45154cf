import type { CallToolResult } from '@modelcontextprotocol/server';
import { McpServer } from '@modelcontextprotocol/server';
import { z } from 'zod';
import type { Violation } from './policy-floor.js';
import type { Shop, ShopLog, ShopOutcome } from './shop.js';

// Boundary schemas: types and sizes only. Business rules (ranges, menu, prices) are the
// policy floor's job, so a bad quantity comes back as a named violation, not a schema error.
const Sku = z.string().min(1).max(64);
const Quantity = z.number().describe('Whole number from 1 to 20.');
const RequestedItem = z
  .object({
    sku: Sku,
    qty: Quantity,
    unitPriceCents: z.number().optional().describe('Negotiated unit price in cents; defaults to list price.'),
  })
  .strict();

const NegotiateInput = z
  .object({
    message: z.string().max(2000).describe("The customer's request, e.g. asking for a discount."),
    items: z
      .array(z.object({ sku: Sku, qty: Quantity }).strict())
      .max(50)
      .optional(),
  })
  .strict();

const RequestInvoiceInput = z
  .object({
    items: z.array(RequestedItem).max(50),
    deliverTo: z.string().trim().min(1).max(300).describe('Delivery address.'),
    totalCents: z.number().optional().describe('Optional: the total you expect; must equal the sum of the lines.'),
    currency: z.string().max(16).optional().describe('Optional: must be "usd".'),
  })
  .strict();

const FulfillInput = z
  .object({
    receipt: z.string().min(1).max(16_384).describe('The PaymentReceipt JWT-VC from the settlement service.'),
  })
  .strict();

const CancelOrderInput = z
  .object({
    invoiceId: z.string().min(1).max(200).describe('The invoiceId of the order to cancel.'),
    reason: z.string().max(300).optional().describe('Optional: why, in a few words, for the shop.'),
  })
  .strict();

const NoInput = z.object({}).strict();

/** Dependencies of the MCP adapter: the shop and where unexpected faults are logged. */
export type ShopServerOptions = { shop: Shop; log?: ShopLog };

/**
 * The shop's MCP server (SPEC §6): `get_menu`, `negotiate`, `request_invoice`, `fulfill`,
 * `cancel_order`, `merchant_card`. One instance per HTTP request or stdio connection; all instances share the
 * same shop, which keeps every order in its store, so no instance holds state of its own.
 */
export function createShopServer(options: ShopServerOptions): McpServer {
  const { shop } = options;
  const log: ShopLog = options.log ?? (() => {});
  const server = new McpServer(
    { name: 'pizza-shop', version: '0.1.0' },
    {
      instructions:
        'Pizza shop agent. get_menu lists items and prices; negotiate asks the clerk for terms (not binding); ' +
        'request_invoice returns a merchant-signed invoice within the shop policy; after payment, fulfill with ' +
        'the PaymentReceipt returns a signed commitment to deliver; merchant_card returns the DID and key.',
    },
  );

  // The one translator from shop outcomes and faults to MCP tool results.
  const run = async <T>(
    tool: string,
    work: () => Promise<ShopOutcome<T>> | ShopOutcome<T>,
  ): Promise<CallToolResult> => {
    try {
      return toResult(await work());
    } catch (error) {
      // Faults are logged in full for the operator; the caller sees a plain message.
      log('tool-fault', { tool, error: error instanceof Error ? `${error.name}: ${error.message}` : 'unknown' });
      return {
        isError: true,
        content: [
          {
            type: 'text',
            text: `The shop could not complete ${tool} because of an internal error. Nothing was issued; try again later.`,
          },
        ],
      };
    }
  };

  server.registerTool(
    'get_menu',
    {
      description:
        'The menu with list prices (USD cents), the lowest price the shop signs per item, and the order rules.',
      inputSchema: NoInput,
    },
    () => run('get_menu', () => ({ ok: true, value: shop.menu() })),
  );
  server.registerTool(
    'negotiate',
    {
      description:
        'Ask the shop clerk for terms on some items (e.g. a discount). The reply is a proposal, not binding; only request_invoice signs.',
      inputSchema: NegotiateInput,
    },
    (input) => run('negotiate', () => shop.negotiate(input)),
  );
  server.registerTool(
    'request_invoice',
    {
      description:
        'Get a merchant-signed invoice (JWT-VC, valid 5 minutes) for items at list or negotiated prices, delivered to an address.',
      inputSchema: RequestInvoiceInput,
    },
    (input) => run('request_invoice', () => shop.requestInvoice(input)),
  );
  server.registerTool(
    'fulfill',
    {
      description:
        'Ship a paid order: pass the PaymentReceipt JWT-VC; returns a merchant-signed FulfilmentCommitment. Each invoice ships once.',
      inputSchema: FulfillInput,
    },
    (input) => run('fulfill', () => shop.fulfil(input)),
  );
  server.registerTool(
    'cancel_order',
    {
      description:
        'Cancel an order of this shop that is not delivered yet (by its invoiceId). A delivered or already cancelled order is refused with the reason.',
      inputSchema: CancelOrderInput,
    },
    (input) => run('cancel_order', () => shop.cancel(input)),
  );
  server.registerTool(
    'merchant_card',
    { description: "The shop's DID, name and DID document (the key that signs its invoices).", inputSchema: NoInput },
    () => run('merchant_card', () => ({ ok: true, value: shop.card() })),
  );
  return server;
}

function toResult<T>(outcome: ShopOutcome<T>): CallToolResult {
  if (outcome.ok) {
    const value = outcome.value as Record<string, unknown>;
    return { content: [{ type: 'text', text: JSON.stringify(value) }], structuredContent: value };
  }
  const violations: Violation[] = outcome.violations ?? [];
  const lines = violations.map((violation) => `- ${violation.message}`);
  return {
    isError: true,
    content: [{ type: 'text', text: [outcome.reason, ...lines].join('\n') }],
    structuredContent: { error: outcome.reason, violations },
  };
}
