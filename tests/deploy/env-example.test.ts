import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse as parseDotenv } from 'dotenv';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { readHouseholdEnv } from '../../lib/env';

// Issue 16: `.env.example` documents every variable the app and the shop read, and nothing else.
// The variables are collected from the source with the TypeScript parser: `process.env.NAME`,
// `process.env['NAME']`, and the keys of the zod object a file parses `process.env` with.
const root = fileURLToPath(new URL('../..', import.meta.url));
/** The app's and the shop's code (the proxy CLI's variables are the CLI's: deploy/README.md). */
const scanned = ['lib', 'shop-agent', 'app', 'instrumentation.ts'];
/** Set by the platform, never by an operator, so not documented for one. */
const platformVariables: Record<string, string> = {
  NEXT_RUNTIME: 'set by Next.js for each runtime it loads',
  NODE_ENV: 'set by Next.js: development under next dev (the CSP then allows eval), production otherwise',
};

function sourceFiles(path: string): string[] {
  const absolute = join(root, path);
  if (statSync(absolute).isFile()) return [absolute];
  return readdirSync(absolute, { withFileTypes: true }).flatMap((entry) => {
    const child = join(path, entry.name);
    if (entry.isDirectory()) return entry.name === 'node_modules' ? [] : sourceFiles(child);
    return /\.(ts|tsx|mts|mjs)$/.test(entry.name) && !/\.test\.tsx?$/.test(entry.name) ? [join(root, child)] : [];
  });
}

const isProcessEnv = (node: ts.Node): boolean =>
  ts.isPropertyAccessExpression(node) &&
  ts.isIdentifier(node.expression) &&
  node.expression.text === 'process' &&
  node.name.text === 'env';

/** The variables one file reads; a dynamic `process.env[expression]` is an error (it cannot be checked). */
function variablesReadBy(file: string): { names: Set<string>; wholeEnvironment: boolean } {
  const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, true);
  const names = new Set<string>();
  const schemaKeys = new Set<string>();
  let wholeEnvironment = false;
  const visit = (node: ts.Node): void => {
    if (isProcessEnv(node)) {
      const parent = node.parent;
      if (ts.isPropertyAccessExpression(parent) && parent.expression === node) names.add(parent.name.text);
      else if (ts.isElementAccessExpression(parent) && parent.expression === node) {
        if (!ts.isStringLiteral(parent.argumentExpression))
          throw new Error(`${relative(root, file)}: process.env[…] with a computed name`);
        names.add(parent.argumentExpression.text);
      } else wholeEnvironment = true;
    }
    // `z.object({ NAME: … })` with UPPER_CASE keys: an environment schema.
    if (
      ts.isCallExpression(node) &&
      ts.isPropertyAccessExpression(node.expression) &&
      node.expression.name.text === 'object' &&
      ts.isIdentifier(node.expression.expression) &&
      node.expression.expression.text === 'z'
    ) {
      const [shape] = node.arguments;
      if (shape !== undefined && ts.isObjectLiteralExpression(shape)) {
        const keys = shape.properties.map((property) =>
          property.name !== undefined && (ts.isIdentifier(property.name) || ts.isStringLiteral(property.name))
            ? property.name.text
            : '',
        );
        if (keys.length > 0 && keys.every((key) => /^[A-Z][A-Z0-9_]*$/.test(key))) {
          for (const key of keys) schemaKeys.add(key);
        }
      }
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  if (wholeEnvironment) {
    // A file that hands the whole environment to a parser must declare what it reads in a schema.
    if (schemaKeys.size === 0) throw new Error(`${relative(root, file)} reads process.env without a zod schema`);
    for (const key of schemaKeys) names.add(key);
  }
  return { names, wholeEnvironment };
}

function variablesInCode(): Map<string, string[]> {
  const readers = new Map<string, string[]>();
  for (const file of scanned.flatMap(sourceFiles)) {
    for (const name of variablesReadBy(file).names) {
      readers.set(name, [...(readers.get(name) ?? []), relative(root, file)]);
    }
  }
  return readers;
}

/** Every variable `.env.example` names, set (`NAME=`) or shown commented out (`# NAME=`). */
function variablesInExample(): string[] {
  const text = readFileSync(join(root, '.env.example'), 'utf8');
  return [...text.matchAll(/^(?:#\s*)?([A-Z][A-Z0-9_]*)=/gm)].map((match) => match[1] ?? '');
}

describe('.env.example', () => {
  it('the scan finds the known readers (the household env, the shop, the Next hook)', () => {
    const readers = variablesInCode();
    expect(readers.get('EXTENSIBLE_MCP_ORIGIN')).toEqual(['lib/env.ts']);
    expect(readers.get('SHOP_SETTLEMENT_DID_FILE')).toEqual(['shop-agent/main.ts']);
    expect(readers.get('ANTHROPIC_API_KEY')?.sort()).toEqual(['lib/env.ts', 'shop-agent/main.ts']);
    expect(readers.get('NEXT_RUNTIME')).toEqual(['instrumentation.ts']);
  });

  it('names every variable the code reads, and only those, once each', () => {
    const inCode = [...variablesInCode().keys()].filter((name) => !(name in platformVariables)).sort();
    const inExample = variablesInExample();
    expect(inExample.filter((name, index) => inExample.indexOf(name) !== index)).toEqual([]);
    expect(
      inCode.filter((name) => !inExample.includes(name)),
      'read by the code, missing in .env.example',
    ).toEqual([]);
    expect(
      inExample.filter((name) => !inCode.includes(name)),
      'in .env.example, read by no code',
    ).toEqual([]);
  });

  it('copied as it is to .env, it is a valid household environment with the documented defaults', () => {
    const env = readHouseholdEnv(parseDotenv(readFileSync(join(root, '.env.example'))));
    expect(env.origin).toBe('http://localhost:3000');
    expect(env.policyEngine).toBe('rego');
    expect(env.pizzaUrl).toBeUndefined();
    expect(env.stripeSecretKey).toBeUndefined();
    expect(env.settlementDidFile).toBeUndefined();
  });
});
