import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { parse as parseDotenv } from 'dotenv';
import { ProxyError } from './errors';

const reference = /^\$([A-Za-z_][A-Za-z0-9_]*)$/;

/**
 * Resolves a stdio server's `env` block as both config formats define it: a value that is
 * exactly `$NAME` comes from the `.env` beside the config file first, then from `environment`;
 * any other value is literal. An unset reference is a config error (naming `where`, the
 * block's path in the file) rather than an empty variable the server would misread.
 */
export function resolveEnvReferences(
  env: Readonly<Record<string, string>>,
  options: {
    readonly configFile: string;
    readonly where: string;
    readonly environment: Readonly<Record<string, string | undefined>>;
  },
): Record<string, string> {
  const dotenvPath = join(dirname(options.configFile), '.env');
  let dotenv: Record<string, string> | undefined;
  const resolved: Record<string, string> = {};
  for (const [key, value] of Object.entries(env)) {
    const name = reference.exec(value)?.[1];
    if (name === undefined) {
      resolved[key] = value;
      continue;
    }
    dotenv ??= existsSync(dotenvPath) ? parseDotenv(readFileSync(dotenvPath)) : {};
    const found = dotenv[name] ?? options.environment[name];
    if (found === undefined) {
      throw new ProxyError(
        'config-invalid',
        `${options.configFile}: ${options.where}.${key}: $${name} is not set in the .env beside the config nor in the environment.`,
      );
    }
    resolved[key] = found;
  }
  return resolved;
}
