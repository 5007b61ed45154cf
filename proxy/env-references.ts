import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { parse as parseDotenv } from 'dotenv';
import { ProxyError } from './errors';

const reference = /^\$([A-Za-z_][A-Za-z0-9_]*)$/;

/**
 * Resolves stdio `env` blocks as both config formats define them: a value that is exactly
 * `$NAME` comes from the `.env` beside the config file first (read once, when first needed),
 * then from `environment`; any other value is literal. An unset reference is a config error
 * naming `where`, the block's path in the file, rather than an empty variable the server
 * would misread.
 */
export function envReferenceResolver(
  configFile: string,
  environment: Readonly<Record<string, string | undefined>>,
): (env: Readonly<Record<string, string>>, where: string) => Record<string, string> {
  let dotenv: Record<string, string> | undefined;
  const lookup = (name: string) => {
    if (dotenv === undefined) {
      const path = join(dirname(configFile), '.env');
      dotenv = existsSync(path) ? parseDotenv(readFileSync(path)) : {};
    }
    return dotenv[name] ?? environment[name];
  };
  return (env, where) => {
    const resolved: Record<string, string> = {};
    for (const [key, value] of Object.entries(env)) {
      const name = reference.exec(value)?.[1];
      const found = name === undefined ? value : lookup(name);
      if (found === undefined) {
        throw new ProxyError(
          'config-invalid',
          `${configFile}: ${where}.${key}: $${name} is not set in the .env beside the config nor in the environment.`,
        );
      }
      resolved[key] = found;
    }
    return resolved;
  };
}
