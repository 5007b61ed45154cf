/**
 * The chat's contract (SPEC §8): what the web app renders and sends. Agent turns run server-side,
 * detached from any HTTP request; the page renders the session's event stream, so a reload
 * loses nothing.
 */

/** One thing that happened in a chat session, in order. `id` increases per session (SSE `id:`). */
export type ChatEvent = { readonly id: number; readonly at: string } & ChatEventBody;

/** The event kinds the chat page renders. */
export type ChatEventBody =
  | { readonly type: 'user-message'; readonly text: string }
  /** Streamed assistant text; consecutive deltas of one message share `messageId`. */
  | { readonly type: 'assistant-text'; readonly messageId: string; readonly delta: string }
  | { readonly type: 'tool-call'; readonly callId: string; readonly tool: string; readonly summary: string }
  | {
      readonly type: 'tool-result';
      readonly callId: string;
      readonly tool: string;
      readonly isError: boolean;
      /** One line a person can read ("the shop signed an invoice for $15.00"). */
      readonly summary: string;
    }
  /** A merchant-signed invoice arrived: the terms decoded from the signed bytes. */
  | {
      readonly type: 'order';
      readonly invoiceId: string;
      readonly merchantName: string;
      readonly merchantDid: string;
      readonly items: ReadonlyArray<{ readonly name: string; readonly qty: number; readonly unitPriceCents: number }>;
      readonly totalCents: number;
      readonly deliverTo: string;
      readonly expiresAt: string;
    }
  /** Where an approval stands; sent on every change. */
  | {
      readonly type: 'approval';
      readonly approvalId: string;
      readonly invoiceId: string;
      readonly status: 'pending' | 'approved' | 'declined' | 'expired' | 'settled' | 'fulfilled';
      readonly requiredRoles: readonly ('child' | 'parent')[];
      readonly approvedRoles: readonly ('child' | 'parent')[];
      readonly approveUrls: Readonly<Partial<Record<'child' | 'parent', string>>>;
      readonly reason?: string;
      /** The parent's standing allowance that stands in for the parent's approval, and what it leaves. */
      readonly allowance?: {
        readonly allowanceId: string;
        readonly period: 'day' | 'week';
        readonly remainingCents: number;
      };
      /** What the household calls its members (set in the parent's window); a member without a name is absent. */
      readonly members?: Readonly<Partial<Record<'child' | 'parent', string>>>;
      /**
       * Approved on the parent's allowance alone, which the charge then found no longer covers it
       * (its budget spent, revoked, or otherwise): the request asks the parent now.
       */
      readonly handover?: {
        readonly cause: 'budget-spent' | 'revoked' | 'not-covered';
        readonly period?: 'day' | 'week';
        readonly at: string;
      };
    }
  | {
      readonly type: 'receipt';
      readonly invoiceId: string;
      readonly paymentRef: string;
      readonly amountCents: number;
      readonly etaMinutes?: number;
    }
  /** The proxy asks the human for a missing field (MCP form elicitation). */
  | {
      readonly type: 'elicitation';
      readonly elicitationId: string;
      readonly message: string;
      readonly fields: ReadonlyArray<{ readonly name: string; readonly title: string; readonly required: boolean }>;
    }
  | {
      readonly type: 'elicitation-closed';
      readonly elicitationId: string;
      readonly action: 'accept' | 'decline' | 'cancel';
    }
  /**
   * An attack-console move's result (SPEC §8): what it tried, and each refusal in the words of whoever
   * refused it (the proxy, the policy, the household or the shop). `needs-evidence`: the move needs an
   * approval only a person can give and the household has none yet (`reason` says what to do first).
   * `not-refused`: a guarded step went through, a defect shown as such. `incomplete`: it never reached
   * the step it attacks (e.g. the shop was down).
   */
  | {
      readonly type: 'attack';
      readonly move: string;
      readonly attempt: string;
      readonly outcome: 'refused' | 'needs-evidence' | 'not-refused' | 'incomplete';
      /** The first refusal, or what went through, or what is needed first. */
      readonly reason: string;
      /** Every refusal of the move, in order, with the step (tool) that returned it. */
      readonly refusals: ReadonlyArray<{ readonly step: string; readonly reason: string }>;
      /** Whether any payment of the move succeeded (never, unless something is broken). */
      readonly charged: boolean;
    }
  | { readonly type: 'turn-started' }
  | { readonly type: 'turn-ended'; readonly reason: 'done' | 'error' | 'rounds-exhausted' }
  | { readonly type: 'error'; readonly message: string };

/** Which agent drives the chat. */
export type PlannerInfo = { readonly kind: 'claude'; readonly model: string } | { readonly kind: 'offline' };

/** The chat service the app's route handlers call (one per server process). */
export interface ChatService {
  readonly planner: PlannerInfo;
  /**
   * A new chat session with its own MCP session on the embedded proxy (its own discovery gate),
   * and the secret that opens it: 256 random bits, handed out once, kept only as a hash. The
   * session id is not a credential (it appears in the live log); the secret is.
   */
  createSession(): Promise<{ readonly sessionId: string; readonly secret: string }>;
  /** Whether the session exists. */
  hasSession(sessionId: string): Promise<boolean>;
  /** The session `secret` opens, or `undefined` (unknown, forged, or a session of an older version). */
  sessionOf(secret: string): Promise<string | undefined>;
  /** Appends the user's message and starts a server-side turn; returns at once. One turn at a time per session. */
  send(sessionId: string, text: string): Promise<{ readonly accepted: boolean; readonly reason?: string }>;
  /** Events after `afterId` (0 = all), then live ones until `signal` aborts. */
  events(
    sessionId: string,
    options: { readonly afterId: number; readonly signal: AbortSignal },
  ): AsyncIterable<ChatEvent>;
  /** Answers a pending elicitation form of this session. */
  answerElicitation(
    sessionId: string,
    answer: {
      readonly elicitationId: string;
      readonly action: 'accept' | 'decline' | 'cancel';
      readonly content?: Readonly<Record<string, string>>;
    },
  ): Promise<{ readonly accepted: boolean; readonly reason?: string }>;
  close(): Promise<void>;
}
