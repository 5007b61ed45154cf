import { resolve } from 'node:path';
import { z } from 'zod';

/** The household side's environment, parsed once (STYLE: nothing else reads `process.env`). */
export interface HouseholdEnv {
  /** `EXTENSIBLE_MCP_DATA`: the data folder (SQLite file, key file); default `./.data`. */
  readonly dataDir: string;
  /**
   * `DATABASE_URL`: a `postgres://…` or `postgresql://…` database the household's store lives in,
   * shared by every instance (issue 28); absent → the SQLite file in the data folder. It may hold a
   * password: never logged or echoed, not even when it is refused. The key file stays in the data folder.
   */
  readonly databaseUrl?: string;
  /** `EXTENSIBLE_MCP_ORIGIN`: where the app is served; passkeys are bound to it. Default `http://localhost:3000`. */
  readonly origin: string;
  /** The WebAuthn relying-party id: the origin's host name. */
  readonly rpId: string;
  /** The household admin's `did:web`, from the origin's host and port (SPEC §5.1). */
  readonly adminDid: string;
  /** `PIZZA_URL`: the shop's Streamable HTTP endpoint; absent → the shop runs as a stdio child. */
  readonly pizzaUrl?: string;
  /** `STRIPE_SECRET_KEY`: a Stripe test-mode key (`sk_test_…`); absent → the mock rail. */
  readonly stripeSecretKey?: string;
  /** `EXTENSIBLE_MCP_POLICY_ENGINE`: which engine decides `family-spend`; default `rego` (WASM). */
  readonly policyEngine: 'rego' | 'cel';
  /** `EXTENSIBLE_MCP_HTTP_TOKEN`: a bearer token of `/mcp`, the principal `token:mcp`. */
  readonly httpToken?: string;
  /**
   * `EXTENSIBLE_MCP_HTTP_TOKENS`: more `/mcp` clients, `name=token` entries separated by commas or
   * spaces, each its own principal `token:<name>` (SPEC §3.5). With neither variable `/mcp` is a 404.
   */
  readonly httpTokens: readonly { readonly name: string; readonly token: string }[];
  /** `ANTHROPIC_API_KEY`: Claude drives the chat when set; absent → the offline planner. Never logged. */
  readonly anthropicApiKey?: string;
  /** `ANTHROPIC_MODEL`: which Claude model; absent → the agent's default. */
  readonly anthropicModel?: string;
  /**
   * `EXTENSIBLE_MCP_TEST_CLOCK_FILE`, for browser tests only: a file holding milliseconds to add
   * to the household's clock, read at every tick, so a spec can move past an invoice's expiry.
   */
  readonly testClockFile?: string;
  /**
   * `EXTENSIBLE_MCP_SETTLEMENT_DID_FILE`: where the household writes its *public* settlement DID at
   * every start, for a shop in another container to read (SPEC §8: in docker, a small volume the
   * shop mounts read-only). Absent → nothing is written.
   */
  readonly settlementDidFile?: string;
  /**
   * `EXTENSIBLE_MCP_AUDIT_WITNESS`: `shop` (default) submits every audit checkpoint to the shop's
   * witness endpoint (its `/witness` beside `PIZZA_URL`, else a `--witness` stdio child); `none` does not.
   */
  readonly auditShopWitness: boolean;
  /** `PIZZA_WITNESS_URL`: the shop's witness endpoint; default `/witness` on `PIZZA_URL`'s origin. */
  readonly pizzaWitnessUrl?: string;
  /**
   * `EXTENSIBLE_MCP_AUDIT_WITNESS_FILE`: an append-only file every checkpoint is also written to —
   * worth something only where whoever holds the data folder cannot rewrite it (another disk, an
   * append-only mount). Absent → none.
   */
  readonly auditWitnessFile?: string;
}

const OriginVariable = z
  .url({ protocol: /^https?$/ })
  .default('http://localhost:3000')
  .refine(
    (value) => new URL(value).origin === value.replace(/\/$/, ''),
    'must be an origin: scheme, host and port only',
  )
  .refine((value) => {
    const url = new URL(value);
    // Browsers allow WebAuthn over http only on localhost: anything else must be https.
    return url.protocol === 'https:' || url.hostname === 'localhost';
  }, 'must be https unless the host is localhost');

/** `postgres://` or `postgresql://`; the refusal names the schemes, never the value (it may hold a password). */
const DatabaseUrlVariable = z.string().refine((value) => {
  try {
    const url = new URL(value);
    return (url.protocol === 'postgres:' || url.protocol === 'postgresql:') && url.pathname.length > 1;
  } catch {
    return false;
  }
}, 'must be a postgres:// or postgresql:// URL naming a database (the value is not shown)');

const Env = z.object({
  EXTENSIBLE_MCP_DATA: z.string().min(1).default('./.data'),
  DATABASE_URL: z.preprocess(blankToUndefined, DatabaseUrlVariable.optional()),
  EXTENSIBLE_MCP_ORIGIN: OriginVariable,
  PIZZA_URL: z.preprocess(blankToUndefined, z.url({ protocol: /^https?$/ }).optional()),
  // A live key is refused here, before anything could reach Stripe with it.
  STRIPE_SECRET_KEY: z.preprocess(
    blankToUndefined,
    z
      .string()
      .refine(
        (key) => key.startsWith('sk_test_'),
        'must be a Stripe test-mode secret key (sk_test_…); live keys are refused',
      )
      .optional(),
  ),
  EXTENSIBLE_MCP_POLICY_ENGINE: z.preprocess(blankToUndefined, z.enum(['rego', 'cel']).default('rego')),
  EXTENSIBLE_MCP_HTTP_TOKEN: z.preprocess(
    blankToUndefined,
    z
      .string()
      .regex(/^\S{16,}$/, 'must be at least 16 characters, without spaces')
      .optional(),
  ),
  EXTENSIBLE_MCP_HTTP_TOKENS: z.preprocess(
    blankToUndefined,
    z
      .string()
      .transform((value) => value.split(/[\s,]+/).filter(Boolean))
      .pipe(
        z.array(
          z
            .string()
            .regex(/^[A-Za-z0-9._-]{1,64}=\S{16,}$/, 'each entry must be name=token, the token 16+ characters')
            .transform((entry) => {
              const at = entry.indexOf('=');
              return { name: entry.slice(0, at), token: entry.slice(at + 1) };
            }),
        ),
      )
      .optional(),
  ),
  ANTHROPIC_API_KEY: z.preprocess(blankToUndefined, z.string().optional()),
  ANTHROPIC_MODEL: z.preprocess(blankToUndefined, z.string().max(200).optional()),
  EXTENSIBLE_MCP_TEST_CLOCK_FILE: z.preprocess(blankToUndefined, z.string().min(1).optional()),
  EXTENSIBLE_MCP_SETTLEMENT_DID_FILE: z.preprocess(blankToUndefined, z.string().min(1).optional()),
  EXTENSIBLE_MCP_AUDIT_WITNESS: z.preprocess(blankToUndefined, z.enum(['shop', 'none']).default('shop')),
  PIZZA_WITNESS_URL: z.preprocess(blankToUndefined, z.url({ protocol: /^https?$/ }).optional()),
  EXTENSIBLE_MCP_AUDIT_WITNESS_FILE: z.preprocess(blankToUndefined, z.string().min(1).optional()),
});

function optional<K extends string>(key: K, value: string | undefined): Partial<Record<K, string>> {
  return value === undefined ? {} : ({ [key]: value } as Record<K, string>);
}

/** The shop's witness endpoint: as configured, else `/witness` on the shop's origin (beside its `/mcp`). */
function witnessUrl(configured: string | undefined, pizzaUrl: string | undefined): string | undefined {
  if (configured !== undefined) return configured;
  return pizzaUrl === undefined ? undefined : new URL('/witness', pizzaUrl).href;
}

function blankToUndefined(value: unknown): unknown {
  return typeof value === 'string' && value.trim() === '' ? undefined : value;
}

/** Parses the household environment; a bad value is a clear error naming the variable. */
export function readHouseholdEnv(
  environment: Readonly<Record<string, string | undefined>> = process.env,
): HouseholdEnv {
  const parsed = Env.safeParse(environment);
  if (!parsed.success) {
    throw new Error(`Invalid environment: ${z.prettifyError(parsed.error)}`);
  }
  const url = new URL(parsed.data.EXTENSIBLE_MCP_ORIGIN);
  return {
    dataDir: resolve(parsed.data.EXTENSIBLE_MCP_DATA),
    ...optional('databaseUrl', parsed.data.DATABASE_URL),
    origin: url.origin,
    rpId: url.hostname,
    adminDid: `did:web:${encodeURIComponent(url.host)}`,
    ...(parsed.data.PIZZA_URL === undefined ? {} : { pizzaUrl: parsed.data.PIZZA_URL }),
    ...(parsed.data.STRIPE_SECRET_KEY === undefined ? {} : { stripeSecretKey: parsed.data.STRIPE_SECRET_KEY }),
    policyEngine: parsed.data.EXTENSIBLE_MCP_POLICY_ENGINE,
    ...optional('httpToken', parsed.data.EXTENSIBLE_MCP_HTTP_TOKEN),
    httpTokens: parsed.data.EXTENSIBLE_MCP_HTTP_TOKENS ?? [],
    ...optional('anthropicApiKey', parsed.data.ANTHROPIC_API_KEY),
    ...optional('anthropicModel', parsed.data.ANTHROPIC_MODEL),
    ...optional('testClockFile', parsed.data.EXTENSIBLE_MCP_TEST_CLOCK_FILE),
    ...(parsed.data.EXTENSIBLE_MCP_SETTLEMENT_DID_FILE === undefined
      ? {}
      : { settlementDidFile: resolve(parsed.data.EXTENSIBLE_MCP_SETTLEMENT_DID_FILE) }),
    auditShopWitness: parsed.data.EXTENSIBLE_MCP_AUDIT_WITNESS === 'shop',
    ...optional('pizzaWitnessUrl', witnessUrl(parsed.data.PIZZA_WITNESS_URL, parsed.data.PIZZA_URL)),
    ...(parsed.data.EXTENSIBLE_MCP_AUDIT_WITNESS_FILE === undefined
      ? {}
      : { auditWitnessFile: resolve(parsed.data.EXTENSIBLE_MCP_AUDIT_WITNESS_FILE) }),
  };
}

/** What the root request interceptor (`proxy.ts`) needs: the origin alone, and whether Next runs in development. */
export interface InterceptorEnv {
  /** `EXTENSIBLE_MCP_ORIGIN`, parsed as {@link readHouseholdEnv} parses it: the one origin the app answers for. */
  readonly origin: string;
  /** `NODE_ENV` is `development` (`next dev`): React's dev tooling needs `eval`, so the CSP allows it there only. */
  readonly development: boolean;
}

const InterceptorVariables = z.object({
  EXTENSIBLE_MCP_ORIGIN: OriginVariable,
  NODE_ENV: z.string().optional(),
});

/**
 * Parses only what the interceptor needs, so a bad variable the household alone uses (say a live
 * Stripe key) does not take the Host rule and the CSP down with it; a bad origin is an error,
 * which the interceptor turns into a refusal of every request (fail closed).
 */
export function readInterceptorEnv(
  environment: Readonly<Record<string, string | undefined>> = process.env,
): InterceptorEnv {
  const parsed = InterceptorVariables.safeParse(environment);
  if (!parsed.success) throw new Error(`Invalid environment: ${z.prettifyError(parsed.error)}`);
  return {
    origin: new URL(parsed.data.EXTENSIBLE_MCP_ORIGIN).origin,
    development: parsed.data.NODE_ENV === 'development',
  };
}
