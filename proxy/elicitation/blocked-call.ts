import type { CallToolResult } from '@modelcontextprotocol/server';

/** Why a call was not forwarded (SPEC §3.10). */
export type BlockReason =
  | 'elicitation_disabled'
  | 'elicitation_unsupported'
  | 'elicitation_declined'
  | 'elicitation_cancelled'
  | 'elicitation_failed'
  | 'required_fields_missing_or_empty'
  | 'sensitive_required_field'
  | 'ambiguous_input'
  | 'confirmation_declined'
  | 'confirmation_unavailable';

/** Coarse state for the model: fix the input, stop, or respect the user's answer. */
export type BlockStatus = 'blocked' | 'needs_input' | 'declined' | 'cancelled' | 'failed';

/** The structured result a blocked call returns; field names match `mcp-elicitation-proxy`. */
export interface BlockedCall {
  readonly error: 'tool_call_blocked';
  readonly tool: string;
  readonly status: BlockStatus;
  readonly reason: BlockReason;
  readonly missing_or_ambiguous: readonly string[];
  /** English, written for the model: what happened and what to do next. */
  readonly message: string;
}

/** Options for {@link blockedCallResult}. */
export interface BlockedCallResultOptions {
  /** The tool declares an `outputSchema`: structured content would not match it, so send text only. */
  readonly hasOutputSchema: boolean;
}

/**
 * Renders a blocked call as a tool result with `isError: true`. For a tool with an
 * `outputSchema` the structure goes in the text only, because a TypeScript-SDK client
 * validates `structuredContent` against the tool's output schema even on errors.
 */
export function blockedCallResult(blocked: BlockedCall, options: BlockedCallResultOptions): CallToolResult {
  const text = JSON.stringify(blocked);
  if (options.hasOutputSchema) return { content: [{ type: 'text', text }], isError: true };
  return { content: [{ type: 'text', text }], structuredContent: { ...blocked }, isError: true };
}
