import { readFile, stat } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import { parse as parseYaml, YAMLParseError } from 'yaml';
import { envReferenceResolver } from '../env-references';
import { ProxyError } from '../errors';
import { parseTransparentConfig, type TransparentConfig } from './transparent-config';

/**
 * Reads and validates an `mcp-elicitation-proxy` YAML file. A missing file, a directory, broken
 * YAML, duplicate keys, schema errors and an unset `$NAME` in `upstream.env` each throw a
 * `ProxyError` whose message names the file. `upstream.env` values that are exactly `$NAME`
 * resolve as in the JSON config: from a `.env` beside the file, then from `environment`.
 */
export async function loadTransparentConfig(
  path: string,
  environment: Readonly<Record<string, string | undefined>> = {},
): Promise<TransparentConfig> {
  const file = resolve(path);
  const info = await stat(file).catch((error: unknown) => {
    throw new ProxyError('config-not-found', `${file}: configuration file not found`, { cause: error });
  });
  if (!info.isFile()) {
    throw new ProxyError('config-invalid', `${file}: configuration path is not a file`);
  }
  const source = await readFile(file, 'utf8').catch((error: unknown) => {
    throw new ProxyError('config-invalid', `${file}: cannot read the configuration file`, {
      cause: error,
    });
  });
  let raw: unknown;
  try {
    // `yaml` rejects duplicate keys by default, so a repeated section is an error, not a silent override.
    raw = parseYaml(source, { prettyErrors: true });
  } catch (error) {
    const detail = error instanceof YAMLParseError ? error.message : String(error);
    throw new ProxyError('config-invalid', `${file}: invalid YAML: ${detail}`, { cause: error });
  }
  const parsed = parseTransparentConfig(raw, file);
  // The pins file is named relative to the YAML's folder, as in the JSON config.
  const config = parsed.pins === undefined ? parsed : { ...parsed, pins: resolve(dirname(file), parsed.pins) };
  if (config.upstream.kind !== 'stdio') return config;
  const env = envReferenceResolver(file, environment)(config.upstream.env, 'upstream.env');
  return { ...config, upstream: { ...config.upstream, env } };
}
