import { type CallToolResult, Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';

/** Any MCP client's `callTool`, as an order's steps use it. */
export type Caller = (name: string, args: Record<string, unknown>) => Promise<CallToolResult>;

/** The queries that find an order's three tools: the invoice, the household's approval, the charge. */
const orderQueries = ['pizza invoice order', 'household approval for an invoice', 'charge invoice payment'];

/** The signed terms of a shop invoice, read from its payload (the test trusts its own shop). */
export interface InvoiceTerms {
  readonly invoice: string;
  readonly invoiceId: string;
  readonly merchantId: string;
  readonly totalCents: number;
}

/**
 * Finds the three tools of an order through `search_tools` (a 2026-07-28 client keeps the handle
 * its first search gave), then calls them through `call_tool` under that handle; `invoice` asks
 * the shop for one item delivered to 12 Main St, `pay` charges an approved request by reference.
 */
export async function orderTools(callTool: Caller) {
  let handle: string | undefined;
  for (const query of orderQueries) {
    const found = await callTool('search_tools', { query, top_k: 10, ...(handle !== undefined && { handle }) });
    handle = (found.structuredContent as { handle?: string } | undefined)?.handle ?? handle;
  }
  const call = (tool: string, args: Record<string, unknown>) =>
    callTool('call_tool', { tool_name: tool, arguments: args, ...(handle !== undefined && { handle }) });
  return {
    handle,
    call,
    /** A signed invoice for `sku`, with what paying it needs; throws with the shop's refusal. */
    async invoice(sku: string): Promise<InvoiceTerms> {
      const answered = await call('pizza__request_invoice', { items: [{ sku, qty: 1 }], deliverTo: '12 Main St' });
      const text = answered.content[0]?.type === 'text' ? answered.content[0].text : '';
      if (answered.isError) throw new Error(`no invoice: ${text}`);
      const issued = JSON.parse(text) as { invoice: string; invoiceId: string };
      const payload = JSON.parse(Buffer.from(issued.invoice.split('.')[1] ?? '', 'base64url').toString('utf8'));
      const subject = payload.vc.credentialSubject as { merchantId: string; totalCents: number };
      return { invoice: issued.invoice, invoiceId: issued.invoiceId, ...subject };
    },
    /** Pays an approved request by reference: the receipt, or the refusal. */
    pay(invoice: InvoiceTerms, approvalId: string) {
      return call('payments__charge_invoice', {
        invoiceId: invoice.invoiceId,
        amountCents: invoice.totalCents,
        merchantId: invoice.merchantId,
        approvalId,
      });
    },
  };
}

/** A tool result of a 2026-07-28 call that may be an input round (`input_required`). */
export type Round = CallToolResult & {
  resultType?: string;
  requestState?: string;
  inputRequests?: Record<string, { params?: { url?: string } }>;
};

/**
 * A v2 client pinned to 2026-07-28 on `url` with a bearer `token`, declaring URL elicitation and
 * fulfilling its input rounds itself (it accepts every URL ask: the test approves in the windows).
 */
export async function connect2026Client(url: string, token: string, name: string): Promise<Client> {
  const client = new Client(
    { name, version: '1.0.0' },
    {
      versionNegotiation: { mode: { pin: '2026-07-28' } },
      capabilities: { elicitation: { url: {} } },
      inputRequired: { autoFulfill: false },
    },
  );
  client.setRequestHandler('elicitation/create', () => ({ action: 'accept' }));
  await client.connect(
    new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { authorization: `Bearer ${token}` } } }),
  );
  return client;
}

/** What a retry after `round` carries: each URL ask accepted, and the round's request state. */
export function retryOf(round: Round | undefined): Record<string, unknown> {
  if (round === undefined) return {};
  return {
    inputResponses: Object.fromEntries(
      Object.keys(round.inputRequests ?? {}).map((key) => [key, { action: 'accept' }]),
    ),
    requestState: round.requestState,
  };
}
