import type { CallToolResult } from '@modelcontextprotocol/server';
import { McpServer } from '@modelcontextprotocol/server';
import { z } from 'zod';
import type { ShopLog, ShopOutcome } from './shop.js';
import { type CheckpointWitness, WitnessSubmitInput } from './witness.js';

/** The names of the witness tools: never among the tools of {@link createShopServer}'s model-facing server. */
export const WITNESS_TOOL_NAMES = ['witness_submit', 'witness_latest'] as const;

const LatestInput = z.strictObject({ householdDid: z.string().min(1).max(500) });

/**
 * The shop's witness as its own MCP server (issue 26), separate from the model-facing shop server:
 * served on stdio by `main.ts --witness` and over HTTP at `/witness`, never at `/mcp`. A household
 * reaches it from operator code (its checkpointer, `npm run audit:verify -- --witness shop`), never
 * through its proxy, so no model session can see or call these tools.
 */
export function createWitnessServer(options: { witness: CheckpointWitness; log?: ShopLog }): McpServer {
  const { witness } = options;
  const log: ShopLog = options.log ?? (() => {});
  const server = new McpServer(
    { name: 'pizza-shop-witness', version: '0.1.0' },
    {
      instructions:
        'Audit witness of the pizza shop, for household operators: witness_submit hands over an admin-signed ' +
        'AuditCheckpoint (verified, kept, countersigned); witness_latest returns the newest one held for a household DID.',
    },
  );
  const run = async <T>(
    tool: string,
    work: () => Promise<ShopOutcome<T>> | ShopOutcome<T>,
  ): Promise<CallToolResult> => {
    try {
      const outcome = await work();
      if (outcome.ok) {
        const value = outcome.value as Record<string, unknown>;
        return { content: [{ type: 'text', text: JSON.stringify(value) }], structuredContent: value };
      }
      log('witness-refused', { tool, reason: outcome.reason });
      return {
        isError: true,
        content: [{ type: 'text', text: outcome.reason }],
        structuredContent: { error: outcome.reason },
      };
    } catch (error) {
      log('tool-fault', { tool, error: error instanceof Error ? `${error.name}: ${error.message}` : 'unknown' });
      return {
        isError: true,
        content: [{ type: 'text', text: `The witness could not complete ${tool}: internal error.` }],
      };
    }
  };
  server.registerTool(
    'witness_submit',
    {
      description:
        "Hand over one admin-signed AuditCheckpoint with the household admin's public key; returns the shop's countersignature.",
      inputSchema: WitnessSubmitInput,
    },
    (input) => run('witness_submit', () => witness.submit(input)),
  );
  server.registerTool(
    'witness_latest',
    {
      description: 'The newest checkpoint the shop holds for a household DID, with its countersignature.',
      inputSchema: LatestInput,
    },
    (input) => run('witness_latest', () => witness.latest(input.householdDid)),
  );
  return server;
}
