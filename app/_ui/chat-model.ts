import type { ChatEvent } from '@/lib/index';

type EventOf<Type extends ChatEvent['type']> = Extract<ChatEvent, { type: Type }>;
export type OrderEvent = EventOf<'order'>;
export type ApprovalEvent = EventOf<'approval'>;
export type ReceiptEvent = EventOf<'receipt'>;
export type ElicitationEvent = EventOf<'elicitation'>;
export type AttackEvent = EventOf<'attack'>;

/** One block of the conversation as the page draws it. */
export type ChatItem =
  | { readonly kind: 'user'; readonly key: string; readonly text: string }
  | { readonly kind: 'assistant'; readonly key: string; readonly messageId: string; readonly text: string }
  | {
      readonly kind: 'tool';
      readonly key: string;
      readonly callId: string;
      readonly tool: string;
      readonly summary: string;
      readonly result?: { readonly summary: string; readonly isError: boolean };
    }
  | {
      readonly kind: 'order';
      readonly key: string;
      readonly order: OrderEvent;
      readonly approval?: ApprovalEvent;
      readonly receipt?: ReceiptEvent;
    }
  | { readonly kind: 'receipt'; readonly key: string; readonly receipt: ReceiptEvent; readonly merchantName?: string }
  | {
      readonly kind: 'elicitation';
      readonly key: string;
      readonly form: ElicitationEvent;
      readonly closed?: 'accept' | 'decline' | 'cancel';
    }
  | { readonly kind: 'notice'; readonly key: string; readonly tone: 'error' | 'info'; readonly text: string }
  | { readonly kind: 'attack'; readonly key: string; readonly attack: AttackEvent };

/** The conversation so far, folded from the session's events. */
export interface ChatView {
  readonly items: readonly ChatItem[];
  /** A turn is running (the agent is working or waiting on an approval). */
  readonly busy: boolean;
  /** The highest event id applied: a replayed or duplicated event is ignored. */
  readonly lastId: number;
}

export const emptyChat: ChatView = { items: [], busy: false, lastId: 0 };

/** Folds one event into the view. Pure: events at or below `lastId` change nothing. */
export function applyChatEvent(view: ChatView, event: ChatEvent): ChatView {
  if (event.id <= view.lastId) return view;
  const next = { ...view, lastId: event.id };
  const key = `event-${event.id}`;
  const items = view.items;
  switch (event.type) {
    case 'user-message':
      return { ...next, items: [...items, { kind: 'user', key, text: event.text }] };
    case 'assistant-text': {
      const last = items.at(-1);
      if (last?.kind === 'assistant' && last.messageId === event.messageId) {
        return { ...next, items: [...items.slice(0, -1), { ...last, text: last.text + event.delta }] };
      }
      return {
        ...next,
        items: [...items, { kind: 'assistant', key, messageId: event.messageId, text: event.delta }],
      };
    }
    case 'tool-call':
      return {
        ...next,
        items: [...items, { kind: 'tool', key, callId: event.callId, tool: event.tool, summary: event.summary }],
      };
    case 'tool-result': {
      const result = { summary: event.summary, isError: event.isError };
      const found = items.some((item) => item.kind === 'tool' && item.callId === event.callId);
      if (!found) {
        return {
          ...next,
          items: [...items, { kind: 'tool', key, callId: event.callId, tool: event.tool, summary: event.tool, result }],
        };
      }
      return {
        ...next,
        items: items.map((item) => (item.kind === 'tool' && item.callId === event.callId ? { ...item, result } : item)),
      };
    }
    case 'order':
      return { ...next, items: [...items, { kind: 'order', key, order: event }] };
    case 'approval':
      return {
        ...next,
        items: items.map((item) =>
          item.kind === 'order' && item.order.invoiceId === event.invoiceId ? { ...item, approval: event } : item,
        ),
      };
    case 'receipt': {
      const order = items.find(
        (item): item is Extract<ChatItem, { kind: 'order' }> =>
          item.kind === 'order' && item.order.invoiceId === event.invoiceId,
      );
      const updated = items.map((item) =>
        item.kind === 'order' && item.order.invoiceId === event.invoiceId ? { ...item, receipt: event } : item,
      );
      // One receipt card per order: a later receipt (the ETA after fulfilment) updates it in place.
      if (items.some((item) => item.kind === 'receipt' && item.receipt.invoiceId === event.invoiceId)) {
        return {
          ...next,
          items: updated.map((item) =>
            item.kind === 'receipt' && item.receipt.invoiceId === event.invoiceId ? { ...item, receipt: event } : item,
          ),
        };
      }
      return {
        ...next,
        items: [
          ...updated,
          {
            kind: 'receipt',
            key,
            receipt: event,
            ...(order === undefined ? {} : { merchantName: order.order.merchantName }),
          },
        ],
      };
    }
    case 'elicitation':
      return { ...next, items: [...items, { kind: 'elicitation', key, form: event }] };
    case 'elicitation-closed':
      return {
        ...next,
        items: items.map((item) =>
          item.kind === 'elicitation' && item.form.elicitationId === event.elicitationId
            ? { ...item, closed: event.action }
            : item,
        ),
      };
    case 'attack':
      return { ...next, items: [...items, { kind: 'attack', key, attack: event }] };
    case 'turn-started':
      return { ...next, busy: true };
    case 'turn-ended':
      if (event.reason === 'done') return { ...next, busy: false };
      return {
        ...next,
        busy: false,
        items: [
          ...items,
          {
            kind: 'notice',
            key,
            tone: 'info',
            text:
              event.reason === 'rounds-exhausted'
                ? 'The agent stopped after too many steps. Ask again, or say what to do next.'
                : 'The agent stopped because of an error. You can ask again.',
          },
        ],
      };
    case 'error':
      return { ...next, items: [...items, { kind: 'notice', key, tone: 'error', text: event.message }] };
  }
}

/** The approval the chat is waiting on, if any: the last order whose approval is still pending. */
export function pendingApproval(view: ChatView): ApprovalEvent | undefined {
  for (let index = view.items.length - 1; index >= 0; index--) {
    const item = view.items[index];
    if (item?.kind === 'order' && item.approval?.status === 'pending') return item.approval;
  }
  return undefined;
}

/** The roles still to approve. */
export function rolesStillNeeded(approval: ApprovalEvent): ('child' | 'parent')[] {
  return approval.requiredRoles.filter((role) => !approval.approvedRoles.includes(role));
}
