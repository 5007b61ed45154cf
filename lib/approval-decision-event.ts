import type { ApprovalDecisionRecord } from '../proxy/index';
import type { HouseholdEvent } from './events';

/**
 * An `approval_required` decision as the audit chain keeps it (docs/human-authority.md): which
 * call (tool and call hash), the request, and on allow the ids of the approvals it spent, so an
 * auditor can tie the forwarded call to the passkey yes that let it through.
 */
export function approvalDecisionEvent(decision: ApprovalDecisionRecord): Omit<HouseholdEvent, 'at'> {
  const outcome = decision.decision === 'ask' ? 'info' : decision.decision;
  const words =
    decision.decision === 'allow'
      ? `forwarded once, with approval ${decision.approvalIds?.join(', ') ?? ''}`
      : decision.decision === 'ask'
        ? 'waits for approval'
        : `refused: ${decision.reason ?? ''}`;
  return {
    source: 'proxy',
    kind: 'approval-decision',
    outcome,
    message: `approval_required ${decision.tool}: ${words}`.slice(0, 2000),
    ...(decision.requestId === undefined ? {} : { approvalId: decision.requestId.slice(0, 200) }),
    data: {
      tool: decision.tool.slice(0, 2000),
      principal: decision.principal.slice(0, 2000),
      ...(decision.callHash === undefined ? {} : { callHash: decision.callHash }),
      ...(decision.approvalIds === undefined
        ? {}
        : { approvalIds: decision.approvalIds.map((id) => id.slice(0, 200)) }),
    },
  };
}
