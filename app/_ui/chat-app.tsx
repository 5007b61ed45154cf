'use client';

import {
  type FormEvent,
  type KeyboardEvent,
  type ReactNode,
  useCallback,
  useEffect,
  useReducer,
  useRef,
  useState,
} from 'react';
import type { ChatEvent } from '@/lib/index';
import { AttackConsole, AttackResult } from './attack-console';
import { chatHeaders, openChatStream, storeChatToken, storedChatToken } from './chat-connection';
import {
  applyChatEvent,
  type ChatItem,
  type ChatView,
  emptyChat,
  pendingApproval,
  rolesStillNeeded,
} from './chat-model';
import { ElicitationForm } from './elicitation-form';
import { possessive } from './format';
import { OrderCard, ReceiptCard } from './order-card';
import { SiteHeader } from './site-header';
import { ToolRow } from './tool-row';

const suggestions = [
  'a cheese slice to 12 Main St',
  'a large pepperoni',
  'twenty large supremes',
  'ask for a discount',
];

type Connection = 'starting' | 'live' | 'reconnecting';
type Action = { readonly type: 'event'; readonly event: ChatEvent } | { readonly type: 'reset' };

function reduce(view: ChatView, action: Action): ChatView {
  return action.type === 'reset' ? emptyChat : applyChatEvent(view, action.event);
}

/**
 * Posts JSON to one of the chat's routes with this tab's session secret; resolves to the refusal's
 * words, or `undefined` when accepted.
 */
async function post(path: string, body: unknown): Promise<string | undefined> {
  try {
    const response = await fetch(path, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...chatHeaders(storedChatToken()) },
      body: JSON.stringify(body),
    });
    if (response.ok) return undefined;
    const answer = (await response.json().catch(() => ({}))) as { error?: string };
    return answer.error ?? `the server answered ${response.status}`;
  } catch {
    return 'the server cannot be reached; check that it is running';
  }
}

/**
 * The chat page: opens (or resumes) this browser's session, renders its event stream, and sends
 * messages. Everything shown comes from the server's events, so a reload replays the same conversation.
 */
export function ChatApp() {
  const [view, dispatch] = useReducer(reduce, emptyChat);
  const [planner, setPlanner] = useState<string>();
  const [connection, setConnection] = useState<Connection>('starting');
  const [draft, setDraft] = useState('');
  const [sendError, setSendError] = useState<string>();
  const [sending, setSending] = useState(false);
  const bottom = useRef<HTMLDivElement>(null);

  useEffect(() => {
    const stop = new AbortController();
    let retry: ReturnType<typeof setTimeout> | undefined;
    const connect = async () => {
      const response = await fetch('/api/chat/session', {
        method: 'POST',
        headers: chatHeaders(storedChatToken()),
        signal: stop.signal,
      }).catch(() => undefined);
      if (stop.signal.aborted) return;
      if (!response?.ok) {
        setConnection('reconnecting');
        retry = setTimeout(() => void connect(), 2000);
        return;
      }
      const session = (await response.json()) as { resumed: boolean; planner: { label: string }; token?: string };
      setPlanner(session.planner.label);
      // A new session (first visit in this tab, or the server forgot the old one) starts an empty conversation.
      if (!session.resumed) {
        if (session.token !== undefined) storeChatToken(session.token);
        dispatch({ type: 'reset' });
      }
      const token = storedChatToken();
      if (token === undefined) {
        setConnection('reconnecting');
        return;
      }
      openChatStream(
        token,
        {
          onOpen: () => setConnection('live'),
          onEvent: (event) => dispatch({ type: 'event', event }),
          onDropped: () => setConnection('reconnecting'),
          // The session is gone: start a new one.
          onClosed: () => {
            setConnection('reconnecting');
            retry = setTimeout(() => void connect(), 1000);
          },
        },
        stop.signal,
      );
    };
    void connect();
    return () => {
      stop.abort();
      clearTimeout(retry);
    };
  }, []);

  // Follow the conversation as events arrive.
  useEffect(() => {
    if (view.lastId > 0) bottom.current?.scrollIntoView({ block: 'end' });
  }, [view.lastId]);

  const send = useCallback(async (text: string) => {
    const trimmed = text.trim();
    if (trimmed === '') return;
    setSending(true);
    setSendError(undefined);
    const problem = await post('/api/chat/messages', { text: trimmed });
    setSending(false);
    if (problem === undefined) setDraft('');
    else setSendError(problem);
  }, []);

  const submit = (event: FormEvent) => {
    event.preventDefault();
    void send(draft);
  };
  const onKeyDown = (event: KeyboardEvent<HTMLTextAreaElement>) => {
    // Enter sends when the Send button could (the session live, no message in flight); Shift+Enter is a new line.
    if (event.key === 'Enter' && !event.shiftKey && !event.nativeEvent.isComposing) {
      event.preventDefault();
      if (connection === 'live' && !sending) void send(draft);
    }
  };

  const renderItem = (item: ChatItem): ReactNode => {
    switch (item.kind) {
      case 'user':
        return (
          <div key={item.key} className="flex justify-end">
            <p className="max-w-[80%] whitespace-pre-wrap rounded-2xl bg-sky-800 px-4 py-2 text-white">
              <span className="sr-only">You: </span>
              {item.text}
            </p>
          </div>
        );
      case 'assistant':
        return (
          <p
            key={item.key}
            className="max-w-[85%] whitespace-pre-wrap rounded-2xl border border-slate-200 bg-white px-4 py-2"
          >
            <span className="sr-only">Agent: </span>
            {item.text}
          </p>
        );
      case 'tool':
        return (
          <ToolRow key={item.key} tool={item.tool} callId={item.callId} summary={item.summary} result={item.result} />
        );
      case 'order':
        return (
          <OrderCard
            key={item.key}
            order={item.order}
            approval={item.approval}
            receipt={item.receipt}
            onOrderAgain={() => void send('order again')}
          />
        );
      case 'receipt':
        return (
          <ReceiptCard
            key={item.key}
            receipt={item.receipt}
            merchantName={item.merchantName}
            fulfilled={view.items.some(
              (other) =>
                other.kind === 'order' &&
                other.order.invoiceId === item.receipt.invoiceId &&
                other.approval?.status === 'fulfilled',
            )}
          />
        );
      case 'elicitation':
        return (
          <ElicitationForm
            key={item.key}
            form={item.form}
            closed={item.closed}
            onAnswer={(action, content) =>
              post('/api/chat/elicitation', {
                elicitationId: item.form.elicitationId,
                action,
                ...(content === undefined ? {} : { content }),
              })
            }
          />
        );
      case 'attack':
        return <AttackResult key={item.key} attack={item.attack} />;
      case 'notice':
        return (
          <p
            key={item.key}
            className={`rounded-lg px-4 py-2 text-sm ${item.tone === 'error' ? 'bg-amber-50 text-amber-900' : 'bg-slate-100 text-slate-700'}`}
          >
            {item.text}
          </p>
        );
    }
  };

  const waiting = pendingApproval(view);
  const status = waiting
    ? `Waiting for the ${rolesStillNeeded(waiting).map(possessive).join(' and the ')} passkey in the ${rolesStillNeeded(waiting).join(' and ')} window.`
    : view.busy
      ? 'The agent is working…'
      : undefined;

  return (
    <div className="flex h-screen flex-col">
      <SiteHeader subtitle="Chat">
        <p className="rounded-full bg-slate-100 px-3 py-1 text-sm text-slate-700">Agent: {planner ?? 'starting…'}</p>
        <SearchModeBadge />
      </SiteHeader>
      <main className="mx-auto flex w-full max-w-3xl flex-1 flex-col overflow-hidden px-4">
        <h1 className="sr-only">Order Pizza chat</h1>
        {connection !== 'live' && (
          <p role="status" className="mt-3 rounded-md bg-slate-100 px-3 py-2 text-sm text-slate-700">
            {connection === 'starting'
              ? 'Starting the household: the shop, the proxy and the search index…'
              : 'Reconnecting to the server…'}
          </p>
        )}
        <section role="log" aria-label="Conversation" className="flex-1 space-y-3 overflow-y-auto py-4">
          {view.items.length === 0 && (
            <div className="mt-8 text-center">
              <h2 className="text-xl font-semibold">What would you like to order?</h2>
              <p className="mt-1 text-slate-600">
                The agent orders from Main Street Pizza. Every payment needs a passkey approval in the child or parent
                window.
              </p>
              <ul className="mt-4 flex flex-wrap justify-center gap-2" aria-label="Suggestions">
                {suggestions.map((suggestion) => (
                  <li key={suggestion}>
                    <button
                      type="button"
                      disabled={connection !== 'live' || sending}
                      onClick={() => void send(suggestion)}
                      className="rounded-full border border-slate-300 bg-white px-4 py-2 text-sm hover:bg-slate-100 disabled:opacity-60"
                    >
                      {suggestion}
                    </button>
                  </li>
                ))}
              </ul>
            </div>
          )}
          {view.items.map((item) => renderItem(item))}
          <div ref={bottom} />
        </section>
        <form onSubmit={submit} className="border-t border-slate-200 py-3">
          <p role="status" className="min-h-5 text-sm text-slate-700">
            {status}
          </p>
          {sendError && (
            <p role="alert" className="text-sm text-amber-900">
              {sendError}
            </p>
          )}
          <div className="mt-1 flex items-end gap-2">
            <label htmlFor="chat-input" className="sr-only">
              Message
            </label>
            <textarea
              id="chat-input"
              rows={2}
              maxLength={4000}
              value={draft}
              // Read-only until the session is first live: the server renders it so, and text
              // typed before the page hydrates would otherwise be lost without a word.
              readOnly={connection === 'starting'}
              onChange={(event) => setDraft(event.target.value)}
              onKeyDown={onKeyDown}
              placeholder="Ask for a pizza… (Enter sends, Shift+Enter for a new line)"
              className="flex-1 resize-none rounded-lg border border-slate-300 bg-white px-3 py-2"
            />
            <button
              type="submit"
              disabled={sending || connection !== 'live' || draft.trim() === ''}
              className="rounded-lg bg-sky-800 px-5 py-2 font-medium text-white hover:bg-sky-900 disabled:opacity-60"
            >
              Send
            </button>
          </div>
          <AttackConsole
            disabled={sending || connection !== 'live' || view.busy}
            onRun={(move) => void send(`/attack ${move}`)}
          />
        </form>
      </main>
    </div>
  );
}

const searchModeWords: Record<string, { short: string; long: string }> = {
  loading: { short: 'Search: warming up', long: 'Keyword search until the embedding model is ready' },
  lexical: { short: 'Search: keywords', long: 'Keyword search: the embedding model is not loaded' },
  hybrid: { short: 'Search: hybrid', long: 'Hybrid search: keywords and meaning' },
};

/** Says how tool search ranks, and follows it while the embedding model loads (every wait has a visible reason). */
function SearchModeBadge() {
  const [mode, setMode] = useState<string>();
  useEffect(() => {
    let stopped = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const poll = async () => {
      const response = await fetch('/api/health').catch(() => undefined);
      const body = response?.ok ? ((await response.json()) as { searchMode?: string }) : undefined;
      if (stopped) return;
      if (body?.searchMode) setMode(body.searchMode);
      if (body?.searchMode !== 'hybrid' && body?.searchMode !== 'lexical') timer = setTimeout(() => void poll(), 2000);
    };
    void poll();
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }, []);
  if (mode === undefined) return null;
  return (
    <p
      role="status"
      title={searchModeWords[mode]?.long}
      className="hidden rounded-full bg-slate-100 px-3 py-1 text-sm text-slate-700 lg:block"
    >
      {searchModeWords[mode]?.short ?? mode}
      <span className="sr-only"> — {searchModeWords[mode]?.long}</span>
    </p>
  );
}
