import type { ApprovalRule } from '../filters/approval-required';
import type { CallFilter } from '../gateway/types';
import { DEFAULT_SECRET_MARKERS, type ElicitationPolicy, type ToolPolicy } from '../transparent/transparent-config';
import { blockedCallResult } from './blocked-call';
import { elicitationMiddleware } from './elicitation-middleware';

/** Options for {@link elicitationFilter}; everything defaults as in the YAML config. A `TransparentConfig` fits too. */
export interface ElicitationFilterOptions {
  readonly elicitation?: Partial<Pick<ElicitationPolicy['elicitation'], 'enabled'>>;
  readonly policies?: {
    readonly schemaRequired?: { readonly enabled: boolean };
    readonly sensitiveRequired?: Partial<ElicitationPolicy['policies']['sensitiveRequired']>;
  };
  /** Per-tool policy, keyed by qualified name (`pizza__order`) or bare tool name (`order`). */
  readonly tools?: Readonly<Record<string, ToolPolicy>>;
  /** Set only where the `approval_required` filter enforces `confirm_if.passkey` ({@link passkeyConfirmationRules}). */
  readonly passkeyConfirmations?: 'approval-required';
}

/** Fills an {@link ElicitationPolicy} from partial options with the YAML defaults. */
export function resolveElicitationPolicy(options: ElicitationFilterOptions): ElicitationPolicy {
  const sensitive = options.policies?.sensitiveRequired;
  return {
    // In search mode the proxy owns the form's timeout (`CallContext.elicit`); this value is unused there.
    elicitation: {
      enabled: options.elicitation?.enabled ?? true,
      fallbackOnUnsupported: 'structured_error',
      timeoutMs: 600_000,
    },
    policies: {
      schemaRequired: { enabled: options.policies?.schemaRequired?.enabled ?? true },
      sensitiveRequired: {
        enabled: sensitive?.enabled ?? true,
        nameMarkers: sensitive?.nameMarkers ?? DEFAULT_SECRET_MARKERS,
        schemaMarkers: sensitive?.schemaMarkers ?? DEFAULT_SECRET_MARKERS,
      },
    },
    tools: options.tools ?? {},
    ...(options.passkeyConfirmations !== undefined && { passkeyConfirmations: options.passkeyConfirmations }),
  };
}

/**
 * The `approval_required` rules that enforce the tools' `confirm_if.passkey` (docs/human-authority.md):
 * one rule per such tool, by the name it is keyed by, for the roles it names. A host that passes
 * `passkeyConfirmations: 'approval-required'` to {@link elicitationFilter} must gate with these.
 */
export function passkeyConfirmationRules(tools: Readonly<Record<string, ToolPolicy>>): ApprovalRule[] {
  return Object.entries(tools).flatMap(([tool, policy]) =>
    policy.confirmIf?.always === true && policy.confirmIf.passkey !== undefined
      ? [{ tool, roles: policy.confirmIf.passkey }]
      : [],
  );
}

/**
 * The elicitation middleware as a search-mode call filter (SPEC §3.10): a call missing required
 * fields asks the human through `context.elicit` and is allowed with the merged arguments, or is
 * denied with the structured result (JSON, including an English message the model can act on).
 */
export function elicitationFilter(options: ElicitationFilterOptions = {}): CallFilter {
  const policy = resolveElicitationPolicy(options);
  const middleware = elicitationMiddleware(policy);
  return async function elicitation(request, context) {
    // Per-tool policy by qualified name first, then by the downstream's own tool name.
    const bare = request.toolName;
    const policyKey = policy.tools[request.tool] === undefined && bare !== undefined ? bare : request.tool;
    const outcome = await middleware(
      {
        tool: request.tool,
        policyKey,
        arguments: request.arguments,
        credentialFields: request.credentialFields,
        ...(request.inputSchema !== undefined && { inputSchema: request.inputSchema }),
      },
      context.elicit,
    );
    if (outcome.kind === 'blocked') {
      return {
        decision: 'deny',
        reason: JSON.stringify(outcome.blocked),
        result: blockedCallResult(outcome.blocked, { hasOutputSchema: request.hasOutputSchema }),
      };
    }
    if (outcome.elicited.length === 0) return { decision: 'allow' };
    return { decision: 'allow', request: { ...request, arguments: outcome.arguments ?? {} } };
  };
}
