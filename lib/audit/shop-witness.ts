import { join, resolve } from 'node:path';
import type { CallToolResult } from '@modelcontextprotocol/client';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { compactVerify } from 'jose';
import { Agent } from 'undici';
import { z } from 'zod';
import { defaultConnectTimeoutMs } from '../../proxy/index';
import { AuditError } from './audit-error';
import { parseJson } from './parse-json';
import type { Witness, WitnessedCheckpoint, WitnessReceipt } from './witness';

/** Where the shop's witness endpoint is: a `--witness` stdio child of the shop, or its `/witness` URL. */
export type ShopWitnessEndpoint =
  | {
      readonly kind: 'stdio';
      readonly command: string;
      readonly args: readonly string[];
      readonly env: Readonly<Record<string, string>>;
    }
  | { readonly kind: 'http'; readonly url: string };

/**
 * The shop's witness endpoint as the operator configured the shop: `/witness` beside `PIZZA_URL`
 * (its own organisation's disk, in docker), else a `--witness` stdio child of the shop on the shop's
 * data folder — which in the default demo sits inside the household's own (docs/audit.md says what
 * that does and does not protect against).
 */
export function shopWitnessEndpoint(env: {
  readonly dataDir: string;
  readonly pizzaWitnessUrl?: string;
}): ShopWitnessEndpoint {
  if (env.pizzaWitnessUrl !== undefined) return { kind: 'http', url: env.pizzaWitnessUrl };
  return {
    kind: 'stdio',
    command: process.execPath,
    args: ['--import', 'tsx', resolve('shop-agent/main.ts'), '--witness'],
    env: { SHOP_AGENT_DATA: join(env.dataDir, 'shop') },
  };
}

/** Options of {@link createShopWitness}. */
export interface ShopWitnessOptions {
  readonly endpoint: ShopWitnessEndpoint;
  /** The household admin's public key, handed over with each checkpoint (the shop pins it per DID). */
  readonly adminJwk: Readonly<Record<string, string>>;
  /** The merchant's pinned key, to check the shop's countersignatures; absent → not checked (yet unknown). */
  readonly merchantJwk?: () => Promise<Readonly<Record<string, string>> | undefined>;
  /** Lines the witness child writes to stderr (its JSON log). */
  readonly log?: (line: string) => void;
}

const Held = z.object({
  householdDid: z.string(),
  rowId: z.number().int().min(0),
  hash: z.string(),
  credential: z.string(),
  countersignature: z.string(),
});
const Latest = z.object({ checkpoint: Held.nullable() });
const Submitted = z.object({ countersignature: z.string() });
const Countersigned = z.object({
  vc: z.object({
    type: z.array(z.string()).refine((types) => types.includes('AuditCheckpointWitnessed')),
    credentialSubject: z.object({ householdDid: z.string(), rowId: z.number(), hash: z.string() }),
  }),
});

/**
 * The shop as the household's audit witness (SPEC §8, issue 26), reached from operator code over
 * the shop's own witness endpoint — never through the household's proxy, whose `pizza` server is the
 * shop's model-facing `/mcp` (or stdio child) and carries no witness tool. One MCP connection,
 * opened on first use and reopened after a fault. Over HTTP its connections time out as the
 * proxy's downstreams do (30 s, the lookup of a restarted shop container's name included), not
 * after undici's global 10 s.
 */
export function createShopWitness(options: ShopWitnessOptions): Witness {
  let client: Promise<Client> | undefined;
  const { endpoint } = options;
  const agent = endpoint.kind === 'http' ? new Agent({ connect: { timeout: defaultConnectTimeoutMs } }) : undefined;
  const connect = async (): Promise<Client> => {
    const transport =
      endpoint.kind === 'http'
        ? new StreamableHTTPClientTransport(new URL(endpoint.url), {
            // Node's fetch takes the pool as `dispatcher`, which the RequestInit type does not declare.
            fetch: (input, init) => fetch(input, { ...init, dispatcher: agent } as RequestInit),
          })
        : new StdioClientTransport({
            command: endpoint.command,
            args: [...endpoint.args],
            env: { ...endpoint.env },
            stderr: 'pipe',
          });
    if (transport instanceof StdioClientTransport) {
      transport.stderr?.on('data', (chunk: Buffer) => {
        for (const line of chunk.toString('utf8').split('\n')) if (line.trim()) options.log?.(line.trimEnd());
      });
    }
    const connected = new Client({ name: 'household-audit-witness', version: '0.1.0' });
    await connected.connect(transport);
    return connected;
  };
  const call = async (tool: string, args: Record<string, unknown>): Promise<CallToolResult> => {
    client ??= connect();
    try {
      return (await (await client).callTool({ name: tool, arguments: args })) as CallToolResult;
    } catch (error) {
      const failed = client;
      client = undefined;
      void failed?.then((open) => open.close()).catch(() => undefined);
      throw new AuditError('witness-unreachable', `the shop's witness did not answer ${tool}`, { cause: error });
    }
  };
  const textOf = (result: CallToolResult): string =>
    result.content.map((part) => (part.type === 'text' ? part.text : '')).join('\n');
  const checkCountersignature = async (held: z.infer<typeof Held>): Promise<void> => {
    const jwk = await options.merchantJwk?.();
    if (jwk === undefined) return;
    try {
      const verified = await compactVerify(
        held.countersignature,
        { ...jwk, alg: 'EdDSA' },
        { algorithms: ['EdDSA', 'Ed25519'] },
      );
      const claims = Countersigned.parse(parseJson(new TextDecoder().decode(verified.payload)));
      const subject = claims.vc.credentialSubject;
      if (subject.householdDid === held.householdDid && subject.rowId === held.rowId && subject.hash === held.hash)
        return;
    } catch {
      // Falls through to the refusal below.
    }
    throw new AuditError(
      'witness-damaged',
      `the shop's countersignature on row ${held.rowId} does not verify with the pinned merchant key`,
    );
  };
  return {
    name: 'shop',
    async submit(checkpoint): Promise<WitnessReceipt> {
      const result = await call('witness_submit', { checkpoint, adminJwk: options.adminJwk });
      if (result.isError) return { accepted: false, reason: textOf(result) };
      const answer = Submitted.safeParse(result.structuredContent);
      if (!answer.success)
        throw new AuditError('witness-damaged', 'the shop answered witness_submit without a countersignature');
      return { accepted: true, countersignature: answer.data.countersignature };
    },
    async latest(householdDid): Promise<WitnessedCheckpoint | undefined> {
      const result = await call('witness_latest', { householdDid });
      if (result.isError)
        throw new AuditError('witness-unreachable', `the shop's witness refused witness_latest: ${textOf(result)}`);
      const answer = Latest.safeParse(result.structuredContent);
      if (!answer.success)
        throw new AuditError('witness-damaged', 'the shop answered witness_latest with something else');
      const held = answer.data.checkpoint;
      if (held === null) return undefined;
      if (held.householdDid !== householdDid)
        throw new AuditError('witness-damaged', 'the shop answered for another household');
      await checkCountersignature(held);
      return held;
    },
    async close() {
      const open = client;
      client = undefined;
      await open?.then((connected) => connected.close()).catch(() => undefined);
      await agent?.destroy().catch(() => undefined);
    },
  };
}
