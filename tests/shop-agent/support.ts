import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';

/** Repository root, so the shop is started exactly as documented: `shop-agent/main.ts`. */
export const REPO_ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** Command and args that run the shop's entry with tsx. */
export const SHOP_COMMAND = process.execPath;
export const SHOP_ARGS = ['--import', 'tsx', 'shop-agent/main.ts'];

/** A minimal, explicit environment for the child: no inherited API keys. */
export function shopEnv(extra: Record<string, string>): Record<string, string> {
  return { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...extra };
}

/** Call a tool and return its result, typed. */
export async function callTool(
  client: Client,
  name: string,
  args: Record<string, unknown> = {},
): Promise<CallToolResult> {
  return (await client.callTool({ name, arguments: args })) as CallToolResult;
}

/** The structured content of a successful result (fails the test on a refusal). */
export function okContent(result: CallToolResult): Record<string, unknown> {
  if (result.isError === true) throw new Error(`tool refused: ${JSON.stringify(result.content)}`);
  return result.structuredContent as Record<string, unknown>;
}

/**
 * Start the shop in HTTP mode on a free port and resolve once it logs `server-started`
 * (waiting on the event, not a sleep).
 */
export function startHttpShop(
  env: Record<string, string>,
): Promise<{ child: ChildProcess; port: number; stop(): Promise<void> }> {
  const child = spawn(SHOP_COMMAND, [...SHOP_ARGS, '--http', '--port', '0'], {
    cwd: REPO_ROOT,
    env: shopEnv(env),
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  const stop = () =>
    new Promise<void>((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) return resolve();
      child.once('exit', () => resolve());
      child.kill('SIGTERM');
    });
  return new Promise((resolve, reject) => {
    let buffer = '';
    child.stderr?.setEncoding('utf8');
    child.stderr?.on('data', (chunk: string) => {
      buffer += chunk;
      for (const line of buffer.split('\n')) {
        if (!line.includes('"server-started"')) continue;
        const event = JSON.parse(line) as { port: number };
        resolve({ child, port: event.port, stop });
        return;
      }
    });
    child.once('exit', (code) => reject(new Error(`shop exited with ${code} before starting: ${buffer}`)));
  });
}
