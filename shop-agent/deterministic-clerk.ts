import type { Clerk, ClerkProposal, ClerkRequest } from './clerk.js';

/**
 * The clerk used without an API key and as the fallback on any model error: it quotes list
 * prices and never discounts, so the demo runs offline and predictably.
 */
export function createDeterministicClerk(): Clerk {
  return {
    async propose(request: ClerkRequest): Promise<ClerkProposal> {
      return deterministicProposal(request);
    },
  };
}

/** The list-price proposal for a request (also what the Anthropic clerk falls back to). */
export function deterministicProposal(request: ClerkRequest, fallbackReason?: string): ClerkProposal {
  const reply =
    request.lines.length === 0
      ? 'Tell me what you would like (items and quantities) and I will quote it. Our prices are the menu prices.'
      : `Our price is the menu price: ${request.lines
          .map((line) => `${line.qty} × ${line.name} at $${(line.listPriceCents / 100).toFixed(2)}`)
          .join(', ')}. Call request_invoice with these items to get a signed invoice.`;
  return {
    clerk: 'deterministic',
    reply,
    prices: request.lines.map((line) => ({ sku: line.sku, unitPriceCents: line.listPriceCents })),
    ...(fallbackReason === undefined ? {} : { fallbackReason }),
  };
}
