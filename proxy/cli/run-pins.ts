import { existsSync } from 'node:fs';
import { resolveConfigPath } from '../config';
import { ProxyError } from '../errors';
import { signalRunningProxy } from '../pid-file';
import { type PinsIo, type PinsTarget, runPinsCommand } from '../pins/pins-command';
import { openPostgresPinStore } from '../pins/postgres-pin-store';
import { openSqlitePinStore } from '../pins/sqlite-pin-store';
import type { ProxyEnv } from './env';
import { parseStoreUrl } from './store-url';

/** Options of {@link runPins}. */
export interface RunPinsOptions {
  /** The arguments after `pins`. */
  readonly argv: readonly string[];
  readonly env: ProxyEnv;
  readonly io: PinsIo;
}

/** The help of `extensible-mcp pins`. */
export const pinsHelp = `extensible-mcp pins: review tool definitions held by the proxy (docs/pinning.md).

Usage:
  extensible-mcp pins list [--json]                  every tool's state (--json: with full hashes)
  extensible-mcp pins diff <server> [tool]           what changed in each pending definition
  extensible-mcp pins accept <server> (<tool> | --all)
                                                     the pending definition becomes the pin
  extensible-mcp pins reject <server> [tool]         the pending definition is refused for good

Options (each command):
  --config FILE   The proxy's config (found as the proxy finds it).
  --store URL     The proxy's store (sqlite:FILE or postgres://…, also $EXTENSIBLE_MCP_STORE;
                  default: proxy.sqlite beside the config).

accept and reject then send SIGHUP to the proxy running on that config (its pid file), which
checks its servers' last listings against the store again: an accepted tool is searchable and
callable at once. Exit codes: 0 done, 1 nothing pending to decide (or to show), 2 bad usage or config.`;

/**
 * `extensible-mcp pins list | diff | accept | reject` (SPEC §3.13, docs/pinning.md): the
 * operator's review of held tool definitions, on the store the proxy uses, found as the proxy
 * finds it (`--store`, else beside the config). The only writer of a decision: no model-reachable
 * path holds a pin store. Exit codes: 0 done, 1 nothing pending, 2 bad usage or config.
 */
export async function runPins(options: RunPinsOptions): Promise<number> {
  return runPinsCommand({
    argv: options.argv,
    io: options.io,
    name: 'extensible-mcp pins',
    help: pinsHelp,
    open: (flags) => openProxyTarget(flags, options.env),
  });
}

/** The proxy's store, found as the proxy finds it; a decision is signalled to the proxy on that config. */
async function openProxyTarget(
  flags: { readonly config?: string; readonly store?: string },
  env: ProxyEnv,
): Promise<PinsTarget | string> {
  try {
    const configPath = resolveConfigPath({
      ...(flags.config !== undefined && { flag: flags.config }),
      ...(env.configPath !== undefined && { env: env.configPath }),
    });
    const location = parseStoreUrl(flags.store ?? env.store, configPath);
    if (location.kind === 'memory') {
      return 'a memory: store lives inside its proxy process only; pins commands need its sqlite:FILE store';
    }
    // Never create a store file here: a missing file means the wrong config or store, not an empty one.
    if (location.kind === 'sqlite' && !existsSync(location.path)) {
      return `no store at ${location.path}: has the proxy run with this config (or --store)?`;
    }
    const store =
      location.kind === 'sqlite'
        ? openSqlitePinStore({ path: location.path })
        : await openPostgresPinStore({ url: location.url });
    return {
      store,
      afterDecision() {
        const signal = signalRunningProxy(configPath);
        return signal.signalled
          ? `signalled the running proxy (pid ${signal.pid}); it checks its servers' listings against the store now`
          : `no running proxy signalled (pid file ${signal.reason}); the decision applies at its next start or SIGHUP`;
      },
      close: () => store.close(),
    };
  } catch (error) {
    if (ProxyError.isInstance(error)) return error.message;
    throw error;
  }
}
