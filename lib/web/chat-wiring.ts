import { createChatService } from '../agent/create-chat-service';
import type { ChatService } from '../agent/types';
import type { HouseholdEnv } from '../env';
import type { HouseholdRuntime } from '../runtime';

/**
 * The chat service of the app process: the one place the agent is wired to the household — Claude
 * when `ANTHROPIC_API_KEY` is set, else the offline planner, each chat with its own MCP session on
 * the runtime's gateway.
 */
export function createAppChatService(runtime: HouseholdRuntime, env: HouseholdEnv): ChatService {
  return createChatService({
    runtime,
    // Sessions and their event logs live in the household file: a restart loses no conversation.
    store: runtime.identity.store.chat,
    // Turns are leased in the same store: an order whose instance died is finished by another, or by the restart.
    leases: runtime.identity.store.turnLeases,
    ...(env.anthropicApiKey === undefined
      ? {}
      : {
          anthropic: {
            apiKey: env.anthropicApiKey,
            ...(env.anthropicModel === undefined ? {} : { model: env.anthropicModel }),
          },
        }),
    onError: (error) => console.error('chat turn fault', error),
  });
}
