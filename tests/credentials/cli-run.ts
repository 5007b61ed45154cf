import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** The CLI entry, run as a real process. */
export const bin = 'bin/extensible-mcp.mjs';

/** Environment for CLI processes: offline, no embedding model, no inherited proxy settings. */
export function cliEnv(extra: Record<string, string> = {}): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (value !== undefined && !key.startsWith('EXTENSIBLE_MCP_')) env[key] = value;
  }
  return {
    ...env,
    EXTENSIBLE_MCP_OFFLINE: '1',
    EXTENSIBLE_MCP_MODEL_DIR: join(tmpdir(), 'no-model-here'),
    ...extra,
  };
}

/** What a finished CLI process printed. */
export interface CliResult {
  readonly status: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/**
 * Runs `node <args>` to completion without blocking this process's event loop (fixture servers
 * the child talks to may live in this process), and collects its exit code and output.
 */
export function runNode(
  args: string[],
  options: { env: Record<string, string>; input?: string; closeStdinAfter?: string },
) {
  return new Promise<CliResult>((resolve, reject) => {
    const child = spawn(process.execPath, args, { env: options.env });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
    });
    const { closeStdinAfter } = options;
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
      if (closeStdinAfter !== undefined && stderr.includes(closeStdinAfter)) child.stdin.end();
    });
    child.once('error', reject);
    child.once('close', (status) => resolve({ status, stdout, stderr }));
    // Stdin's end stops the proxy: keep it open until the awaited line when there is one.
    if (closeStdinAfter === undefined) child.stdin.end(options.input ?? '');
    else child.stdin.write(options.input ?? '');
  });
}

/** Runs the CLI to completion (see {@link runNode}); offline by default. */
export function runCli(
  args: string[],
  options: { env?: Record<string, string>; input?: string; closeStdinAfter?: string } = {},
) {
  return runNode([bin, ...args], { ...options, env: options.env ?? cliEnv() });
}

/** A fresh folder holding `config.json` with `config`. */
export function configIn(config: unknown, text?: string): { folder: string; configPath: string } {
  const folder = mkdtempSync(join(tmpdir(), 'emcp-cred-'));
  const configPath = join(folder, 'config.json');
  writeFileSync(configPath, text ?? `${JSON.stringify(config, null, 2)}\n`);
  return { folder, configPath };
}
