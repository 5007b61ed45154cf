import { join } from 'node:path';
import { acquirePidFile, type Gateway, type HeldPidFile, ProxyError } from '../proxy/index';
import { storeFileName } from './start-identity';

/**
 * What the household's pid file is named after: its store in the data folder, so the file is
 * `household.sqlite.pid` beside it, and `npm run household -- pins accept` finds the app serving
 * that folder the way `extensible-mcp pins` finds the proxy serving a config.
 */
export function householdPidTarget(dataDir: string): string {
  return join(dataDir, storeFileName);
}

/** The household's hold on its pid file; {@link HouseholdPidFile.release} lets go of it. */
export interface HouseholdPidFile {
  /** Stops listening for SIGHUP and removes the pid file if it is still this process's. */
  release(): void;
}

/**
 * Makes the process that holds the household runtime reachable by the operator's pins commands
 * (docs/pinning.md, issue 30): on SIGHUP it checks every connected server's last listing against
 * the store again (`Gateway.readmitPins`), so an accepted shop tool is found and called without a
 * restart; and it writes its pid file in the data folder. The handler is installed before the file
 * exists, in the same tick, since SIGHUP's default action would kill the app. A second household on
 * the same data folder says so and runs without the file (the first one is signalled). The file is
 * removed at `release` and at the process's exit; a stale one (its process gone) is never signalled.
 */
export function holdHouseholdPidFile(options: {
  readonly gateway: Pick<Gateway, 'readmitPins'>;
  readonly dataDir: string;
  readonly log: (line: string) => void;
}): HouseholdPidFile {
  const { gateway, log } = options;
  // Re-checks run one at a time: two quick decisions re-check twice, in order.
  let rechecking: Promise<void> = Promise.resolve();
  const onHangup = () => {
    rechecking = rechecking.then(
      () =>
        gateway.readmitPins().then(
          () => log("pins: SIGHUP: re-checked the shop's listing against the household store"),
          (error: unknown) => log(`pins: SIGHUP: re-check failed: ${String(error)}`),
        ),
      () => undefined,
    );
  };
  process.on('SIGHUP', onHangup);
  let pidFile: HeldPidFile | undefined;
  try {
    pidFile = acquirePidFile(householdPidTarget(options.dataDir));
  } catch (error) {
    if (!ProxyError.isInstance(error)) {
      process.off('SIGHUP', onHangup);
      throw error;
    }
    log(
      `another process holds the household's pid file in ${options.dataDir}: pins decisions signal that one; this one re-checks its pins at its own SIGHUP`,
    );
  }
  const onExit = () => pidFile?.release();
  process.on('exit', onExit);
  return {
    release() {
      process.off('SIGHUP', onHangup);
      process.off('exit', onExit);
      pidFile?.release();
    },
  };
}
