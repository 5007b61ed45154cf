import { scopeDigest } from '../gateway/discovery-scope';
import type { CallContext, CallFilter, CallRequest, CallVerdict } from '../gateway/types';
import { assembleInput, type LookupResolver, stripCredentials } from './fetch-plan';
import { renderDenial, renderMissing } from './guidance';
import type { PolicyBundle } from './load-bundle';
import type { PolicyOutcome } from './policy-engine';

/** One policy decision, for the host's log (never shown to the model raw). */
export interface PolicyDecisionRecord {
  readonly bundle: string;
  /** The call decided on, as the filter saw it (a host relates the decision to its order with it). */
  readonly request: CallRequest;
  readonly tool: string;
  /** The caller's principal id. */
  readonly principal: string;
  /** A digest of the caller's discovery scope, never a raw session id or handle. */
  readonly scope: string;
  readonly decision: 'allow' | 'deny' | 'error';
  readonly failedChecks?: readonly string[];
  /** The fault, when the policy could not be evaluated. */
  readonly error?: unknown;
  readonly detail?: string;
}

/** Options for {@link policyFilter}. */
export interface PolicyFilterOptions {
  readonly bundle: PolicyBundle;
  /** The operator's configuration read by `config` sources (trusted keys, limits, rpId…). */
  readonly config?: Readonly<Record<string, unknown>>;
  readonly resolvers?: Readonly<Record<string, LookupResolver>>;
  /** Milliseconds since the epoch; injectable for tests. */
  readonly now?: () => number;
  /** Receives every decision; errors carry the fault for logs. Must not throw. */
  readonly onDecision?: (record: PolicyDecisionRecord) => void;
}

/** The model-facing text for an evaluation fault: it says the policy could not decide, never why in detail. */
const COULD_NOT_EVALUATE =
  'could not be evaluated, so the call is refused. This is a fault in the evidence or the configuration; retrying the same call will not help.';

/**
 * The policy call filter (SPEC §4.5): assembles the input from the fetch plan, evaluates the
 * bundle, and renders a denial as guidance. On allow the downstream gets the arguments with every
 * credential field stripped. Manifest validation runs after the policy and can only turn an
 * allow into a deny, so it never masks the policy's own reason.
 */
export function policyFilter(options: PolicyFilterOptions): CallFilter {
  const { bundle } = options;
  const now = options.now ?? Date.now;
  const record = (entry: PolicyDecisionRecord): void => {
    try {
      options.onDecision?.(entry);
    } catch {
      // A logging hook must never change a decision.
    }
  };

  return async function policyFilter(request: CallRequest, context: CallContext): Promise<CallVerdict> {
    const base = {
      bundle: bundle.name,
      request,
      tool: request.tool,
      principal: context.principal.id,
      scope: scopeDigest(context.principal, context.scope),
    };
    const title = bundle.guidance.title;
    // 1. Assemble the input from the fetch plan, in order.
    const assembled = await assembleInput(bundle.fetchPlan, {
      request,
      config: options.config ?? {},
      resolvers: options.resolvers ?? {},
      now,
    });
    if (!assembled.ok) {
      if (assembled.kind === 'fault') {
        record({ ...base, decision: 'error', error: assembled.error, detail: `assembling ${assembled.field}` });
        return { decision: 'deny', reason: `${title} ${COULD_NOT_EVALUATE}` };
      }
      // A missing unconditional input is an evaluation error (SPEC §4.1), reported naming the field.
      record({
        ...base,
        decision: assembled.kind === 'missing' ? 'error' : 'deny',
        detail: `${assembled.kind} ${assembled.field}`,
      });
      return { decision: 'deny', reason: renderMissing(bundle.guidance, assembled.field, assembled.kind) };
    }
    const input = assembled.input;
    // 2. Evaluate. The engine never throws; a fault is an `error` outcome.
    const outcome: PolicyOutcome = await bundle.engine.evaluate(input);
    if (outcome.decision === 'error') {
      record({ ...base, decision: 'error', error: outcome.error, detail: `${outcome.code}: ${outcome.message}` });
      return { decision: 'deny', reason: `${title} ${COULD_NOT_EVALUATE}` };
    }
    if (outcome.decision === 'deny') {
      record({ ...base, decision: 'deny', failedChecks: outcome.failedChecks });
      return { decision: 'deny', reason: renderDenial(bundle.guidance, outcome.failedChecks, input) };
    }
    // 3. Allowed: the closed manifest must also accept the whole input (an unbound extra argument fails closed).
    if (!bundle.validateInput(input)) {
      const detail = describeSchemaErrors(bundle.validateInput.errors);
      record({ ...base, decision: 'deny', detail: `manifest: ${detail}` });
      return {
        decision: 'deny',
        reason: `Refused by ${title}: the call does not match what the policy binds (${detail}). Send only the documented arguments.`,
      };
    }
    // 4. Strip every credential field before anything downstream sees the call.
    record({ ...base, decision: 'allow' });
    return {
      decision: 'allow',
      request: { ...request, arguments: stripCredentials(bundle.fetchPlan, request.arguments) },
    };
  };
}

/** Names offending properties (never values) from Ajv errors. */
function describeSchemaErrors(
  errors: readonly { instancePath: string; keyword: string; params: Record<string, unknown> }[] | null | undefined,
): string {
  if (!errors || errors.length === 0) return 'invalid input';
  return errors
    .slice(0, 5)
    .map((error) => {
      const where = error.instancePath.replaceAll('/', '.').replace(/^\./, '') || 'input';
      if (error.keyword === 'additionalProperties')
        return `unexpected \`${String(error.params.additionalProperty)}\` in ${where}`;
      if (error.keyword === 'required') return `missing \`${String(error.params.missingProperty)}\` in ${where}`;
      return `${where} fails ${error.keyword}`;
    })
    .join('; ');
}
