/** Tool-definition pinning (SPEC §3.13, docs/pinning.md): the rule, the diff and the stores. */
export type {
  Admission,
  DecisionReport,
  DefinitionChange,
  HeldTool,
  HoldReason,
  PendingPin,
  PinDecision,
  PinSource,
  PinStatus,
  PinStore,
  ServerPins,
  ToolPin,
} from './types';
