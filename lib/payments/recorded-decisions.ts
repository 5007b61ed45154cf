import {
  type CallFilter,
  type CallRequest,
  type CallVerdict,
  type DispatchOutcome,
  type PolicyDecisionRecord,
  scopeDigest,
} from '../../proxy/index';
import type { EventBus } from '../events';

/** The two governed stages of `charge_invoice`, each wrapped to report what it decided. */
export interface DecisionRecorder {
  /** Wraps the policy filter: one `policy-decision` event per evaluation, with the guidance on a deny. */
  policy(filter: CallFilter): CallFilter;
  /** The policy filter's `onDecision` hook: which checks failed, for the event of that call. */
  onPolicyDecision(record: PolicyDecisionRecord): void;
  /** Wraps the single-use filter: evidence held, spent, released, left in doubt, or refused. */
  singleUse(filter: CallFilter): CallFilter;
}

/**
 * Reports the payment decisions (SPEC §8 live log) as household events with the session and the
 * order they concern: the policy's allow or deny with its guidance, and what happened to the
 * evidence. The pipeline reports each filter too; these events say what the decision *meant*.
 * Wrapped filters keep their verdicts untouched, and keep the names logs know them by.
 */
export function recordDecisions(options: {
  readonly events: EventBus;
  readonly policyTitle: string;
}): DecisionRecorder {
  const { events, policyTitle } = options;
  // Which calls the policy itself refused, so a refusal passed out through single-use is reported once.
  const policyDenied = new WeakSet<CallRequest>();
  // The checks the policy reported as failed, by the call they were about.
  const failedChecks = new WeakMap<CallRequest, readonly string[]>();
  const facts = (request: CallRequest, session: string) => {
    const orderId = request.arguments.invoiceId;
    return {
      source: 'proxy' as const,
      session,
      ...(typeof orderId === 'string' && orderId.length <= 200 ? { orderId } : {}),
    };
  };
  const amount = (request: CallRequest) => {
    const cents = request.arguments.amountCents;
    return typeof cents === 'number' && Number.isSafeInteger(cents) ? ` for $${(cents / 100).toFixed(2)}` : '';
  };

  return {
    onPolicyDecision(record) {
      if (record.failedChecks !== undefined) failedChecks.set(record.request, record.failedChecks);
    },

    policy(filter) {
      return async function policyFilter(request, context) {
        let verdict: CallVerdict;
        try {
          verdict = await filter(request, context);
        } catch (error) {
          events.emit({
            ...facts(request, scopeDigest(context.principal, context.scope)),
            kind: 'policy-decision',
            outcome: 'error',
            message: `${policyTitle} could not evaluate ${request.tool}, so it is refused (fail closed)`,
            data: { tool: request.tool },
          });
          throw error;
        }
        if (verdict.decision === 'deny') policyDenied.add(request);
        // Recorded, not just emitted: the row is committed before the verdict leaves; a decision the
        // audit table cannot take rejects here, and the
        // pipeline refuses the call (fail closed) — no charge happens off the record.
        await events.record({
          ...facts(request, scopeDigest(context.principal, context.scope)),
          kind: 'policy-decision',
          outcome: verdict.decision,
          message:
            verdict.decision === 'allow'
              ? `${policyTitle} allowed ${request.tool}${amount(request)}: every signature and binding checked`
              : verdict.reason,
          data: {
            tool: request.tool,
            policy: policyTitle,
            ...(verdict.decision === 'deny' ? { failedChecks: [...(failedChecks.get(request) ?? [])] } : {}),
          },
        });
        return verdict;
      };
    },

    singleUse(filter) {
      return async function singleUse(request, context) {
        const verdict = await filter(request, context);
        const base = facts(request, scopeDigest(context.principal, context.scope));
        if (verdict.decision === 'deny') {
          if (!policyDenied.has(request)) {
            events.emit({
              ...base,
              kind: verdict.result === undefined ? 'evidence-refused' : 'evidence-replayed',
              outcome: verdict.result === undefined ? 'deny' : 'info',
              message:
                verdict.result === undefined
                  ? verdict.reason
                  : 'the same evidence and arguments again: the first result is returned, nothing is charged twice',
              data: { tool: request.tool },
            });
          }
          return verdict;
        }
        const { wrap } = verdict;
        if (wrap === undefined) return verdict;
        events.emit({
          ...base,
          kind: 'evidence-held',
          outcome: 'info',
          message: `the evidence for ${request.tool} is held for this call only`,
        });
        return {
          ...verdict,
          wrap: async (dispatch) => {
            const outcome = await wrap(dispatch);
            events.emit({ ...base, ...spendEvent(outcome) });
            return outcome;
          },
        };
      };
    },
  };
}

/** What single-use did with the held evidence, from how the call ended (SPEC §4.7). */
function spendEvent(outcome: DispatchOutcome) {
  if (outcome.status === 'completed' && outcome.result.isError !== true) {
    return { kind: 'evidence-spent', outcome: 'ok' as const, message: 'the evidence is spent: it can never pay again' };
  }
  if (outcome.status === 'unknown') {
    return {
      kind: 'evidence-in-doubt',
      outcome: 'error' as const,
      message: `the outcome is unknown (${outcome.reason}): the evidence stays held until settlement resolves it`,
    };
  }
  return {
    kind: 'evidence-released',
    outcome: 'info' as const,
    message: 'the call failed, so nothing was spent: the approval may be retried',
  };
}
