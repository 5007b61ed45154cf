import type { Tool } from '@modelcontextprotocol/server';
import { safeJsonParse } from '../policy/safe-json';
import { diffDefinitions } from './diff-definitions';
import { pinDefinition } from './pin-definition';
import type { Admission, HeldTool, ServerPins, ToolPin } from './types';

/** Options of {@link admit} beyond the listing and the pins. */
export interface AdmitOptions {
  /** Milliseconds since the epoch, for first pins; tests inject a clock. */
  readonly now?: () => number;
}

/**
 * Decides which of a server's listed tools may be indexed (SPEC §3.13, docs/pinning.md). Pure:
 * the caller writes `firstPins` and records `held`.
 *
 * 1. A server never listed before has its whole listing pinned, and nothing is held.
 * 2. Otherwise a tool whose definition hashes to its pin is admitted; one the operator rejected
 *    is held as `rejected`; one with another pin is held as `changed`; a name with no pin (added,
 *    or renamed) is held as `new`.
 */
export function admit(
  server: string,
  listed: readonly Tool[],
  pins: ServerPins,
  options: AdmitOptions = {},
): Admission {
  // 1. First listing: trust on first use, for the whole server at once.
  if (!pins.known) {
    const pinnedAt = (options.now ?? Date.now)();
    const firstPins = listed.map((tool): ToolPin => {
      const { canonical, hash } = pinDefinition(tool);
      return { server, tool: tool.name, hash, definition: canonical, source: 'first-listing', pinnedAt };
    });
    return { admitted: [...listed], held: [], firstPins, first: true };
  }
  // 2. Every tool is checked against its own pin; the others keep working whatever one does.
  const admitted: Tool[] = [];
  const held: HeldTool[] = [];
  for (const tool of listed) {
    const { canonical, hash } = pinDefinition(tool);
    const pin = pins.pins.get(tool.name);
    if (pin?.hash === hash) {
      admitted.push(tool);
      continue;
    }
    const base = { tool: tool.name, definition: canonical };
    if (pins.rejected.get(tool.name)?.has(hash)) {
      held.push({ ...base, reason: 'rejected', diff: changesFrom(pin, tool), hashes: hashes(pin, hash) });
    } else if (pin === undefined) {
      held.push({ ...base, reason: 'new', diff: [], hashes: { listed: hash } });
    } else {
      held.push({ ...base, reason: 'changed', diff: changesFrom(pin, tool), hashes: hashes(pin, hash) });
    }
  }
  return { admitted, held, firstPins: [], first: false };
}

function hashes(pin: ToolPin | undefined, listed: string): HeldTool['hashes'] {
  return pin === undefined ? { listed } : { pinned: pin.hash, listed };
}

/** The diff against the pinned definition; a hash-only pin (a `pins` file) is one change of the whole. */
function changesFrom(pin: ToolPin | undefined, tool: Tool): HeldTool['diff'] {
  if (pin === undefined) return [];
  const parsed = pin.definition === undefined ? undefined : safeJsonParse(pin.definition);
  if (parsed === undefined || !parsed.ok) return [{ path: '', change: 'changed' }];
  return diffDefinitions(parsed.value, tool);
}
