/** The environment variables transparent mode honours. */
export interface TransparentEnv {
  /** `MCP_ELICITATION_PROXY_CONFIG`: the YAML path when `--config` is not given. */
  readonly configPath?: string;
  /** The raw environment, for `$NAME` references in `upstream.env`. */
  readonly variables: Readonly<Record<string, string | undefined>>;
}

/**
 * Parses transparent mode's environment once; the only place under `proxy/transparent` that
 * reads `process.env` (the stdio child's own environment is built by the SDK from its safe default list).
 */
export function readTransparentEnv(source: Readonly<Record<string, string | undefined>> = process.env): TransparentEnv {
  const configPath = source.MCP_ELICITATION_PROXY_CONFIG;
  return configPath !== undefined && configPath.trim() !== ''
    ? { configPath, variables: source }
    : { variables: source };
}
