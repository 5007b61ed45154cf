import { createHash } from 'node:crypto';
import { z } from 'zod';
import type { AuditEntry, AuditLog } from '../audit/audit-log';
import { type HouseholdEvent, HouseholdEvent as HouseholdEventSchema } from '../events';
import { AppHttpError } from './http';
import { eventStreamResponse } from './sse';

/** What the live log reads of the audit table: rows after an id, its head, and rows as they are appended. */
export type LogSource = Pick<AuditLog, 'after' | 'head' | 'subscribe'>;

/** What a viewer may narrow the log to; every field optional and exact. */
export const LogFilter = z.strictObject({
  session: z.string().min(1).max(200).optional(),
  order: z.string().min(1).max(200).optional(),
  kind: HouseholdEventSchema.shape.kind.optional(),
  outcome: HouseholdEventSchema.shape.outcome.optional(),
});

/** A parsed live-log filter. */
export type LogFilter = z.infer<typeof LogFilter>;

/** Rows a first connection replays before going live; a reconnect replays everything it missed. */
export const logBacklogRows = 500;
/** Rows read from the table per page while catching up. */
const pageRows = 500;
/** Live rows held for one slow viewer; beyond it the stream ends and the browser resumes from the table. */
const maxQueuedRows = 10_000;

/** The filter from `?session=&order=&kind=&outcome=` (blank means "any"); bad values are a 400 in words. */
export function logFilterOf(request: Request): LogFilter {
  const query = new URL(request.url).searchParams;
  const raw = Object.fromEntries(
    ['session', 'order', 'kind', 'outcome'].flatMap((name) => {
      const value = query.get(name)?.trim();
      return value ? [[name, value]] : [];
    }),
  );
  const parsed = LogFilter.safeParse(raw);
  if (!parsed.success) {
    const fields = parsed.error.issues.map((issue) => issue.path.join('.')).join(', ');
    throw new AppHttpError(400, `invalid log filter: ${fields}`);
  }
  return parsed.data;
}

const rawSessionId = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * A row's session as the log shows it (issue 26 item 13). Rows written before events named a
 * scope digest carry the raw MCP session id, which let whoever read the log join that session:
 * such an id is shown, and filtered on, as a digest of it. The stored row is unchanged, so its
 * hash chain still verifies.
 */
export function shownSession(session: string | undefined): string | undefined {
  if (session === undefined || !rawSessionId.test(session)) return session;
  return `legacy-${createHash('sha256').update(session).digest('base64url').slice(0, 16)}`;
}

/** Whether an event passes the filter. */
export function matchesLogFilter(event: HouseholdEvent, filter: LogFilter): boolean {
  return (
    (filter.session === undefined || shownSession(event.session) === filter.session) &&
    (filter.order === undefined || event.orderId === filter.order) &&
    (filter.kind === undefined || event.kind === filter.kind) &&
    (filter.outcome === undefined || event.outcome === filter.outcome)
  );
}

/** Where a log stream starts: after `Last-Event-ID` (a reconnect), else the last {@link logBacklogRows} rows. */
export async function logResumePoint(request: Request, log: LogSource): Promise<number> {
  const raw = request.headers.get('last-event-id');
  if (raw === null) return Math.max(0, (await log.head()).rowId - logBacklogRows);
  if (!/^\d{1,15}$/.test(raw.trim())) throw new AppHttpError(400, 'Last-Event-ID must be a non-negative event id');
  return Number(raw.trim());
}

/**
 * The live log as Server-Sent Events (SPEC §8): the rows after `afterId` that pass the filter, then
 * every new one, whichever instance appended it. The table is read page by page first; then the
 * subscription starts right after the last row read, so a row appended meanwhile is neither lost
 * nor sent twice.
 */
export function liveLogStream(
  log: LogSource,
  options: { readonly afterId: number; readonly filter: LogFilter; readonly signal: AbortSignal },
): Response {
  return eventStreamResponse(
    (signal) => logEntries(log, { afterId: options.afterId, filter: options.filter, signal }),
    options.signal,
  );
}

async function* logEntries(
  log: LogSource,
  options: { readonly afterId: number; readonly filter: LogFilter; readonly signal: AbortSignal },
): AsyncGenerator<{ readonly id: number; readonly hash: string } & HouseholdEvent> {
  const { filter, signal } = options;
  const queued: AuditEntry[] = [];
  let overflowed = false;
  let wake: (() => void) | undefined;
  let unsubscribe: (() => void) | undefined;
  const onAbort = () => wake?.();
  signal.addEventListener('abort', onAbort, { once: true });
  try {
    let last = options.afterId;
    // 1. Catch up from the table, page by page, at the viewer's pace.
    for (;;) {
      const page = await log.after(last, { limit: pageRows });
      for (const entry of page) {
        last = entry.id;
        if (matchesLogFilter(entry.event, filter)) yield view(entry);
      }
      if (page.length < pageRows || signal.aborted) break;
    }
    // 2. Live: every row after the last one read, in id order, from any instance.
    unsubscribe = log.subscribe(
      (entry) => {
        if (queued.length >= maxQueuedRows) overflowed = true;
        else queued.push(entry);
        wake?.();
      },
      { after: last },
    );
    while (!signal.aborted && !overflowed) {
      const entry = queued.shift();
      if (entry === undefined) {
        await new Promise<void>((resolve) => {
          wake = resolve;
        });
        wake = undefined;
        continue;
      }
      if (entry.id <= last) continue;
      last = entry.id;
      if (matchesLogFilter(entry.event, filter)) yield view(entry);
    }
  } finally {
    unsubscribe?.();
    signal.removeEventListener('abort', onAbort);
  }
}

function view(entry: AuditEntry) {
  const session = shownSession(entry.event.session);
  return { id: entry.id, hash: entry.hash, ...entry.event, ...(session !== undefined && { session }) };
}
