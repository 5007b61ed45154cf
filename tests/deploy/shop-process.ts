/**
 * The pizza shop started the way its image starts it (`deploy/steps.sh start-shop`), on a
 * loopback port, with its JSON log lines collected so a test can wait on them (events, not time).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../..', import.meta.url));

/** One line of the shop's log (`{ts, source, event, …}`), or `{event: 'text', text}` for anything else. */
export type ShopLogLine = Record<string, unknown> & { readonly event?: unknown; readonly text?: unknown };

/** A running (or exited) shop process. */
export interface ShopProcess {
  readonly lines: readonly ShopLogLine[];
  /** Settles with the exit code when the process exits. */
  readonly exited: Promise<number | null>;
  /** The first log line with this `event`, now or when it comes. */
  logged(event: string): Promise<ShopLogLine>;
  /** Everything printed so far, as text. */
  output(): string;
  /** SIGTERM, and waits for the exit (nothing if it already exited). */
  stop(): Promise<void>;
}

/** Starts the shop over Streamable HTTP on `127.0.0.1:port` with its settlement DID in `didFile`. */
export function startShopProcess(options: {
  readonly port: number;
  readonly dataDir: string;
  readonly didFile: string;
  readonly allowedHosts?: string;
}): ShopProcess {
  const lines: ShopLogLine[] = [];
  const waiters: { event: string; resolve: (line: ShopLogLine) => void }[] = [];
  let text = '';
  let partial = '';
  const child: ChildProcess = spawn('bash', ['deploy/steps.sh', 'start-shop', '127.0.0.1', String(options.port)], {
    cwd: root,
    env: {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '',
      SHOP_AGENT_DATA: options.dataDir,
      SHOP_SETTLEMENT_DID_FILE: options.didFile,
      ...(options.allowedHosts === undefined ? {} : { SHOP_AGENT_ALLOWED_HOSTS: options.allowedHosts }),
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const onData = (chunk: Buffer) => {
    text += chunk.toString('utf8');
    const complete = (partial + chunk.toString('utf8')).split('\n');
    partial = complete.pop() ?? '';
    for (const raw of complete) {
      let line: ShopLogLine;
      try {
        line = JSON.parse(raw) as ShopLogLine;
      } catch {
        line = { event: 'text', text: raw };
      }
      lines.push(line);
      for (const waiter of waiters.filter((candidate) => candidate.event === line.event)) {
        waiters.splice(waiters.indexOf(waiter), 1);
        waiter.resolve(line);
      }
    }
  };
  child.stdout?.on('data', onData);
  child.stderr?.on('data', onData);
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return {
    lines,
    exited,
    logged(event) {
      const seen = lines.find((line) => line.event === event);
      if (seen) return Promise.resolve(seen);
      return new Promise((resolve, reject) => {
        waiters.push({ event, resolve });
        void exited.then((code) => reject(new Error(`the shop exited (${code}) before "${event}":\n${text}`)));
      });
    },
    output: () => text,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM');
        await exited;
      }
    },
  };
}
