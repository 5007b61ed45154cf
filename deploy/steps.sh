#!/usr/bin/env bash
# The deploy's steps, in one place. deploy/app.Dockerfile and deploy/shop.Dockerfile run every
# build step and start command through this script, and tests/e2e/deploy-steps.spec.ts runs the
# same steps outside Docker (the e2e build itself is `steps.sh build`), so the two cannot drift.
#
#   install              npm ci (all packages: the build needs the dev tools)
#   install-production   npm ci --omit=dev (runtime packages only)
#   install-shop         the shop's own runtime packages only (deploy/shop-packages.mjs), locked versions
#   stage-model          the MiniLM embedding model, pinned and hash-checked (scripts/stage-model.sh)
#   build                the production Next.js build
#   prune                drop dev packages and the build cache after the build
#   start-app [HOST] [PORT]    the app (next start); default 127.0.0.1 3000 (the image passes 0.0.0.0)
#   start-shop [HOST] [PORT]   the shop over Streamable HTTP; default 0.0.0.0 7600
#   healthcheck-app [URL]      exit 0 iff the app is up and its tool search is hybrid; default
#                              http://localhost:3000: the app answers only for its origin's Host
#   healthcheck-shop [URL]     exit 0 iff the shop answers /healthz
set -euo pipefail
cd "$(dirname "$0")/.."

step="${1:-}"
if [ "$#" -gt 0 ]; then shift; fi

case "$step" in
  install)
    npm ci --no-audit --no-fund
    ;;
  install-production)
    npm ci --omit=dev --no-audit --no-fund
    ;;
  install-shop)
    node deploy/shop-packages.mjs write
    npm install --omit=dev --no-audit --no-fund
    ;;
  stage-model)
    bash scripts/stage-model.sh
    ;;
  build)
    node node_modules/next/dist/bin/next build
    ;;
  prune)
    npm prune --omit=dev --no-audit --no-fund
    rm -rf .next/cache
    ;;
  start-app)
    exec node node_modules/next/dist/bin/next start --hostname "${1:-127.0.0.1}" --port "${2:-3000}"
    ;;
  start-shop)
    exec node --import tsx shop-agent/main.ts --http --host "${1:-0.0.0.0}" --port "${2:-7600}"
    ;;
  healthcheck-app)
    exec node deploy/healthcheck.mjs app "${1:-http://localhost:3000}"
    ;;
  healthcheck-shop)
    exec node deploy/healthcheck.mjs shop "${1:-http://localhost:7600}"
    ;;
  *)
    echo "usage: deploy/steps.sh install|install-production|install-shop|stage-model|build|prune|start-app|start-shop|healthcheck-app|healthcheck-shop" >&2
    exit 2
    ;;
esac
