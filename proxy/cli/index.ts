/**
 * The command-line entry: `extensible-mcp`, `mcp-elicitation-proxy`, `add-server`, `pins`, the pid file
 * and live reload. The composition root of the CLI process; not part of the library entry.
 */

export {
  acquirePidFile,
  checkPidFile,
  type PidFileCheck,
  pidFilePath,
  processStartTime,
  signalRunningProxy,
} from '../pid-file';
export {
  PINS_EXIT,
  type PinsIo,
  type PinsTarget,
  type RunPinsCommandOptions,
  runPinsCommand,
} from '../pins/pins-command';
export { type AddServerIo, addServerToConfig, runAddServer, type Verification, verifyServer } from './add-server';
export { type ProxyEnv, readProxyEnv } from './env';
export { type ReloadReport, reloadServers } from './reload-servers';
export { runCli } from './run-cli';
export { pinsHelp, type RunPinsOptions, runPins } from './run-pins';
export { runTransparentCli, TRANSPARENT_EXIT, type TransparentCliIo } from './run-transparent-cli';
