import { loadConfig } from '../config';
import type { ExtensibleProxy } from '../create-proxy';
import { proxyOptionsFromConfig } from '../from-config';

/** Options of {@link reloadServers}. */
export interface ReloadServersOptions {
  readonly proxy: ExtensibleProxy;
  readonly configPath: string;
  /** For `$VAR` references in stdio `env` blocks. */
  readonly environment: Readonly<Record<string, string | undefined>>;
  /** The URL binding the credential lookup reads; updated here for servers not yet connected. */
  readonly configuredUrls: Map<string, string>;
  readonly log: (line: string) => void;
}

/** What a reload did, by server name. */
export interface ReloadReport {
  readonly added: readonly string[];
  readonly failed: readonly string[];
}

/**
 * Re-reads the config (on SIGHUP, after `add-server`) and connects and indexes, in place, every
 * configured server the proxy does not have yet. A server already connected is never replaced
 * or re-pointed while running: its new config takes effect at the next start. Filters are not
 * reloaded. A config that no longer validates is logged and changes nothing.
 */
export async function reloadServers(options: ReloadServersOptions): Promise<ReloadReport> {
  const { proxy, configuredUrls, log } = options;
  let servers: ReturnType<typeof proxyOptionsFromConfig>['servers'];
  try {
    servers = proxyOptionsFromConfig(loadConfig(options.configPath, options.environment)).servers ?? {};
  } catch (error) {
    log(`reload: config not reloaded: ${error instanceof Error ? error.message : String(error)}`);
    return { added: [], failed: [] };
  }
  const added: string[] = [];
  const failed: string[] = [];
  for (const [name, spec] of Object.entries(servers)) {
    const running = proxy.downstream(name);
    if (running) {
      if (spec.kind === 'http' && running.url !== spec.url) {
        log(
          `reload: server "${name}" is running at ${running.url ?? 'a non-HTTP transport'}; restart to apply its change`,
        );
      }
      continue;
    }
    // Bind before connecting: the lookup needs the configured URL for this name.
    if (spec.kind === 'http') configuredUrls.set(name, spec.url);
    try {
      const count = await proxy.addServer(name, spec);
      log(`reload: server "${name}" added with ${count} tools`);
      added.push(name);
    } catch (error) {
      log(`reload: server "${name}" failed to start: ${error instanceof Error ? error.message : String(error)}`);
      failed.push(name);
    }
  }
  return { added, failed };
}
