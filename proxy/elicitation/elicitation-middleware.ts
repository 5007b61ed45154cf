import type {
  ElicitRequestFormParams,
  ElicitResult,
  PrimitiveSchemaDefinition,
  Tool,
} from '@modelcontextprotocol/server';
import { isInputRequired } from '../gateway/input-required';
import type {
  ElicitationPolicy,
  ElicitFieldCopy,
  PrimitiveFieldType,
  ToolPolicy,
} from '../transparent/transparent-config';
import type { BlockedCall, BlockReason, BlockStatus } from './blocked-call';
import { isMissing } from './is-missing';
import { matchSecretMarker } from './match-secret-marker';

/** Asks the human through a form; tied by the caller to the tool call's request id. */
export type Elicit = (params: ElicitRequestFormParams) => Promise<ElicitResult>;

/** A tool call as the middleware sees it. */
export interface ElicitationCall {
  /** The tool name used in messages. */
  readonly tool: string;
  /** The `tools.<name>` key to apply, when it differs from `tool` (search mode's bare name). */
  readonly policyKey?: string;
  /** `undefined` when the client sent no arguments at all. */
  readonly arguments: Readonly<Record<string, unknown>> | undefined;
  readonly inputSchema?: Tool['inputSchema'];
  /**
   * A governing bundle's credential fields: never elicited, never reported missing here. A missing
   * credential reaches the policy and comes back as guidance (SPEC §3.10).
   */
  readonly credentialFields?: readonly string[];
}

/** What to do with the call: forward (with possibly merged arguments) or answer with a blocked result. */
export type ElicitationOutcome =
  | {
      readonly kind: 'forward';
      /** The arguments to forward: the caller's own object when nothing was elicited. */
      readonly arguments: Readonly<Record<string, unknown>> | undefined;
      /** Fields the human supplied through the form (empty when forwarded unchanged). */
      readonly elicited: readonly string[];
    }
  | { readonly kind: 'blocked'; readonly blocked: BlockedCall };

/** The middleware: one call in, one outcome out. `elicit` is absent when the client cannot show forms. */
export type ElicitationMiddleware = (call: ElicitationCall, elicit?: Elicit) => Promise<ElicitationOutcome>;

type JsonObject = Readonly<Record<string, unknown>>;

function asObject(value: unknown): JsonObject | undefined {
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as JsonObject) : undefined;
}

function asString(value: unknown): string | undefined {
  return typeof value === 'string' ? value : undefined;
}

function fieldList(names: readonly string[]): string {
  return names.map((name) => `"${name}"`).join(', ');
}

/** Schema `required` in order (when enabled), then the configured ones appended without duplicates. */
function requiredFields(call: ElicitationCall, policy: ElicitationPolicy, tool: ToolPolicy | undefined): string[] {
  const fields: string[] = [];
  if (policy.policies.schemaRequired.enabled) {
    for (const name of call.inputSchema?.required ?? []) if (!fields.includes(name)) fields.push(name);
  }
  for (const name of tool?.required ?? []) if (!fields.includes(name)) fields.push(name);
  const credentials = new Set(call.credentialFields ?? []);
  return fields.filter((name) => !credentials.has(name));
}

function primitiveType(
  property: JsonObject | undefined,
  copy: ElicitFieldCopy | undefined,
): PrimitiveFieldType | undefined {
  if (copy?.type !== undefined) return copy.type;
  if (property === undefined) return 'string';
  const declared = property.type;
  const candidates = Array.isArray(declared) ? declared : declared === undefined ? [] : [declared];
  for (const candidate of candidates) {
    if (candidate === 'string' || candidate === 'number' || candidate === 'integer' || candidate === 'boolean') {
      return candidate;
    }
  }
  if (candidates.length === 0) {
    // No declared type: a string enum or an untyped field is still a text box.
    const values = property.enum;
    if (Array.isArray(values) && values.every((value) => typeof value === 'string')) return 'string';
    if (values === undefined && property.properties === undefined && property.items === undefined) return 'string';
  }
  return undefined;
}

const FORM_STRING_FORMATS = new Set(['email', 'uri', 'date', 'date-time']);

/** One form field in the restricted primitive schema MCP allows, or `undefined` if the field is not primitive. */
function formField(
  property: JsonObject | undefined,
  copy: ElicitFieldCopy | undefined,
): PrimitiveSchemaDefinition | undefined {
  const type = primitiveType(property, copy);
  if (type === undefined) return undefined;
  const title = copy?.title ?? asString(property?.title);
  const description = copy?.description ?? asString(property?.description);
  const common = { ...(title !== undefined && { title }), ...(description !== undefined && { description }) };
  const number = (key: string) => (typeof property?.[key] === 'number' ? (property[key] as number) : undefined);
  if (type === 'boolean') {
    const fallback = property?.default;
    return { type, ...common, ...(typeof fallback === 'boolean' && { default: fallback }) };
  }
  if (type === 'number' || type === 'integer') {
    const minimum = number('minimum');
    const maximum = number('maximum');
    const fallback = number('default');
    return {
      type,
      ...common,
      ...(minimum !== undefined && { minimum }),
      ...(maximum !== undefined && { maximum }),
      ...(fallback !== undefined && { default: fallback }),
    };
  }
  const values = property?.enum;
  const fallback = asString(property?.default);
  if (Array.isArray(values) && values.length > 0 && values.every((value) => typeof value === 'string')) {
    return { type, ...common, enum: values as string[], ...(fallback !== undefined && { default: fallback }) };
  }
  const format = asString(property?.format);
  const minLength = number('minLength');
  const maxLength = number('maxLength');
  return {
    type,
    ...common,
    ...(minLength !== undefined && { minLength }),
    ...(maxLength !== undefined && { maxLength }),
    ...(format !== undefined && FORM_STRING_FORMATS.has(format) && { format: format as 'email' }),
    ...(fallback !== undefined && { default: fallback }),
  };
}

function isPrimitiveValue(value: unknown): boolean {
  return typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean';
}

function blocked(
  call: ElicitationCall,
  details: { reason: BlockReason; status: BlockStatus; fields: readonly string[]; message: string },
): Extract<ElicitationOutcome, { kind: 'blocked' }> {
  return {
    kind: 'blocked',
    blocked: {
      error: 'tool_call_blocked',
      tool: call.tool,
      status: details.status,
      reason: details.reason,
      missing_or_ambiguous: [...details.fields],
      message: details.message,
    },
  };
}

/**
 * Builds the call-time elicitation middleware of SPEC §3.10, the one implementation behind both
 * the transparent server's `tools/call` and the search-mode `elicitationFilter`. In order: find
 * the missing required fields; refuse to ask for secret-looking ones; ask the human for the rest
 * through one primitive-only form; merge only the requested keys; re-check. Then, as the tool's
 * policy says, clarify a vague value (`ambiguous_if`) and have the person confirm the exact call
 * (`confirm_if`). Forward once.
 */
export function elicitationMiddleware(policy: ElicitationPolicy): ElicitationMiddleware {
  return async function elicitation(call, elicit) {
    const toolPolicy = policy.tools[call.policyKey ?? call.tool];
    const completed = await completeRequired(policy, toolPolicy, call, elicit);
    if (completed.kind === 'blocked' || toolPolicy === undefined) return completed;
    const clarified = toolPolicy.ambiguousIf
      ? await clarify(policy, toolPolicy.ambiguousIf, call, completed, elicit)
      : completed;
    if (clarified.kind === 'blocked' || toolPolicy.confirmIf?.always !== true) return clarified;
    const { passkey } = toolPolicy.confirmIf;
    if (passkey !== undefined) return confirmByPasskey(policy, call, clarified, passkey);
    return confirm(policy, call, clarified, elicit);
  };
}

/** The missing required fields of `call`, asked for through one form; see {@link elicitationMiddleware}. */
async function completeRequired(
  policy: ElicitationPolicy,
  toolPolicy: ToolPolicy | undefined,
  call: ElicitationCall,
  elicit: Elicit | undefined,
): Promise<ElicitationOutcome> {
  const args = call.arguments ?? {};
  const required = requiredFields(call, policy, toolPolicy);
  const missing = required.filter((name) => isMissing(args[name]));
  // Complete input is forwarded unchanged: the very object the client sent.
  if (missing.length === 0) return { kind: 'forward', arguments: call.arguments, elicited: [] };

  const properties = asObject(call.inputSchema?.properties) ?? {};
  const copy = toolPolicy?.elicit?.fields ?? {};

  // Step 1, sensitive check: a secret is never requested through a form, whatever else is missing.
  if (policy.policies.sensitiveRequired.enabled) {
    const secrets = missing.filter((name) => {
      const property = asObject(properties[name]);
      const title = asString(property?.title);
      const description = asString(property?.description);
      const format = asString(property?.format);
      const field = {
        name,
        ...(title !== undefined && { title }),
        ...(description !== undefined && { description }),
        ...(format !== undefined && { format }),
      };
      return matchSecretMarker(field, policy.policies.sensitiveRequired) !== undefined;
    });
    if (secrets.length > 0) {
      return blocked(call, {
        reason: 'sensitive_required_field',
        status: 'blocked',
        fields: secrets,
        message:
          `The call to "${call.tool}" was blocked: the required field(s) ${fieldList(secrets)} look like secrets, ` +
          'and this proxy never asks for secrets through a form. Do not ask the user to type a secret into the chat; ' +
          "the secret belongs in the upstream server's own configuration (for example its environment). " +
          'Call the tool again only with a value the user already provided for this purpose.',
      });
    }
  }

  // Step 2, required check: ask the human, if we may and can.
  if (!policy.elicitation.enabled) {
    return blocked(call, {
      reason: 'elicitation_disabled',
      status: 'needs_input',
      fields: missing,
      message:
        `The call to "${call.tool}" was not made: the required field(s) ${fieldList(missing)} are missing or empty, ` +
        'and asking the user through a form is disabled. Call the tool again with values for these fields ' +
        '(ask the user if you do not know them; do not invent them).',
    });
  }
  if (elicit === undefined) {
    return blocked(call, {
      reason: 'elicitation_unsupported',
      status: 'needs_input',
      fields: missing,
      message:
        `The call to "${call.tool}" was not made: the required field(s) ${fieldList(missing)} are missing or empty, ` +
        'and this client cannot show a form to ask the user. Ask the user for these values, then call the tool ' +
        'again with them (do not invent them).',
    });
  }
  const requestedProperties: Record<string, PrimitiveSchemaDefinition> = {};
  const notPrimitive: string[] = [];
  for (const name of missing) {
    const field = formField(asObject(properties[name]), copy[name]);
    if (field === undefined) notPrimitive.push(name);
    else requestedProperties[name] = field;
  }
  if (notPrimitive.length > 0) {
    return blocked(call, {
      reason: 'required_fields_missing_or_empty',
      status: 'needs_input',
      fields: missing,
      message:
        `The call to "${call.tool}" was not made: the required field(s) ${fieldList(missing)} are missing or empty, ` +
        `and ${fieldList(notPrimitive)} cannot be asked for in a form (only text, numbers and yes/no can). ` +
        'Call the tool again with values for all of these fields.',
    });
  }

  const asked = await ask(
    call,
    elicit,
    {
      mode: 'form',
      message:
        toolPolicy?.elicit?.message ??
        `The tool "${call.tool}" needs more information before it can run: ${missing.join(', ')}.`,
      requestedSchema: { type: 'object', properties: requestedProperties, required: [...missing] },
    },
    { fields: missing, what: `for ${fieldList(missing)}` },
  );
  if (!('answer' in asked)) return asked;
  const { answer } = asked;
  if (answer.action === 'decline') {
    return blocked(call, {
      reason: 'elicitation_declined',
      status: 'declined',
      fields: missing,
      message:
        `The user declined to provide ${fieldList(missing)}, so "${call.tool}" was not called. ` +
        'Respect that: do not retry with invented values; ask the user how they want to proceed.',
    });
  }
  if (answer.action === 'cancel') {
    return blocked(call, {
      reason: 'elicitation_cancelled',
      status: 'cancelled',
      fields: missing,
      message:
        `The user dismissed the form asking for ${fieldList(missing)}, so "${call.tool}" was not called. ` +
        'Ask the user whether they still want to do this before trying again.',
    });
  }

  // Merge only the keys we asked for; anything else in the answer is ignored.
  const content = answer.content ?? {};
  const merged: Record<string, unknown> = { ...args };
  const elicited: string[] = [];
  for (const name of missing) {
    const value = content[name];
    if (isPrimitiveValue(value) && !isMissing(value)) {
      merged[name] = value;
      elicited.push(name);
    }
  }
  // Re-check: the form must have filled every missing field.
  const stillMissing = required.filter((name) => isMissing(merged[name]));
  if (stillMissing.length > 0) {
    return blocked(call, {
      reason: 'required_fields_missing_or_empty',
      status: 'needs_input',
      fields: stillMissing,
      message:
        `The call to "${call.tool}" was not made: the required field(s) ${fieldList(stillMissing)} are still ` +
        'missing or empty after asking the user. Ask the user for these values, then call the tool again with them.',
    });
  }
  return { kind: 'forward', arguments: merged, elicited };
}

/** Asks through `elicit`; a failure (other than a held input round) is the call's `elicitation_failed`. */
async function ask(
  call: ElicitationCall,
  elicit: Elicit,
  params: ElicitRequestFormParams,
  about: { readonly fields: readonly string[]; readonly what: string },
): Promise<{ readonly answer: ElicitResult } | Extract<ElicitationOutcome, { kind: 'blocked' }>> {
  try {
    return { answer: await elicit(params) };
  } catch (error) {
    if (isInputRequired(error)) throw error;
    return blocked(call, {
      reason: 'elicitation_failed',
      status: 'failed',
      fields: about.fields,
      message:
        `The call to "${call.tool}" was not made: asking the user ${about.what} failed ` +
        `(${error instanceof Error ? error.message : 'unknown error'}). Ask the user in the conversation instead, ` +
        'then call the tool again with what they say.',
    });
  }
}

/** A value too vague for `rule`: a string shorter than its minimum (trimmed), or exactly a generic term. */
function isVague(value: unknown, rule: NonNullable<ToolPolicy['ambiguousIf']>): boolean {
  if (typeof value !== 'string') return false;
  const trimmed = value.trim();
  if (rule.queryMinLength !== undefined && trimmed.length < rule.queryMinLength) return true;
  return rule.genericTerms.some((term) => term.trim().toLowerCase() === trimmed.toLowerCase());
}

/** `ambiguous_if`: a vague value of the rule's field is clarified by the person before forwarding. */
async function clarify(
  policy: ElicitationPolicy,
  rule: NonNullable<ToolPolicy['ambiguousIf']>,
  call: ElicitationCall,
  completed: Extract<ElicitationOutcome, { kind: 'forward' }>,
  elicit: Elicit | undefined,
): Promise<ElicitationOutcome> {
  const args = completed.arguments ?? {};
  const { field } = rule;
  if (!isVague(args[field], rule)) return completed;
  const vague = (value: unknown) =>
    blocked(call, {
      reason: 'ambiguous_input',
      status: 'needs_input',
      fields: [field],
      message:
        `The call to "${call.tool}" was not made: ${shown(value)} is too vague for "${field}". ` +
        'Ask the user what exactly they mean, then call the tool again with a more specific value (do not guess).',
    });
  if (!policy.elicitation.enabled || elicit === undefined) return vague(args[field]);
  const asked = await ask(
    call,
    elicit,
    {
      mode: 'form',
      message: `"${call.tool}" needs a more specific ${field} than ${shown(args[field])}. What exactly do you mean?`,
      requestedSchema: {
        type: 'object',
        properties: {
          [field]: {
            type: 'string',
            title: field,
            ...(rule.queryMinLength !== undefined && { minLength: rule.queryMinLength }),
          },
        },
        required: [field],
      },
    },
    { fields: [field], what: `to clarify "${field}"` },
  );
  if (!('answer' in asked)) return asked;
  if (asked.answer.action !== 'accept') {
    const declined = asked.answer.action === 'decline';
    return blocked(call, {
      reason: declined ? 'elicitation_declined' : 'elicitation_cancelled',
      status: declined ? 'declined' : 'cancelled',
      fields: [field],
      message:
        `The user ${declined ? 'declined to clarify' : 'dismissed the question about'} "${field}", so "${call.tool}" was not called. ` +
        'Ask the user how they want to proceed; do not retry with a guessed value.',
    });
  }
  const value = asked.answer.content?.[field];
  if (typeof value !== 'string' || isMissing(value) || isVague(value, rule)) return vague(value);
  return {
    kind: 'forward',
    arguments: { ...args, [field]: value },
    elicited: [...new Set([...completed.elicited, field])],
  };
}

/**
 * Characters a person would not see as they are (controls, bidirectional and other format
 * characters, line and paragraph separators), shown as escapes.
 */
const hiddenCharacter = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]/gu;

/** A value as the person reads it: JSON, every hidden character escaped, so what is shown is what runs. */
function shown(value: unknown): string {
  return (JSON.stringify(value) ?? 'nothing').replace(
    hiddenCharacter,
    (character) => `\\u${(character.codePointAt(0) ?? 0).toString(16).toUpperCase().padStart(4, '0')}`,
  );
}

/**
 * `confirm_if: {always: true, passkey: [roles]}`: the confirmation is those roles' passkeys over the
 * exact call, in the household's approval windows (`approval_required`), never a form. Where the
 * host enforces it the call goes on to that filter; anywhere else it is refused (fail closed).
 */
function confirmByPasskey(
  policy: ElicitationPolicy,
  call: ElicitationCall,
  completed: Extract<ElicitationOutcome, { kind: 'forward' }>,
  roles: readonly string[],
): ElicitationOutcome {
  if (policy.passkeyConfirmations === 'approval-required') return completed;
  return blocked(call, {
    reason: 'confirmation_unavailable',
    status: 'blocked',
    fields: [],
    message:
      `"${call.tool}" runs only after the ${roles.join(' and ')} confirms the exact call with a passkey in the household's approval window, ` +
      'and this proxy has no approval windows, so it was not called. Tell the user; do not try to reach the same effect another way.',
  });
}

/**
 * `confirm_if: {always: true}`: the person confirms, through a form, exactly the call that will be
 * forwarded (tool and every argument). Only an explicit yes forwards it; a decline, a cancel, an
 * unticked box, or a client that cannot show the form forwards nothing.
 */
async function confirm(
  policy: ElicitationPolicy,
  call: ElicitationCall,
  completed: Extract<ElicitationOutcome, { kind: 'forward' }>,
  elicit: Elicit | undefined,
): Promise<ElicitationOutcome> {
  if (!policy.elicitation.enabled || elicit === undefined) {
    return blocked(call, {
      reason: 'confirmation_unavailable',
      status: 'blocked',
      fields: [],
      message:
        `"${call.tool}" runs only after the user confirms the exact call, and ${policy.elicitation.enabled ? 'this client cannot show a confirmation form' : 'asking the user through a form is disabled'}, ` +
        'so it was not called. Tell the user; do not try to reach the same effect another way.',
    });
  }
  const args = completed.arguments ?? {};
  const entered = new Set(completed.elicited);
  const lines = Object.entries(args).map(
    ([name, value]) => `  ${shown(name)}: ${shown(value)}${entered.has(name) ? ' (entered by you)' : ''}`,
  );
  const asked = await ask(
    call,
    elicit,
    {
      mode: 'form',
      message: [
        `Confirm before it runs: the agent asks to call ${shown(call.tool)}`,
        lines.length > 0 ? `with these arguments (requested by the agent):\n${lines.join('\n')}` : 'with no arguments.',
      ].join(' '),
      requestedSchema: {
        type: 'object',
        properties: {
          confirm: {
            type: 'boolean',
            title: 'Run exactly this call',
            description: 'Only a yes runs it; anything else runs nothing.',
            default: false,
          },
        },
        required: ['confirm'],
      },
    },
    { fields: [], what: 'to confirm the call' },
  );
  if (!('answer' in asked)) return asked;
  const { answer } = asked;
  if (answer.action === 'accept' && answer.content?.confirm === true) return completed;
  return blocked(call, {
    reason: 'confirmation_declined',
    status: answer.action === 'cancel' ? 'cancelled' : 'declined',
    fields: [],
    message:
      `The user did not confirm the call to "${call.tool}", so it was not made. ` +
      'Respect that: do not retry it or reach the same effect another way; ask the user how they want to proceed.',
  });
}
