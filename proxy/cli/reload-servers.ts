import { loadConfig } from '../config';
import { gatewayOptionsFromConfig } from '../from-config';
import type { FilterOptions, Reconfiguration, ReconfigureReport } from '../gateway/create-gateway';
import type { CallFilter, Gateway } from '../gateway/types';

/** Options of {@link reloadServers}. */
export interface ReloadServersOptions {
  readonly gateway: Gateway;
  readonly configPath: string;
  /** For `$VAR` references in stdio `env` blocks. */
  readonly environment: Readonly<Record<string, string | undefined>>;
  readonly log: (line: string) => void;
  /** Compiles `filters.rego_policy` (the CLI's WASM compiler); absent, a config naming one fails to reload. */
  readonly compileRego?: (regoPath: string) => Promise<CallFilter>;
}

/** What a reload did, by server name. */
export interface ReloadReport {
  /** Whether the new config is now the running one (false: it did not load, nothing changed). */
  readonly applied: boolean;
  readonly added: readonly string[];
  readonly repointed: readonly string[];
  readonly removed: readonly string[];
  readonly failed: readonly string[];
}

const unchanged: ReloadReport = { applied: false, added: [], repointed: [], removed: [], failed: [] };

/**
 * Re-reads the config (on SIGHUP, after `add-server`) and applies all of it in place (SPEC §3.9,
 * issue 18): new servers are admitted, servers whose command, arguments, environment or URL
 * changed are re-pointed, removed ones dropped, and the filters (`access_control`,
 * `similarity_threshold`, `load_control`, `rego_policy`) rebuilt for the next request. A config
 * that no longer loads or compiles keeps the running one, and the log says why. Either way every
 * connected server's last listing is checked against the pin store again (an operator's `pins
 * accept` signals this reload).
 */
export async function reloadServers(options: ReloadServersOptions): Promise<ReloadReport> {
  const { gateway, log } = options;
  let next: Reconfiguration;
  try {
    const config = loadConfig(options.configPath, options.environment);
    const mapped = gatewayOptionsFromConfig(config);
    const regoPath = config.filters.rego_policy;
    let regoPolicy: CallFilter | undefined;
    if (regoPath !== undefined) {
      if (options.compileRego === undefined) throw new Error('rego_policy cannot be compiled here');
      regoPolicy = await options.compileRego(regoPath);
    }
    const filters: FilterOptions = {
      ...(mapped.similarityThreshold !== undefined && { similarityThreshold: mapped.similarityThreshold }),
      ...(mapped.accessControl !== undefined && { accessControl: mapped.accessControl }),
      ...(mapped.loadControl !== undefined && { loadControl: mapped.loadControl }),
      ...(regoPolicy !== undefined && { regoPolicy }),
      ...(mapped.elicitation !== undefined && { elicitation: mapped.elicitation }),
      ...(mapped.approvalRequired !== undefined && { approvalRequired: mapped.approvalRequired }),
    };
    next = { ...filters, servers: mapped.servers ?? {} };
  } catch (error) {
    // The pin store may have changed (`pins accept`) whatever the config says: check the listings again.
    await gateway.readmitPins();
    log(`reload failed, still running the previous config: ${error instanceof Error ? error.message : String(error)}`);
    return unchanged;
  }
  let report: ReconfigureReport;
  try {
    report = await gateway.reconfigure(next);
  } catch (error) {
    await gateway.readmitPins();
    log(`reload failed, still running the previous config: ${error instanceof Error ? error.message : String(error)}`);
    return unchanged;
  }
  for (const name of report.added) log(`reload: server "${name}" added with ${report.tools[name] ?? 0} tools`);
  for (const name of report.repointed) {
    log(`reload: server "${name}" re-pointed, now with ${report.tools[name] ?? 0} tools`);
  }
  for (const name of report.removed) log(`reload: server "${name}" removed`);
  for (const failure of report.failed) log(`reload: server "${failure.name}" failed to start: ${failure.reason}`);
  log(
    `reloaded: filters rebuilt; ${report.added.length} added, ${report.repointed.length} re-pointed, ${report.removed.length} removed, ${report.failed.length} failed`,
  );
  return {
    applied: true,
    added: report.added,
    repointed: report.repointed,
    removed: report.removed,
    failed: report.failed.map((failure) => failure.name),
  };
}
