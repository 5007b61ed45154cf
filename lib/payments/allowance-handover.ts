import type { CallFilter } from '../../proxy/index';
import { settlementResult } from './payments-server';
import type { Settlement } from './settlement';

/**
 * Hands an order the parent's standing allowance no longer covers to the parent, before the
 * policy decides its charge (docs/human-authority.md, "An order the allowance no longer covers").
 * An order the household approved on the allowance alone whose allowance was revoked, or whose
 * period's budget other orders spent, would be refused by `family-spend` on the child's approval
 * alone, and its approval request, already approved, would never reach the parent's window. This
 * call filter, ahead of evidence by reference, single-use and the policy, asks settlement to hand
 * the same request to the parent and answers the charge with the request pending again (nothing
 * reserved, nothing charged); every other charge goes on to the policy and the hold, which hands
 * over an order a racing charge left uncovered. For the `payments` server's `charge_invoice` only.
 */
export function allowanceHandover(options: { readonly settlement: Pick<Settlement, 'handOverUncovered'> }): CallFilter {
  return async function allowanceHandover(request) {
    if (request.server?.name !== 'payments' || request.toolName !== 'charge_invoice') return { decision: 'allow' };
    const { invoiceId } = request.arguments;
    if (typeof invoiceId !== 'string') return { decision: 'allow' };
    const outcome = await options.settlement.handOverUncovered(invoiceId);
    if (outcome === undefined) return { decision: 'allow' };
    // The answer is the charge's own (`waiting`, or a refusal), so a caller reads it as it would the charge's.
    const result = settlementResult(outcome);
    const text = result.content.find((block) => block.type === 'text');
    return { decision: 'deny', reason: text?.type === 'text' ? text.text : outcome.status, result };
  };
}
