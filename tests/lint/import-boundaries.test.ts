import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';

// The folder boundaries of SPEC §2 are lint rules (biome.json `overrides`), so they hold from a
// folder's first file. Each probe is linted with the project's own configuration in a scratch tree.
const root = fileURLToPath(new URL('../..', import.meta.url));
const biome = join(root, 'node_modules', '.bin', 'biome');

const probes: Record<string, { source: string; refused: boolean }> = {
  'shop-agent/uses-proxy.ts': { source: "import { createGateway } from '../proxy/index';", refused: true },
  'shop-agent/own-code.ts': { source: "import { menu } from './menu';", refused: false },
  'identity/deep-proxy.ts': { source: "import { ToolIndex } from '../proxy/search/tool-index';", refused: true },
  'identity/proxy-entry.ts': { source: "import { createGateway } from '../proxy/index';", refused: false },
  'identity/uses-lib.ts': { source: "import { runtime } from '../lib/index';", refused: true },
  'lib/deep-proxy.ts': { source: "import { Downstream } from '@/proxy/downstream/downstream';", refused: true },
  'lib/proxy-entry.ts': { source: "import { createGateway } from '@/proxy/index';", refused: false },
  'lib/deep-identity.ts': { source: "import { keys } from '../identity/key-store';", refused: true },
  'lib/identity-entry.ts': { source: "import { keys } from '../identity/index';", refused: false },
  'app/uses-proxy.ts': { source: "import { createGateway } from '@/proxy/index';", refused: true },
  'app/deep-lib.ts': { source: "import { runtime } from '@/lib/runtime';", refused: true },
  'app/lib-entry.ts': { source: "import { runtime } from '@/lib/index';", refused: false },
  // proxy/ (and the CLI's bin/) is a library plus CLI that imports nothing of ours (SPEC §2) and
  // no UI framework: it must run from an installed package, outside any checkout.
  'proxy/cli/uses-next.ts': { source: "import { NextResponse } from 'next/server';", refused: true },
  'proxy/uses-react.ts': { source: "import { useState } from 'react';", refused: true },
  'proxy/meta-tools/uses-identity.ts': { source: "import { verify } from '../../identity/index';", refused: true },
  'proxy/uses-lib.ts': { source: "import { runtime } from '../lib/index';", refused: true },
  'proxy/cli/uses-lib-alias.ts': { source: "import { env } from '@/lib/env';", refused: true },
  'proxy/uses-shop-agent.ts': { source: "import { menu } from '../shop-agent/index';", refused: true },
  'bin/uses-identity.ts': { source: "import { verify } from '../identity/index';", refused: true },
  'proxy/cli/own-code.ts': { source: "import { runCli } from './run-cli';", refused: false },
  'proxy/cli/proxy-internals.ts': { source: "import { ToolIndex } from '../search/tool-index';", refused: false },
  'proxy/uses-packages.ts': {
    source: "import { Client } from '@modelcontextprotocol/client';",
    refused: false,
  },
};

let output = '';

beforeAll(async () => {
  const scratch = await mkdtemp(join(tmpdir(), 'emcp-lint-'));
  const config = JSON.parse(await readFile(join(root, 'biome.json'), 'utf8')) as Record<string, unknown>;
  // The scratch tree is no git checkout: lint every file in it.
  const { vcs: _vcs, files: _files, $schema: _schema, ...rest } = config;
  await writeFile(join(scratch, 'biome.json'), JSON.stringify(rest));
  for (const [path, probe] of Object.entries(probes)) {
    await mkdir(join(scratch, dirname(path)), { recursive: true });
    await writeFile(
      join(scratch, path),
      `${probe.source}\nexport const probe = [${probe.source.match(/\{ (\w+) \}/)?.[1]}];\n`,
    );
  }
  output = await new Promise((resolve) => {
    execFile(biome, ['lint', '--max-diagnostics=200', '.'], { cwd: scratch }, (_error, stdout, stderr) =>
      resolve(`${stdout}${stderr}`),
    );
  });
}, 60_000);

describe('import boundaries (SPEC §2)', () => {
  it.each(Object.entries(probes))('%s', (path, probe) => {
    const refused = output.split('\n').some((line) => line.startsWith(path) && line.includes('noRestrictedImports'));
    expect(refused).toBe(probe.refused);
  });
});
