import type { CallToolResult, Tool } from '@modelcontextprotocol/server';
import { ProxyError } from '../errors';
import { credentialArguments } from '../policy/fetch-plan';
import type { Governance, ProxyLogger } from './create-gateway';
import { scopeDigest } from './discovery-scope';
import type { Registry } from './registry';
import type { Search } from './search';
import type { CallContext, CallInput, CallRequest, EventHook, ServerFacts } from './types';

/** Options of {@link createStamping}. */
export interface StampingOptions {
  /** The index: what a qualified name names. */
  readonly tools: Pick<Search, 'find'>;
  /** The registry: which servers are connected, and their facts. */
  readonly servers: Pick<Registry, 'facts'>;
  /** Which bundle governs which server: its credential fields are stamped on the call. */
  readonly governance?: Governance;
  readonly logger: ProxyLogger;
  readonly emit: EventHook;
}

/** Turns a call's input into the stamped request every call filter reads. */
export interface Stamping {
  /**
   * The stamp of `input`, or the refusal of the call when it cannot be made (fail closed): the
   * host's route resolver and a transparent face's listing run here.
   */
  stampOrRefuse(input: CallInput, context: CallContext): Promise<CallRequest | CallToolResult>;
}

function elapsedUs(start: bigint): number {
  return Number((process.hrtime.bigint() - start) / 1000n);
}

/**
 * The gateway's stamping (SPEC §3.12): what filters see of a call is what the gateway vouches for
 * (qualified and bare tool name, input schema, the server's `{name, url, admission}`, the
 * governing bundle's credential fields), never what the caller claims.
 */
export function createStamping(options: StampingOptions): Stamping {
  const { tools, servers, governance, logger, emit } = options;

  async function credentialFieldsOf(server: ServerFacts): Promise<readonly string[]> {
    if (!governance) return [];
    const route = await governance.resolve(server);
    const governed =
      route.kind === 'bundle' && Object.hasOwn(governance.bundles, route.bundle)
        ? governance.bundles[route.bundle]
        : undefined;
    return governed ? credentialArguments(governed.bundle.fetchPlan) : [];
  }

  /** What the gateway knows about `tool` for this session: the stamp every filter reads. */
  async function stamp(input: CallInput, context: CallContext): Promise<CallRequest> {
    let server: ServerFacts | undefined;
    let toolName: string | undefined;
    let inputSchema: Tool['inputSchema'] | undefined;
    let hasOutputSchema = false;
    const connection = context.listing;
    if (connection !== undefined) {
      const listed = await connection.find(input.tool);
      if (listed) {
        server = connection.facts;
        toolName = listed.name;
        inputSchema = listed.inputSchema;
        hasOutputSchema = listed.outputSchema !== undefined;
      }
    } else {
      const indexed = tools.find(input.tool);
      const facts = indexed?.server === undefined ? undefined : servers.facts(indexed.server);
      if (indexed && (indexed.server === undefined || facts)) {
        server = facts;
        toolName = indexed.toolName;
        inputSchema = indexed.inputSchema;
        hasOutputSchema = indexed.hasOutputSchema;
      }
    }
    return {
      tool: input.tool,
      toolName,
      server,
      arguments: input.arguments,
      ...(inputSchema !== undefined && { inputSchema }),
      hasOutputSchema,
      credentialFields: server ? await credentialFieldsOf(server) : [],
    };
  }

  return {
    /**
     * {@link stamp} inside the fail-closed rule: the host's route resolver and a transparent face's
     * listing run there, and a fault in either refuses the call, logged with its cause and reported
     * as an event; the caller sees a ProxyError's message, else a generic reason.
     */
    async stampOrRefuse(input, context) {
      const start = process.hrtime.bigint();
      try {
        return await stamp(input, context);
      } catch (error) {
        logger.error(`looking up tool ${input.tool} failed`, error);
        const reason = ProxyError.isInstance(error)
          ? error.message
          : `Refused: the proxy could not look up "${input.tool}", so the call was blocked (fail closed).`;
        emit({
          ts: new Date().toISOString(),
          principal: context.principal.id,
          scope: scopeDigest(context.principal, context.scope),
          pipeline: 'call',
          filter: 'stamp',
          tool: input.tool,
          decision: 'error',
          reason,
          durationUs: elapsedUs(start),
        });
        return { content: [{ type: 'text', text: reason }], isError: true };
      }
    },
  };
}
