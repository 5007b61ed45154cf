#!/usr/bin/env bash
# Installs Stripe's own API mock, stripe-mock, at a pinned version into the git-ignored
# .tools/bin when it is missing or another version, the way policies-build.sh installs opa.
# tests/payments/stripe-mock.test.ts runs the payment rail's real SDK calls against it, so every
# request is validated against Stripe's published OpenAPI.
# Usage: bash scripts/stripe-mock.sh   (prints the binary's path on success)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

# Pinned stripe-mock, built from the Go module proxy; tests/payments/stripe-mock-server.ts runs
# this binary.
STRIPE_MOCK_VERSION="0.203.0"
STRIPE_MOCK="$ROOT/.tools/bin/stripe-mock"

ensure_stripe_mock() {
  # A release binary reports its version with -version; one built by `go install` says "master",
  # so its module version is read from the build info Go embeds. Capture first, then match:
  # piping into `grep -q` would SIGPIPE the binary under pipefail.
  local reported=""
  if [ -x "$STRIPE_MOCK" ]; then
    reported="$("$STRIPE_MOCK" -version 2>&1 || true)"
    if command -v go >/dev/null 2>&1; then
      reported+=$'\n'"$(go version -m "$STRIPE_MOCK" 2>/dev/null || true)"
    fi
  fi
  if [[ "$reported" == *"stripe-mock $STRIPE_MOCK_VERSION"* || "$reported" == *$'\tmod\tgithub.com/stripe/stripe-mock\tv'"$STRIPE_MOCK_VERSION"$'\t'* ]]; then
    return 0
  fi
  if ! command -v go >/dev/null 2>&1; then
    echo "stripe-mock: $STRIPE_MOCK_VERSION is not in .tools/bin and Go is not installed to build it" >&2
    echo "stripe-mock: install Go (https://go.dev/dl/) or copy a stripe-mock $STRIPE_MOCK_VERSION binary to .tools/bin/stripe-mock" >&2
    exit 1
  fi
  echo "stripe-mock: building stripe-mock v$STRIPE_MOCK_VERSION with go install" >&2
  mkdir -p "$ROOT/.tools/bin"
  GOBIN="$ROOT/.tools/bin" go install "github.com/stripe/stripe-mock@v$STRIPE_MOCK_VERSION"
}

ensure_stripe_mock
echo "$STRIPE_MOCK"
