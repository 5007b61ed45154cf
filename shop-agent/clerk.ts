import type { InvoiceLine } from './policy-floor.js';

/** What the clerk is asked: the customer's words and the (floor-checked) lines at list price. */
export type ClerkRequest = { message: string; lines: readonly InvoiceLine[] };

/** The clerk's proposal: a reply and a unit price per sku. It binds nothing (SPEC §6). */
export type ClerkProposal = {
  clerk: 'anthropic' | 'deterministic';
  reply: string;
  prices: { sku: string; unitPriceCents: number }[];
  fallbackReason?: string;
};

/**
 * The clerk proposes terms in conversation. Whatever it says, only the policy floor decides what
 * is signed, so a clerk that is prompt-injected can at worst propose something the floor clamps.
 */
export interface Clerk {
  propose(request: ClerkRequest): Promise<ClerkProposal>;
}
