/**
 * A stdio MCP server that can die in the middle of a call, for the no-replay tests (SPEC §3.2).
 * Usage: `node --import tsx mortal-stdio-server.ts <state-dir> [max-starts]`. Every start appends
 * the process id to `<state-dir>/starts`; a start beyond `max-starts` exits before speaking MCP
 * (so a restart fails to connect). Every `work` call appends its label to `<state-dir>/calls`
 * before doing anything else, so a test can count how often the tool really ran; with `delayMs`
 * it then takes that long to answer.
 */
import { appendFileSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { McpServer } from '@modelcontextprotocol/server';
import { StdioServerTransport } from '@modelcontextprotocol/server/stdio';
import { z } from 'zod';

const [stateDirectory, maxStartsArgument] = process.argv.slice(2);
if (stateDirectory === undefined) {
  process.stderr.write('usage: mortal-stdio-server.ts <state-dir> [max-starts]\n');
  process.exit(2);
}
const startsFile = join(stateDirectory, 'starts');
const callsFile = join(stateDirectory, 'calls');
appendFileSync(startsFile, `${process.pid}\n`);
const starts = readFileSync(startsFile, 'utf8').trim().split('\n').length;
if (maxStartsArgument !== undefined && starts > Number(maxStartsArgument)) process.exit(3);

const server = new McpServer({ name: 'mortal', version: '1.0.0' });
server.registerTool(
  'work',
  {
    description: 'Does one unit of work and records it; with die set, the process exits before answering',
    inputSchema: z.object({ label: z.string(), die: z.boolean().optional(), delayMs: z.number().optional() }),
  },
  async (args) => {
    // Recorded first: the work "happened" even if the answer never leaves the process.
    appendFileSync(callsFile, `${args.label}\n`);
    if (args.die) process.exit(1);
    if (args.delayMs) await new Promise((resolve) => setTimeout(resolve, args.delayMs));
    return { content: [{ type: 'text', text: `done ${args.label} by ${process.pid}` }] };
  },
);
await server.connect(new StdioServerTransport());
