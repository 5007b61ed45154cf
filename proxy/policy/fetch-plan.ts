import type { Ajv, ValidateFunction } from 'ajv';
import { z } from 'zod';
import { ProxyError } from '../errors';
import type { CallRequest } from '../gateway/types';

const fieldName = z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'a plain identifier');

const sourceSchema = z.discriminatedUnion('kind', [
  /** From the call: `tool`, `arguments` (minus credential fields), or `arguments.<name>` (a credential field). */
  z
    .object({
      kind: z.literal('call'),
      params: z.object({ path: z.string().regex(/^(tool|arguments|arguments\.[A-Za-z_][A-Za-z0-9_]*)$/) }).strict(),
    })
    .strict(),
  /** From the operator's bundle configuration, by dotted path. */
  z.object({ kind: z.literal('config'), params: z.object({ key: z.string().min(1) }).strict() }).strict(),
  /** The host clock. */
  z
    .object({
      kind: z.literal('clock'),
      params: z
        .object({ unit: z.enum(['seconds', 'milliseconds']) })
        .strict()
        .optional(),
    })
    .strict(),
  /** An async resolver supplied by the host (membership by DID, passkey enrollment by credential id, …). */
  z
    .object({
      kind: z.literal('lookup'),
      params: z.object({ resolver: z.string().min(1), args: z.record(z.string(), z.unknown()).optional() }).strict(),
    })
    .strict(),
]);

const entrySchema = z
  .object({
    field: fieldName,
    source: sourceSchema,
    /** JSON Schema the assembled value must satisfy. */
    schema: z.record(z.string(), z.unknown()),
    /** `{always: false}` marks a conditional credential: omitted when absent. Default: always required. */
    guard: z.object({ always: z.boolean() }).strict().optional(),
  })
  .strict();

/** `fetchplan.json` (SPEC §4.4). */
export const fetchPlanSchema = z.object({ entries: z.array(entrySchema).min(1) }).strict();

/** A validated fetch plan entry. */
export type FetchPlanEntry = z.infer<typeof entrySchema>;

/** An async resolver the host supplies for `lookup` sources; `undefined` means "not found". */
export type LookupResolver = (args: Readonly<Record<string, unknown>>) => Promise<unknown> | unknown;

/** A fetch plan compiled once at bundle load: entries plus their schema validators. */
export interface FetchPlan {
  readonly entries: readonly FetchPlanEntry[];
  /** Call-sourced fields other than `tool` and `arguments`: the credentials stripped before the downstream. */
  readonly credentialFields: readonly string[];
  readonly validators: ReadonlyMap<string, ValidateFunction>;
}

/** What assembly produced: the input, or which field stopped it and how. */
export type AssemblyResult =
  | { readonly ok: true; readonly input: Record<string, unknown> }
  | { readonly ok: false; readonly kind: 'missing' | 'invalid'; readonly field: string }
  | { readonly ok: false; readonly kind: 'fault'; readonly field: string; readonly error: unknown };

/** Everything assembly reads besides the call itself; all of it is the host's, none the model's. */
export interface AssemblyContext {
  readonly request: CallRequest;
  readonly config: Readonly<Record<string, unknown>>;
  readonly resolvers: Readonly<Record<string, LookupResolver>>;
  /** Milliseconds since the epoch. */
  readonly now: () => number;
}

/** Validates `fetchplan.json` and compiles each entry's schema with the bundle's Ajv. */
export function compileFetchPlan(document: unknown, ajv: Ajv): FetchPlan {
  const parsed = fetchPlanSchema.safeParse(document);
  if (!parsed.success) throw new ProxyError('bundle-invalid', `fetchplan.json: ${z.prettifyError(parsed.error)}`);
  const seen = new Set<string>();
  const validators = new Map<string, ValidateFunction>();
  for (const entry of parsed.data.entries) {
    if (seen.has(entry.field))
      throw new ProxyError('bundle-invalid', `fetchplan.json: field ${entry.field} appears twice`);
    seen.add(entry.field);
    try {
      validators.set(entry.field, ajv.compile(entry.schema));
    } catch (error) {
      throw new ProxyError('bundle-invalid', `fetchplan.json: schema of ${entry.field} does not compile`, {
        cause: error,
      });
    }
  }
  const credentialFields = parsed.data.entries
    .filter((entry) => entry.source.kind === 'call' && entry.source.params.path.startsWith('arguments.'))
    .map((entry) => entry.field);
  return { entries: parsed.data.entries, credentialFields, validators };
}

/** The argument names that carry credentials (`childApproval`): the call-sourced fields other than the tool's own arguments. */
export function credentialArguments(plan: FetchPlan): string[] {
  return plan.entries.flatMap((entry) =>
    entry.source.kind === 'call' && entry.source.params.path.startsWith('arguments.')
      ? [entry.source.params.path.slice('arguments.'.length)]
      : [],
  );
}

/** The call's arguments with every credential field removed (SPEC §4.5). */
export function stripCredentials(
  plan: FetchPlan,
  argumentsObject: Readonly<Record<string, unknown>>,
): Record<string, unknown> {
  const credentials = new Set(credentialArguments(plan));
  return Object.fromEntries(Object.entries(argumentsObject).filter(([name]) => !credentials.has(name)));
}

/**
 * Assembles the policy input, entry by entry in plan order (SPEC §4.4). A conditional entry that
 * is absent is omitted; any other absence stops assembly naming the field; a resolver that throws
 * is a fault. Never throws.
 */
export async function assembleInput(plan: FetchPlan, context: AssemblyContext): Promise<AssemblyResult> {
  const input: Record<string, unknown> = {};
  for (const entry of plan.entries) {
    let value: unknown;
    try {
      value = await readSource(plan, entry, input, context);
    } catch (error) {
      if (error instanceof MissingReference) {
        // A conditional entry built from an absent conditional field is absent too (the parent's
        // evidence when no parent approval was given); a required one stops assembly.
        if (entry.guard?.always === false) continue;
        return { ok: false, kind: 'missing', field: entry.field };
      }
      return { ok: false, kind: 'fault', field: entry.field, error };
    }
    if (value === undefined || value === null) {
      // A conditional credential (guard always:false) may be absent; everything else is required.
      if (entry.guard?.always === false) continue;
      return { ok: false, kind: 'missing', field: entry.field };
    }
    if (!plan.validators.get(entry.field)?.(value)) return { ok: false, kind: 'invalid', field: entry.field };
    input[entry.field] = value;
  }
  return { ok: true, input };
}

/** Raised when a `$input` reference names a field not (yet) assembled. */
class MissingReference extends Error {}

async function readSource(
  plan: FetchPlan,
  entry: FetchPlanEntry,
  input: Record<string, unknown>,
  context: AssemblyContext,
): Promise<unknown> {
  const source = entry.source;
  switch (source.kind) {
    case 'call': {
      const path = source.params.path;
      if (path === 'tool') return context.request.toolName ?? context.request.tool;
      if (path === 'arguments') return stripCredentials(plan, context.request.arguments);
      return ownValue(context.request.arguments, path.slice('arguments.'.length));
    }
    case 'config':
      return readPath(context.config, source.params.key);
    case 'clock': {
      const now = context.now();
      return source.params?.unit === 'milliseconds' ? now : Math.floor(now / 1000);
    }
    case 'lookup': {
      const resolver = context.resolvers[source.params.resolver];
      if (!resolver) throw new ProxyError('missing-input', `no lookup resolver named ${source.params.resolver}`);
      return await resolver(resolveReferences(source.params.args ?? {}, input) as Record<string, unknown>);
    }
  }
}

/** Replaces `{"$input": "a.b"}` objects with already-assembled values, recursively. */
function resolveReferences(value: unknown, input: Record<string, unknown>): unknown {
  if (Array.isArray(value)) return value.map((item) => resolveReferences(item, input));
  if (typeof value !== 'object' || value === null) return value;
  const record = value as Record<string, unknown>;
  const keys = Object.keys(record);
  if (keys.length === 1 && keys[0] === '$input' && typeof record.$input === 'string') {
    const resolved = readPath(input, record.$input);
    if (resolved === undefined) throw new MissingReference(record.$input);
    return resolved;
  }
  return Object.fromEntries(keys.map((key) => [key, resolveReferences(record[key], input)]));
}

function readPath(root: unknown, path: string): unknown {
  let current: unknown = root;
  for (const segment of path.split('.')) {
    if (typeof current !== 'object' || current === null || Array.isArray(current)) return undefined;
    current = ownValue(current as Record<string, unknown>, segment);
  }
  return current;
}

/** Own properties only: `constructor` or `__proto__` in a path never reach the prototype. */
function ownValue(record: Readonly<Record<string, unknown>>, key: string): unknown {
  return Object.hasOwn(record, key) ? record[key] : undefined;
}
