import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { root } from '../e2e/support/app-server';

// Issue 27: the shop image holds the shop's own runtime packages only (deploy/shop-packages.json,
// applied by deploy/shop-packages.mjs in its build stage). The list must be exactly the packages
// shop-agent/'s runtime code imports, plus `tsx`, which runs it: one missing and the image breaks
// at start; one extra and the image carries what the shop never loads.
const shopAgent = join(root, 'shop-agent');

/** The runtime sources of shop-agent/: its TypeScript, without tests and test fixtures. */
function runtimeSources(): string[] {
  return readdirSync(shopAgent, { recursive: true, encoding: 'utf8' })
    .filter((path) => path.endsWith('.ts') && !path.endsWith('.test.ts') && !path.startsWith('testing'))
    .map((path) => join(shopAgent, path));
}

/** The npm package a bare import specifier names (`@scope/name/sub` → `@scope/name`). */
function packageOf(specifier: string): string {
  const parts = specifier.split('/');
  return specifier.startsWith('@') ? parts.slice(0, 2).join('/') : (parts[0] ?? specifier);
}

describe("the shop image's packages", () => {
  it("are the packages shop-agent/'s runtime code imports, and tsx", () => {
    const imported = new Set<string>();
    for (const file of runtimeSources()) {
      const source = readFileSync(file, 'utf8');
      for (const [, specifier] of source.matchAll(/(?:from\s+|import\s*\(\s*|import\s+)'([^'.][^']*)'/g)) {
        if (specifier && !specifier.startsWith('node:')) imported.add(packageOf(specifier));
      }
    }
    const listed = JSON.parse(readFileSync(join(root, 'deploy', 'shop-packages.json'), 'utf8')) as string[];
    expect([...imported, 'tsx'].sort()).toEqual([...listed].sort());
  });

  it('each is a runtime dependency in package.json, so the lockfile pins it', () => {
    const manifest = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
      dependencies: Record<string, string>;
    };
    const listed = JSON.parse(readFileSync(join(root, 'deploy', 'shop-packages.json'), 'utf8')) as string[];
    for (const name of listed) expect(manifest.dependencies[name], name).toBeDefined();
  });
});
