/** Tool-definition pinning (SPEC §3.13, docs/pinning.md): the rule, the diff and the stores. */

export { type AdmitOptions, admit } from './admit';
export { diffDefinitions } from './diff-definitions';
export { type PinnedForm, pinDefinition } from './pin-definition';
export {
  PINS_EXIT,
  type PinsIo,
  type PinsTarget,
  type RunPinsCommandOptions,
  runPinsCommand,
} from './pins-command';
export { type PinsFile, readPinsFile, type SeedReport, seedPins } from './pins-file';
export {
  createPostgresPinStore,
  openPostgresPinStore,
  type PostgresPinStoreOptions,
  postgresPinStoreMigrations,
} from './postgres-pin-store';
export {
  createSqlitePinStore,
  openSqlitePinStore,
  pinStoreMigrations,
  type SqlitePinStoreOptions,
} from './sqlite-pin-store';
export type {
  Admission,
  DecisionReport,
  DefinitionChange,
  HeldDefinition,
  HeldTool,
  HoldReason,
  PinDecision,
  PinSource,
  PinStatus,
  PinStore,
  ServerPins,
  ToolPin,
} from './types';
