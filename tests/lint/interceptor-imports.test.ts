import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

// SPEC §2: the root `proxy.ts` exists only as Next.js's request interceptor (the Host rule, the
// nonce CSP) and never imports the `proxy/` library, not even through another folder's entry.
// This walks its whole static import graph of our own files and checks where it leads.
const root = fileURLToPath(new URL('../..', import.meta.url));

/** Our own files `file` imports (relative or `@/` specifiers), resolved as the bundler would. */
function importsOf(file: string): string[] {
  const source = readFileSync(file, 'utf8');
  const specifiers = [...source.matchAll(/\b(?:import|export)\b[^'"]*?\bfrom\s+['"]([^'"]+)['"]/g)].map(
    (match) => match[1] as string,
  );
  return specifiers
    .filter((specifier) => specifier.startsWith('.') || specifier.startsWith('@/'))
    .map((specifier) => {
      const base = specifier.startsWith('@/') ? join(root, specifier.slice(2)) : resolve(dirname(file), specifier);
      const found = ['', '.ts', '.tsx', '/index.ts']
        .map((suffix) => `${base}${suffix}`)
        .find((path) => existsSync(path) && !path.endsWith('/'));
      if (found === undefined) throw new Error(`${relative(root, file)} imports ${specifier}, which does not resolve`);
      return found;
    });
}

/** Every file of ours reachable from `entry`. */
function graphOf(entry: string): string[] {
  const seen = new Set<string>();
  const queue = [entry];
  while (queue.length > 0) {
    const file = queue.pop() as string;
    if (seen.has(file)) continue;
    seen.add(file);
    queue.push(...importsOf(file));
  }
  return [...seen].map((file) => relative(root, file)).sort();
}

describe('the root interceptor proxy.ts', () => {
  it('reaches no file of the proxy/ library, and none of the household runtime', () => {
    const graph = graphOf(join(root, 'proxy.ts'));
    expect(graph).toContain('lib/web/intercept-request.ts');
    expect(graph.filter((file) => file.startsWith('proxy/'))).toEqual([]);
    // Only the rules and the environment parser: no store, no identity, no runtime.
    expect(graph).toEqual([
      'lib/env.ts',
      'lib/web/content-security-policy.ts',
      'lib/web/host-rule.ts',
      'lib/web/intercept-request.ts',
      'proxy.ts',
    ]);
  });
});
