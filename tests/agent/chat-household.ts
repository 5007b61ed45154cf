/**
 * The chat on the composed household: `startTestHousehold` (the real shop over stdio, payments under
 * family-spend, both members enrolled with software authenticators) plus a chat service on it, and
 * a transcript reader that waits on events (never on time).
 */
import type { Role } from '../../identity/index';
import { type ChatServiceOptions, createChatService } from '../../lib/agent/create-chat-service';
import type { ChatEvent, ChatService } from '../../lib/agent/types';
import type { PaymentRail } from '../../lib/payments/rail';
import { startTestHousehold, type TestHousehold } from '../payments/household';

/** A household with a chat service on it. */
export interface ChatHousehold {
  readonly household: TestHousehold;
  readonly chat: ChatService;
  /** A new chat session and a transcript reading its events from the start. */
  session(): Promise<Transcript>;
  /** The member approves the request with their passkey (the approval window's ceremony, headless). */
  approve(role: Role, approvalId: string): Promise<void>;
  close(): Promise<void>;
}

/** Starts the household and a chat service (offline unless `anthropic` is given; the mock rail unless `rail` is). */
export async function startChatHousehold(
  options: Pick<ChatServiceOptions, 'anthropic' | 'store' | 'maxToolRounds' | 'maxLiveSessions'> & {
    /** The household's payment rail (default: the mock rail). */
    rail?: PaymentRail;
  } = {},
): Promise<ChatHousehold> {
  const { rail, ...chatOptions } = options;
  const household = await startTestHousehold(rail ? { rail } : {});
  const chat = createChatService({ runtime: household.runtime, ...chatOptions });
  const transcripts: Transcript[] = [];
  return {
    household,
    chat,
    async session() {
      const { sessionId } = await chat.createSession();
      const transcript = readTranscript(chat, sessionId);
      transcripts.push(transcript);
      return transcript;
    },
    approve: (role, approvalId) => household.approveAs(role, approvalId),
    async close() {
      for (const transcript of transcripts) transcript.stop();
      await chat.close();
      await household.close();
    },
  };
}

/** Everything a session logged so far, and a way to wait for the next thing. */
export interface Transcript {
  readonly sessionId: string;
  readonly events: ChatEvent[];
  /** Resolves with the first event (at index `from` or later) matching `predicate`, as soon as it is logged. */
  waitFor<T extends ChatEvent>(predicate: (event: ChatEvent) => event is T, from?: number): Promise<T>;
  waitFor(predicate: (event: ChatEvent) => boolean, from?: number): Promise<ChatEvent>;
  /** Sends a message and waits for that turn's 'turn-ended'; returns the events of the turn. */
  turn(text: string): Promise<ChatEvent[]>;
  /** The assistant's words in `events`, concatenated. */
  text(events?: readonly ChatEvent[]): string;
  stop(): void;
}

/** Reads a session's events into an array from id 0 until stopped. */
export function readTranscript(chat: ChatService, sessionId: string): Transcript {
  const events: ChatEvent[] = [];
  const controller = new AbortController();
  const waiters = new Set<() => void>();
  let failure: unknown;
  void (async () => {
    try {
      for await (const event of chat.events(sessionId, { afterId: 0, signal: controller.signal })) {
        events.push(event);
        for (const wake of waiters) wake();
      }
    } catch (error) {
      failure = error;
      for (const wake of waiters) wake();
    }
  })();

  function waitFor(predicate: (event: ChatEvent) => boolean, from = 0): Promise<ChatEvent> {
    return new Promise((resolve, reject) => {
      const check = () => {
        const found = events.slice(from).find(predicate);
        if (found !== undefined) {
          waiters.delete(check);
          resolve(found);
        } else if (failure !== undefined) {
          waiters.delete(check);
          reject(failure);
        }
      };
      waiters.add(check);
      check();
    });
  }

  const transcript: Transcript = {
    sessionId,
    events,
    waitFor: waitFor as Transcript['waitFor'],
    async turn(text) {
      const from = events.length;
      const sent = await chat.send(sessionId, text);
      if (!sent.accepted) throw new Error(`not accepted: ${sent.reason}`);
      await waitFor((event) => event.type === 'turn-ended', from);
      return events.slice(from);
    },
    text(list = events) {
      return list.map((event) => (event.type === 'assistant-text' ? event.delta : '')).join('');
    },
    stop: () => controller.abort(),
  };
  return transcript;
}

/** Narrowing predicates for the event kinds the tests wait on. */
export const is = {
  approval:
    (status: Extract<ChatEvent, { type: 'approval' }>['status']) =>
    (event: ChatEvent): event is Extract<ChatEvent, { type: 'approval' }> =>
      event.type === 'approval' && event.status === status,
  order: (event: ChatEvent): event is Extract<ChatEvent, { type: 'order' }> => event.type === 'order',
  receipt: (event: ChatEvent): event is Extract<ChatEvent, { type: 'receipt' }> => event.type === 'receipt',
  elicitation: (event: ChatEvent): event is Extract<ChatEvent, { type: 'elicitation' }> => event.type === 'elicitation',
  turnEnded: (event: ChatEvent): event is Extract<ChatEvent, { type: 'turn-ended' }> => event.type === 'turn-ended',
};
