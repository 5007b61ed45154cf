import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { expect, it } from 'vitest';

const root = new URL('../..', import.meta.url).pathname;

/**
 * The v2 SDK serves every face and every downstream connection (docs/protocol.md); the v1
 * package (`@modelcontextprotocol/sdk`) is a dev dependency kept for the compatibility tests, so
 * a v1 client and a v1 server can drive the proxy as 2025-11-25 peers. Runtime code importing it
 * would break an installed CLI and the deploy images, which prune dev dependencies.
 */
it('imports @modelcontextprotocol/sdk only under tests/', () => {
  const files = execFileSync('git', ['ls-files', '*.ts', '*.tsx', '*.mjs', '*.js'], { cwd: root, encoding: 'utf8' })
    .split('\n')
    .filter((file) => file !== '' && !file.startsWith('tests/'));
  const offenders = files.filter((file) =>
    /from ['"]@modelcontextprotocol\/sdk[/'"]/.test(readFileSync(`${root}${file}`, 'utf8')),
  );
  expect(offenders).toEqual([]);
  const manifest = JSON.parse(readFileSync(`${root}package.json`, 'utf8')) as Record<string, Record<string, string>>;
  expect(manifest.dependencies?.['@modelcontextprotocol/sdk']).toBeUndefined();
  expect(manifest.devDependencies?.['@modelcontextprotocol/sdk']).toBeDefined();
});
