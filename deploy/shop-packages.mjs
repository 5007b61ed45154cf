// The shop image's npm packages: the shop's own runtime dependencies (deploy/shop-packages.json:
// what shop-agent/ imports, plus `tsx`, which runs its TypeScript), not the app's (Next.js,
// transformers.js, onnxruntime and the rest, which the shop never loads). Run in the shop image's
// build stage before `npm install` (deploy/steps.sh install-shop): it rewrites package.json in the
// working directory so that its dependencies are only these, at the ranges package.json gives,
// with no dev packages and no scripts. The lockfile stays, so every version installed is the
// locked one. tests/deploy/shop-packages.test.ts checks the list against shop-agent/'s imports.
import { readFileSync, writeFileSync } from 'node:fs';

const shopPackages = JSON.parse(readFileSync(new URL('./shop-packages.json', import.meta.url), 'utf8'));
const manifest = JSON.parse(readFileSync('package.json', 'utf8'));
const dependencies = {};
for (const name of shopPackages) {
  const range = manifest.dependencies?.[name];
  if (range === undefined) throw new Error(`shop-packages: ${name} is not a dependency in package.json`);
  dependencies[name] = range;
}
const { devDependencies: _dev, scripts: _scripts, bin: _bin, ...rest } = manifest;
writeFileSync('package.json', `${JSON.stringify({ ...rest, dependencies }, null, 2)}\n`);
console.log(`shop-packages: package.json now depends on ${shopPackages.join(', ')} only`);
