/**
 * The production build of the app, started the way `npm run demo` starts it: `next start` from the
 * repository root on a free port, on a fresh data folder, with no API key (the offline planner).
 * The server prints the enrollment codes at start; the specs read them from its output.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The repository root: `next start` runs here, as the demo does. */
export const root = fileURLToPath(new URL('../../..', import.meta.url));

/** A running app. */
export interface AppServer {
  /** `http://localhost:<port>`: WebAuthn refuses IP addresses as RP ids. */
  readonly origin: string;
  /** The loopback port it listens on (behind a relay or proxy, `origin` names another). */
  readonly port: number;
  readonly dataDir: string;
  /** The enrollment codes the server printed at start, by role. */
  readonly codes: Readonly<Partial<Record<'child' | 'parent', string>>>;
  /** Everything the server printed, for leak scans and failure messages. */
  output(): string;
  /** The pid of the process started (`next start`). */
  readonly pid: number | undefined;
  /** Resolves once the output, from now on, matches `pattern` (rejects if the app exits first). */
  printed(pattern: RegExp): Promise<void>;
  /** SIGTERM to the app's process group, and waits for the exit; the data folder stays. */
  stop(): Promise<void>;
  close(): Promise<void>;
}

/** A free loopback port. */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => resolve(typeof address === 'object' && address ? address.port : 0));
    });
  });
}

/** How the app is started: by default `next start` as `npm run demo` does; the deploy spec uses `deploy/steps.sh`. */
export interface AppLaunch {
  readonly command: string;
  readonly args: (port: number) => string[];
}

/** `npm start`'s command line (package.json), on the given port. */
const nextStart: AppLaunch = {
  command: process.execPath,
  args: (port) => ['node_modules/next/dist/bin/next', 'start', '--hostname', '127.0.0.1', '-p', String(port)],
};

/** How a second instance of one household starts (issue 28: several instances on one database). */
export interface AppInstance {
  /** The data folder to share (the household key file, the shop's), instead of a fresh one. */
  readonly dataDir?: string;
  /**
   * Whether to wait for the enrollment codes before probing HTTP (default true). A second instance
   * on a database whose codes are live prints none.
   */
  readonly codes?: boolean;
}

/** Starts the built app; resolves once it printed both codes (unless told not to wait) and answers HTTP. */
export async function startAppServer(
  environment: Record<string, string> = {},
  launch: AppLaunch = nextStart,
  instance: AppInstance = {},
): Promise<AppServer> {
  const port = await freePort();
  const origin = `http://localhost:${port}`;
  const dataDir = instance.dataDir ?? mkdtempSync(join(tmpdir(), 'e2e-household-'));
  const waitForCodes = instance.codes ?? true;
  let output = '';
  const child: ChildProcess = spawn(launch.command, launch.args(port), {
    cwd: root,
    env: {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '',
      NODE_ENV: 'production',
      EXTENSIBLE_MCP_DATA: dataDir,
      EXTENSIBLE_MCP_ORIGIN: origin,
      ...environment,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
    // Its own process group, so closing it ends every process a launcher started (npm, tsx, next).
    detached: true,
  });
  const codes: Partial<Record<'child' | 'parent', string>> = {};
  let probing = false;
  const waiters = new Set<{ readonly from: number; readonly pattern: RegExp; readonly resolve: () => void }>();
  const onOutput = () => {
    for (const waiter of waiters) {
      if (!waiter.pattern.test(output.slice(waiter.from))) continue;
      waiters.delete(waiter);
      waiter.resolve();
    }
  };
  await new Promise<void>((resolve, reject) => {
    const onData = (chunk: Buffer) => {
      output += chunk.toString('utf8');
      for (const match of output.matchAll(
        /Enrollment code for (child|parent): ((?:child|parent)-[0-9A-Z]{4}-[0-9A-Z]{4}-[0-9A-Z]{4})/g,
      )) {
        const [, role, code] = match;
        if (role && code) codes[role as 'child' | 'parent'] = code;
      }
      // Ready means answering: a log line that happens to say "ready" proves nothing.
      if (((codes.child && codes.parent) || !waitForCodes) && !probing) {
        probing = true;
        untilHealthy(origin, child).then(resolve, reject);
      }
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', onData);
    child.once('exit', (code) => reject(new Error(`the app exited (${code}) before it was ready:\n${output}`)));
    if (!waitForCodes) {
      probing = true;
      untilHealthy(origin, child).then(resolve, reject);
    }
  });
  // After the start's own listener, which appends each chunk to the output first.
  child.stdout?.on('data', onOutput);
  child.stderr?.on('data', onOutput);
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    if (child.pid !== undefined) process.kill(-child.pid, 'SIGTERM');
    await exited;
  };
  return {
    origin,
    port,
    dataDir,
    codes,
    output: () => output,
    pid: child.pid,
    printed(pattern) {
      return new Promise((resolve, reject) => {
        waiters.add({ from: output.length, pattern, resolve });
        child.once('exit', (code) =>
          reject(new Error(`the app exited (${code}) before printing ${pattern}:\n${output}`)),
        );
      });
    },
    stop,
    async close() {
      await stop();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/**
 * Resolves once the app answers HTTP at all: the Host rule may refuse this probe (an app whose
 * origin is a relay's), and that answer counts too. Gives up when the app exits.
 */
async function untilHealthy(origin: string, child: ChildProcess): Promise<void> {
  while (child.exitCode === null && child.signalCode === null) {
    const answer = await fetch(`${origin}/api/health`).catch(() => undefined);
    if (answer !== undefined) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
