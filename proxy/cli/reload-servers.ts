import { loadConfig } from '../config';
import { ProxyError } from '../errors';
import { gatewayOptionsFromConfig } from '../from-config';
import type { Gateway } from '../gateway/types';

/** Options of {@link reloadServers}. */
export interface ReloadServersOptions {
  readonly gateway: Gateway;
  readonly configPath: string;
  /** For `$VAR` references in stdio `env` blocks. */
  readonly environment: Readonly<Record<string, string | undefined>>;
  readonly log: (line: string) => void;
}

/** What a reload did, by server name. */
export interface ReloadReport {
  readonly added: readonly string[];
  readonly failed: readonly string[];
}

/**
 * Re-reads the config (on SIGHUP, after `add-server`) and admits, in place, every configured
 * server the gateway does not hold yet. A server already admitted is never replaced or re-pointed
 * while running: its new config takes effect at the next start. Filters are not reloaded. A config
 * that no longer validates is logged and changes nothing.
 */
export async function reloadServers(options: ReloadServersOptions): Promise<ReloadReport> {
  const { gateway, log } = options;
  let servers: ReturnType<typeof gatewayOptionsFromConfig>['servers'];
  try {
    servers = gatewayOptionsFromConfig(loadConfig(options.configPath, options.environment)).servers ?? {};
  } catch (error) {
    log(`reload: config not reloaded: ${error instanceof Error ? error.message : String(error)}`);
    return { added: [], failed: [] };
  }
  const added: string[] = [];
  const failed: string[] = [];
  for (const [name, spec] of Object.entries(servers)) {
    try {
      const report = await gateway.admit(name, spec);
      log(`reload: server "${name}" added with ${report.tools} tools`);
      added.push(name);
    } catch (error) {
      if (ProxyError.isInstance(error) && error.code === 'already-admitted') continue;
      log(`reload: server "${name}" failed to start: ${error instanceof Error ? error.message : String(error)}`);
      failed.push(name);
    }
  }
  return { added, failed };
}
