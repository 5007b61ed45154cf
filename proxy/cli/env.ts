import { fileURLToPath } from 'node:url';
import { z } from 'zod';

const envSchema = z.object({
  EXTENSIBLE_MCP_CONFIG: z.string().min(1).optional(),
  EXTENSIBLE_MCP_DATA: z.string().min(1).optional(),
  EXTENSIBLE_MCP_MODEL_DIR: z.string().min(1).optional(),
  EXTENSIBLE_MCP_OFFLINE: z.enum(['0', '1', 'true', 'false']).optional(),
  EXTENSIBLE_MCP_TOKENS_FILE: z.string().min(1).optional(),
  EXTENSIBLE_MCP_STORE: z.string().min(1).optional(),
});

/** The proxy CLI's environment, parsed once. */
export interface ProxyEnv {
  readonly configPath: string | undefined;
  /** `EXTENSIBLE_MCP_DATA`: where the tool-vector cache goes when set (else beside the config). */
  readonly dataDir: string | undefined;
  /** Where the staged embedding model lives (default: the package's `.models`). */
  readonly modelDir: string;
  /** When true, the model is never fetched from its hub. */
  readonly offline: boolean;
  /** `EXTENSIBLE_MCP_TOKENS_FILE` as given (resolved against the config folder later). */
  readonly tokensFile: string | undefined;
  /** `EXTENSIBLE_MCP_STORE`: the store URL when `--store` is not given (a PostgreSQL password stays out of `ps`). */
  readonly store: string | undefined;
  /** The raw environment, for `$VAR` references in stdio `env` blocks. */
  readonly variables: Readonly<Record<string, string | undefined>>;
}

/** Parses the variables the proxy CLI reads. Nothing else in `proxy/` reads `process.env`. */
export function readProxyEnv(environment: Readonly<Record<string, string | undefined>> = process.env): ProxyEnv {
  const parsed = envSchema.parse(environment);
  return {
    configPath: parsed.EXTENSIBLE_MCP_CONFIG,
    dataDir: parsed.EXTENSIBLE_MCP_DATA,
    modelDir: parsed.EXTENSIBLE_MCP_MODEL_DIR ?? fileURLToPath(new URL('../../.models', import.meta.url)),
    offline: parsed.EXTENSIBLE_MCP_OFFLINE === '1' || parsed.EXTENSIBLE_MCP_OFFLINE === 'true',
    tokensFile: parsed.EXTENSIBLE_MCP_TOKENS_FILE,
    store: parsed.EXTENSIBLE_MCP_STORE,
    variables: environment,
  };
}
