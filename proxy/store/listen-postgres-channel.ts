import pg from 'pg';

/** Options of {@link listenPostgresChannel}. */
export interface ListenPostgresChannelOptions {
  /** The channel to `LISTEN` on: an identifier the caller owns, never user input. */
  readonly channel: string;
  /** Each notification's payload on {@link channel}. */
  readonly onNotification: (payload: string) => void;
  /**
   * `listening` once `LISTEN` is in place (after every reconnect: whatever was committed while
   * nobody listened must now be read by id), `lost` when the connection died.
   */
  readonly onState: (state: 'listening' | 'lost') => void;
  /** A connection that failed; the listener reconnects. */
  readonly onError?: (error: unknown) => void;
  /** Milliseconds before the first reconnect, doubled per failure up to `max` (default 100 and 5000). */
  readonly reconnect?: { readonly first: number; readonly max: number };
}

/**
 * Keeps one connection of its own (the pool's settings, outside the pool, so no query is ever
 * handed to it) listening on one channel, and returns the stop. A dead connection is ended and
 * replaced after a backoff. A notification only says "read again": callers read their table by id
 * on each one and on each `listening`, so a notification lost while the connection was down, or
 * folded by PostgreSQL, leaves no gap (docs/scale-out.md, live events across instances).
 */
export function listenPostgresChannel(pool: pg.Pool, options: ListenPostgresChannelOptions): () => void {
  if (!/^[a-z_][a-z0-9_]*$/.test(options.channel)) throw new Error('a channel is a lower-case identifier');
  const first = options.reconnect?.first ?? 100;
  const max = options.reconnect?.max ?? 5000;
  let delay = first;
  let stopped = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  /** Ends the connection listening now, if any. */
  let current: (() => void) | undefined;

  const retry = () => {
    if (stopped) return;
    timer = setTimeout(() => void connect(), delay);
    timer.unref();
    delay = Math.min(delay * 2, max);
  };

  const connect = async (): Promise<void> => {
    const client = new pg.Client(pool.options);
    try {
      await client.connect();
    } catch (error) {
      options.onError?.(error);
      await client.end().catch(() => undefined);
      return retry();
    }
    if (stopped) return void client.end().catch(() => undefined);
    let lost = false;
    const onLost = (error?: unknown) => {
      if (lost) return;
      lost = true;
      if (error !== undefined) options.onError?.(error);
      client.removeListener('notification', onNotification);
      current = undefined;
      void client.end().catch(() => undefined);
      if (stopped) return;
      options.onState('lost');
      retry();
    };
    const onNotification = (message: pg.Notification) => {
      if (message.channel === options.channel) options.onNotification(message.payload ?? '');
    };
    client.on('error', onLost);
    client.on('end', () => onLost(new Error(`the ${options.channel} listener connection ended`)));
    client.on('notification', onNotification);
    try {
      await client.query(`LISTEN ${options.channel}`);
    } catch (error) {
      return onLost(error);
    }
    if (stopped) return onLost();
    current = () => onLost();
    delay = first;
    options.onState('listening');
  };

  void connect();
  return () => {
    stopped = true;
    clearTimeout(timer);
    current?.();
  };
}
