/**
 * What a Docker build context sends, computed the way Docker does it: `.dockerignore` at the
 * context's root read by `@balena/dockerignore` (a maintained implementation of Docker's rules,
 * not one written here), and the tree walked from the context's root. A directory the rules
 * exclude is not entered when no `!` exception could bring part of it back, which is what keeps
 * the walk off `node_modules` and `.git`; with exceptions every file is looked at.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import dockerignore from '@balena/dockerignore';

/** The parsed rules of a context's `.dockerignore` (no file: nothing is ignored). */
export function readDockerignore(contextDir: string): { ignores(path: string): boolean; hasExceptions: boolean } {
  const file = join(contextDir, '.dockerignore');
  const text = existsSync(file) ? readFileSync(file, 'utf8') : '';
  const rules = dockerignore().add(text.split('\n'));
  const hasExceptions = text.split('\n').some((line) => line.trim().startsWith('!'));
  return { ignores: (path) => rules.ignores(path), hasExceptions };
}

/** Every file path (relative, `/`-separated) the context at `contextDir` would send. */
export function buildContextFiles(contextDir: string): string[] {
  const rules = readDockerignore(contextDir);
  const sent: string[] = [];
  const walk = (relative: string): void => {
    for (const entry of readdirSync(join(contextDir, relative), { withFileTypes: true })) {
      const path = relative === '' ? entry.name : `${relative}/${entry.name}`;
      if (entry.isDirectory()) {
        if (rules.ignores(path) && !rules.hasExceptions) continue;
        walk(path);
      } else if (!rules.ignores(path)) {
        sent.push(path);
      }
    }
  };
  walk('');
  return sent.sort();
}
