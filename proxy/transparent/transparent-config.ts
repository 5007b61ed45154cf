import { z } from 'zod';
import { DOWNSTREAM_PROTOCOLS } from '../downstream/protocol-setting';
import { ProxyError } from '../errors';
import { globProblem } from '../filters/load-control';
import type { DownstreamProtocol } from '../gateway/types';

/**
 * Secret markers used when the config names none (SPEC §3.10). Matched on normalised whole words
 * (see `matchSecretMarker`), so `passWord` and `pаssword` are secrets and `max_tokens` is not.
 */
export const DEFAULT_SECRET_MARKERS: readonly string[] = [
  'password',
  'passwd',
  'pwd',
  'passphrase',
  'secret',
  'token',
  'access_token',
  'access_key',
  'api_key',
  'apikey',
  'credential',
  'private_key',
  'ssh_key',
  'authorization',
  'bearer',
  'cookie',
  'session_id',
  'pin',
  'otp',
  'ssn',
  'mnemonic',
  'seed_phrase',
  'payment',
  'card',
  'cvv',
];

/** Field types an elicitation form can carry (MCP form mode allows primitives only). */
export const PRIMITIVE_FIELD_TYPES = ['string', 'number', 'integer', 'boolean'] as const;

/** One of {@link PRIMITIVE_FIELD_TYPES}. */
export type PrimitiveFieldType = (typeof PRIMITIVE_FIELD_TYPES)[number];

/**
 * Where the upstream MCP server lives: a stdio child or a Streamable HTTP endpoint, and the MCP
 * version to speak to it (`upstream.protocol`, issue 31): a pinned version never falls back;
 * absent means `auto` (ask the server, speak 2026-07-28 when it offers it).
 */
export type UpstreamConfig =
  | {
      readonly kind: 'stdio';
      readonly command: string;
      readonly args: readonly string[];
      readonly env: Readonly<Record<string, string>>;
      readonly protocol?: DownstreamProtocol;
    }
  | { readonly kind: 'http'; readonly url: string; readonly protocol?: DownstreamProtocol };

/** Copy for one field of the elicitation form. */
export interface ElicitFieldCopy {
  readonly type?: PrimitiveFieldType;
  readonly title?: string;
  readonly description?: string;
}

/** Per-tool policy (`tools.<name>` in the YAML). */
export interface ToolPolicy {
  /** Appended to the schema's `required`, order kept, no duplicates. */
  readonly required: readonly string[];
  readonly elicit?: {
    readonly message?: string;
    readonly fields: Readonly<Record<string, ElicitFieldCopy>>;
  };
  /**
   * Asks a clarifying question for `field` before forwarding when its value is too vague: a string
   * shorter than `queryMinLength` (trimmed) or exactly one of `genericTerms` (case and surrounding
   * space ignored).
   */
  readonly ambiguousIf?: {
    readonly field: string;
    readonly queryMinLength?: number;
    readonly genericTerms: readonly string[];
  };
  /**
   * `always`: the person confirms the exact call before it is forwarded: through a form, or, with
   * `passkey`, with those roles' passkeys in the household's approval windows (the
   * `approval_required` path, docs/human-authority.md), never a form.
   */
  readonly confirmIf?: { readonly always: boolean; readonly passkey?: readonly string[] };
}

/** The call-time policy the elicitation middleware applies; shared by transparent and search mode. */
export interface ElicitationPolicy {
  readonly elicitation: {
    readonly enabled: boolean;
    readonly fallbackOnUnsupported: 'structured_error';
    /** How long a form may stay open before the call fails with `elicitation_failed`. */
    readonly timeoutMs: number;
  };
  readonly policies: {
    readonly schemaRequired: { readonly enabled: boolean };
    readonly sensitiveRequired: {
      readonly enabled: boolean;
      /** Matched against the field name. */
      readonly nameMarkers: readonly string[];
      /** Matched against the field's title, description and format. */
      readonly schemaMarkers: readonly string[];
    };
  };
  readonly tools: Readonly<Record<string, ToolPolicy>>;
  /**
   * `approval-required`: the host enforces `confirm_if.passkey` with the `approval_required`
   * filter (the household app), so the middleware leaves those calls to it. Absent: there are no
   * approval windows here, and such a call is refused (fail closed), never confirmed by a form.
   */
  readonly passkeyConfirmations?: 'approval-required';
}

/**
 * `filters.access_control` of a transparent-mode file (SPEC §3.5): what is hidden from every
 * listing and refused, with an event, whether or not the client listed first. Globs treat `/` as
 * an ordinary character, as search mode's do.
 */
export interface TransparentAccessControl {
  /** Exact tool names. */
  readonly deny: readonly string[];
  /** Globs over tool names. */
  readonly denyPatterns: readonly string[];
  /** Globs over resource URIs (`file:///secrets/*`), for resources and resource templates. */
  readonly denyResources: readonly string[];
  /** Exact prompt names or globs over them. */
  readonly denyPrompts: readonly string[];
}

/** A validated transparent-mode configuration (the `mcp-elicitation-proxy` YAML). */
export interface TransparentConfig extends ElicitationPolicy {
  /** The file it was loaded from (for messages), or a label when built in code. */
  readonly source: string;
  readonly proxy: { readonly name: string; readonly version: string };
  readonly upstream: UpstreamConfig;
  readonly accessControl: TransparentAccessControl;
  /**
   * A `pins` file fixing the upstream's tool definitions ahead of first use (docs/pinning.md),
   * under `proxy.name`; absolute once loaded from a file (relative to the YAML's folder).
   */
  readonly pins?: string;
}

function describeInput(input: unknown): string {
  if (input === undefined) return 'nothing';
  if (input === null) return 'null';
  if (Array.isArray(input)) return 'a list';
  if (typeof input === 'object') return 'a mapping';
  return `${typeof input} ${JSON.stringify(input)}`;
}

/** A string that must be present and not blank; `what` names the expectation in messages. */
function text(what: string) {
  return z
    .string({
      error: (issue) =>
        issue.input === undefined ? `is required (${what})` : `expected ${what}, got ${describeInput(issue.input)}`,
    })
    .refine((value) => value.trim() !== '', { error: `must not be blank (expected ${what})` });
}

function flag() {
  return z.boolean({ error: (issue) => `expected true or false, got ${describeInput(issue.input)}` });
}

function mapping<T extends z.core.$ZodLooseShape>(shape: T) {
  return z.strictObject(shape, {
    error: (issue) => {
      if (issue.code !== 'invalid_type') return undefined;
      return issue.input === undefined
        ? 'is required (a mapping)'
        : `expected a mapping, got ${describeInput(issue.input)}`;
    },
  });
}

function list<T extends z.ZodType>(item: T, what: string) {
  return z.array(item, { error: (issue) => `expected a list of ${what}, got ${describeInput(issue.input)}` });
}

const markerList = list(text('a marker string'), 'marker strings');

const upstreamSchema = mapping({
  url: text('an http(s) URL').optional(),
  protocol: z
    .enum(DOWNSTREAM_PROTOCOLS, {
      error: (issue) =>
        `expected one of ${DOWNSTREAM_PROTOCOLS.map((value) => JSON.stringify(value)).join(', ')} (the MCP protocol version to speak to the upstream), got ${describeInput(issue.input)}`,
    })
    .optional(),
  command: text('a command to run').optional(),
  args: list(text('an argument string'), 'argument strings').optional(),
  env: z
    .record(
      z.string().refine((key) => key.trim() !== '', { error: 'environment variable names must not be blank' }),
      text('a string value (quote numbers and booleans in YAML, e.g. "8080")'),
      { error: (issue) => `expected a mapping of NAME: "value", got ${describeInput(issue.input)}` },
    )
    .optional(),
}).superRefine(
  (upstream, context) => {
    // Runs even when a field failed, so every upstream mistake is reported in one go; the
    // value may then be anything, including absent.
    if (typeof upstream !== 'object' || upstream === null) return;
    const present = (key: 'url' | 'command' | 'args' | 'env') =>
      (upstream as Record<string, unknown>)[key] !== undefined;
    // Exactly one way to reach the upstream: a URL or a command, never both, never neither.
    if (present('url') === present('command')) {
      context.addIssue({
        code: 'custom',
        message: 'set exactly one of upstream.url (Streamable HTTP) or upstream.command (stdio child)',
      });
    }
    if (!present('command') && present('args')) {
      context.addIssue({
        code: 'custom',
        path: ['args'],
        message: 'args is allowed only together with upstream.command',
      });
    }
    if (!present('command') && present('env')) {
      context.addIssue({
        code: 'custom',
        path: ['env'],
        message: 'env is allowed only together with upstream.command',
      });
    }
    const url: unknown = upstream.url;
    if (typeof url === 'string' && url.trim() !== '') {
      const parsed = URL.canParse(url) ? new URL(url) : undefined;
      if (parsed === undefined || (parsed.protocol !== 'http:' && parsed.protocol !== 'https:')) {
        context.addIssue({
          code: 'custom',
          path: ['url'],
          message: `expected an http(s) URL, got ${JSON.stringify(url)}`,
        });
      }
    }
  },
  { when: () => true },
);

const fieldSchema = mapping({
  type: z
    .enum(PRIMITIVE_FIELD_TYPES, {
      error: (issue) =>
        `expected one of ${PRIMITIVE_FIELD_TYPES.join(', ')} (elicitation forms carry primitive types only), got ${describeInput(issue.input)}`,
    })
    .optional(),
  title: text('a field title').optional(),
  description: text('a field description').optional(),
});

const toolSchema = mapping({
  required: list(text('a field name'), 'field names').default([]),
  elicit: mapping({
    message: text('the message shown above the form').optional(),
    fields: z.record(z.string(), fieldSchema).default({}),
  }).optional(),
  ambiguous_if: mapping({
    field: text('the field to clarify'),
    query_min_length: z.number().int().nonnegative().optional(),
    generic_terms: list(text('a term'), 'terms').default([]),
  }).optional(),
  confirm_if: mapping({
    always: flag().default(false),
    passkey: list(text('a household role'), 'household roles')
      .min(1, 'name at least one role who confirms with a passkey')
      .optional(),
  }).optional(),
});

const globList = list(
  text('a name or glob').superRefine((glob, context) => {
    const problem = globProblem(glob);
    if (problem !== undefined) context.addIssue({ code: 'custom', message: problem });
  }),
  'names or globs',
);

const fileSchema = mapping({
  proxy: mapping({
    name: text('the proxy server name').default('mcp-elicitation-proxy'),
    version: text('the proxy server version').default('0.1.0'),
  }).prefault({}),
  upstream: upstreamSchema,
  pins: text('a pins file path').optional(),
  elicitation: mapping({
    enabled: flag().default(true),
    fallback_on_unsupported: z
      .literal('structured_error', {
        error: (issue) =>
          `expected "structured_error" (the only supported fallback), got ${describeInput(issue.input)}`,
      })
      .default('structured_error'),
    timeout_seconds: z
      .number({ error: (issue) => `expected a number of seconds, got ${describeInput(issue.input)}` })
      .positive()
      .max(86_400)
      .default(600),
  }).prefault({}),
  policies: mapping({
    schema_required: mapping({ enabled: flag().default(true) }).prefault({}),
    sensitive_required: mapping({
      enabled: flag().default(true),
      sensitive_name_markers: markerList.optional(),
      sensitive_schema_markers: markerList.optional(),
    }).prefault({}),
  }).prefault({}),
  tools: z
    .record(
      z.string().refine((name) => name.trim() !== '', { error: 'tool names must not be blank' }),
      toolSchema,
      { error: (issue) => `expected a mapping of tool name to policy, got ${describeInput(issue.input)}` },
    )
    .prefault({}),
  filters: mapping({
    access_control: mapping({
      deny: list(text('a tool name'), 'tool names').default([]),
      deny_patterns: globList.default([]),
      deny_resources: globList.default([]),
      deny_prompts: globList.default([]),
    }).prefault({}),
  }).prefault({}),
});

type FileConfig = z.output<typeof fileSchema>;

function formatPath(path: readonly PropertyKey[]): string {
  let result = '';
  for (const segment of path) {
    if (typeof segment === 'number') result += `[${segment}]`;
    else result += result === '' ? String(segment) : `.${String(segment)}`;
  }
  return result === '' ? '(top level)' : result;
}

function toToolPolicy(tool: FileConfig['tools'][string]): ToolPolicy {
  const fields: Record<string, ElicitFieldCopy> = {};
  for (const [name, field] of Object.entries(tool.elicit?.fields ?? {})) {
    fields[name] = {
      ...(field.type !== undefined && { type: field.type }),
      ...(field.title !== undefined && { title: field.title }),
      ...(field.description !== undefined && { description: field.description }),
    };
  }
  return {
    required: tool.required,
    ...(tool.elicit !== undefined && {
      elicit: { ...(tool.elicit.message !== undefined && { message: tool.elicit.message }), fields },
    }),
    ...(tool.ambiguous_if !== undefined && {
      ambiguousIf: {
        field: tool.ambiguous_if.field,
        ...(tool.ambiguous_if.query_min_length !== undefined && { queryMinLength: tool.ambiguous_if.query_min_length }),
        genericTerms: tool.ambiguous_if.generic_terms,
      },
    }),
    ...(tool.confirm_if !== undefined && {
      confirmIf: {
        always: tool.confirm_if.always,
        ...(tool.confirm_if.passkey !== undefined && { passkey: tool.confirm_if.passkey }),
      },
    }),
  };
}

/**
 * Validates parsed YAML against the `mcp-elicitation-proxy` schema (SPEC §3.10) and returns the
 * typed model. Unknown keys are errors; every message names the file, the key path and what was
 * expected. Throws `ProxyError('config-invalid')`.
 */
export function parseTransparentConfig(raw: unknown, source: string): TransparentConfig {
  if (raw === null || raw === undefined || typeof raw !== 'object' || Array.isArray(raw)) {
    throw new ProxyError(
      'config-invalid',
      `${source}: (top level): expected a YAML mapping with at least an "upstream" section, got ${describeInput(raw ?? null)}`,
    );
  }
  const parsed = fileSchema.safeParse(raw);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((issue) => `${source}: ${formatPath(issue.path)}: ${issue.message}`);
    throw new ProxyError('config-invalid', `Invalid configuration:\n${lines.join('\n')}`, {
      cause: parsed.error,
    });
  }
  const file = parsed.data;
  const protocol = file.upstream.protocol === undefined ? {} : { protocol: file.upstream.protocol };
  const upstream: UpstreamConfig =
    file.upstream.command !== undefined
      ? {
          kind: 'stdio',
          command: file.upstream.command,
          args: file.upstream.args ?? [],
          env: file.upstream.env ?? {},
          ...protocol,
        }
      : { kind: 'http', url: file.upstream.url ?? '', ...protocol };
  const tools: Record<string, ToolPolicy> = {};
  for (const [name, tool] of Object.entries(file.tools)) tools[name] = toToolPolicy(tool);
  const sensitive = file.policies.sensitive_required;
  return {
    source,
    proxy: { name: file.proxy.name, version: file.proxy.version },
    upstream,
    elicitation: {
      enabled: file.elicitation.enabled,
      fallbackOnUnsupported: file.elicitation.fallback_on_unsupported,
      timeoutMs: Math.round(file.elicitation.timeout_seconds * 1000),
    },
    policies: {
      schemaRequired: { enabled: file.policies.schema_required.enabled },
      sensitiveRequired: {
        enabled: sensitive.enabled,
        nameMarkers: sensitive.sensitive_name_markers ?? DEFAULT_SECRET_MARKERS,
        schemaMarkers: sensitive.sensitive_schema_markers ?? DEFAULT_SECRET_MARKERS,
      },
    },
    tools,
    accessControl: {
      deny: file.filters.access_control.deny,
      denyPatterns: file.filters.access_control.deny_patterns,
      denyResources: file.filters.access_control.deny_resources,
      denyPrompts: file.filters.access_control.deny_prompts,
    },
    ...(file.pins !== undefined && { pins: file.pins }),
  };
}
