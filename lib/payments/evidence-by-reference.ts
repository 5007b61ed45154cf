import type { IdentityStore } from '../../identity/index';
import type { CallFilter } from '../../proxy/index';

/** The evidence fields of `charge_invoice` (the `family-spend` bundle's credential fields). */
const evidenceFields = ['invoice', 'childApproval', 'parentApproval'] as const;

/**
 * Lets the model pay by reference (`approvalId`) instead of copying kilobytes of JWS: this call
 * filter, ahead of single-use and the policy, replaces the id with the invoice and approvals the
 * household stored for that request. The policy then verifies them exactly as if they were inline.
 * It reads only the household's store, for the `payments` server's `charge_invoice` only.
 */
export function evidenceByReference(options: { readonly store: Pick<IdentityStore, 'approvals'> }): CallFilter {
  return async function evidenceByReference(request) {
    if (request.server?.name !== 'payments' || request.toolName !== 'charge_invoice') return { decision: 'allow' };
    const { approvalId, ...rest } = request.arguments;
    if (approvalId === undefined) return { decision: 'allow' };
    // 1. One way or the other: inline evidence beside a reference would leave two truths.
    if (evidenceFields.some((field) => rest[field] !== undefined)) {
      return {
        decision: 'deny',
        reason: 'Pass either approvalId or the evidence (invoice, childApproval, parentApproval), not both.',
      };
    }
    // 2. A request the household approved; its stored evidence replaces the reference.
    const record = typeof approvalId === 'string' ? await options.store.approvals.get(approvalId) : undefined;
    if (!record)
      return { decision: 'deny', reason: `There is no approval request ${String(approvalId).slice(0, 100)}.` };
    const { child, parent } = record.approvals;
    if (child === undefined || !['approved', 'settled', 'fulfilled'].includes(record.status)) {
      return {
        decision: 'deny',
        reason: `Approval request ${record.approvalId} is ${record.status}, not approved: call await_approval until it is.`,
      };
    }
    return {
      decision: 'allow',
      request: {
        ...request,
        arguments: {
          ...rest,
          invoice: record.invoice,
          childApproval: child,
          ...(parent === undefined ? {} : { parentApproval: parent }),
        },
      },
    };
  };
}
