#!/usr/bin/env bash
# Compiles every policy bundle's Rego (policies/*/policy.rego) and every example
# (examples/**/*.rego, tests apart) to WASM with the pinned opa, in place.
# Usage: bash scripts/policies-build.sh
# policies-check.sh sources this file for its functions; it runs the build only when executed.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

# Pinned OPA, installed from the Go module proxy into the git-ignored .tools/bin.
OPA_VERSION="1.22.3"
OPA="$ROOT/.tools/bin/opa"

ensure_opa() {
  # Capture first, then match: piping into `grep -q` would SIGPIPE opa under pipefail.
  local reported=""
  [ -x "$OPA" ] && reported="$("$OPA" version 2>/dev/null || true)"
  if [[ "$reported" == *"Version: $OPA_VERSION"$'\n'* ]]; then
    return 0
  fi
  if ! command -v go >/dev/null 2>&1; then
    echo "policies: opa $OPA_VERSION is not in .tools/bin and Go is not installed to build it" >&2
    echo "policies: install Go (https://go.dev/dl/) or copy an opa $OPA_VERSION binary to .tools/bin/opa" >&2
    exit 1
  fi
  echo "policies: building opa v$OPA_VERSION with go install (first run takes a few minutes)" >&2
  mkdir -p "$ROOT/.tools/bin"
  GOBIN="$ROOT/.tools/bin" go install "github.com/open-policy-agent/opa@v$OPA_VERSION"
}

# Writes OPA's own capabilities plus the host builtins (policies/capabilities.extra.json) to $1.
write_capabilities() {
  "$OPA" capabilities --current >"$1.base"
  node -e '
    const fs = require("node:fs");
    const [base, extra, out] = process.argv.slice(1);
    const caps = JSON.parse(fs.readFileSync(base, "utf8"));
    const names = new Set(caps.builtins.map((b) => b.name));
    for (const b of JSON.parse(fs.readFileSync(extra, "utf8")).builtins) if (!names.has(b.name)) caps.builtins.push(b);
    fs.writeFileSync(out, JSON.stringify(caps));
  ' "$1.base" "$ROOT/policies/capabilities.extra.json" "$1"
}

# The Rego package of a file (first `package` line), as an entrypoint path (a.b -> a/b).
rego_package_path() {
  sed -n 's/^package[[:space:]]\{1,\}\([A-Za-z0-9_.]*\).*/\1/p' "$1" | head -n 1 | tr '.' '/'
}

# Every compile target: "<rego source> <wasm output (relative)> <entrypoint names...>".
# Bundles also get `decision` (the three documents in one evaluation; the host prefers it).
list_targets() {
  local bundle
  for bundle in "$ROOT"/policies/*/; do
    [ -f "$bundle/policy.rego" ] || continue
    echo "${bundle%/}/policy.rego ${bundle#"$ROOT"/}policy.wasm allow failed_checks deny_reason decision"
  done
  local example
  while read -r example; do
    echo "$example ${example#"$ROOT"/}" | sed 's/\.rego$/.wasm/' | sed 's/$/ allow deny_reason/'
  done < <(example_sources)
}

# Example policies at any depth under examples/ (their *_test.rego files apart), in a stable order.
example_sources() {
  find "$ROOT/examples" -type f -name '*.rego' ! -name '*_test.rego' | LC_ALL=C sort
}

# The examples' Rego test files (<name>_test.rego beside <name>.rego), in a stable order.
example_tests() {
  find "$ROOT/examples" -type f -name '*_test.rego' | LC_ALL=C sort
}

# compile_target <rego> <wasm output path> <capabilities> <entrypoint names...>
compile_target() {
  local source="$1" output="$2" capabilities="$3"
  shift 3
  local package_path
  package_path="$(rego_package_path "$source")"
  if [ -z "$package_path" ]; then
    echo "policies: no package line in $source" >&2
    exit 1
  fi
  local args=() name
  for name in "$@"; do args+=(-e "$package_path/$name"); done
  local work
  work="$(mktemp -d)"
  # Build from the source's own folder with a relative file name: opa embeds the file name in
  # the module, and the committed .wasm must not depend on (or reveal) where the checkout lives.
  (cd "$(dirname "$source")" && "$OPA" build -t wasm --capabilities "$capabilities" "${args[@]}" \
    -o "$work/bundle.tar.gz" "$(basename "$source")")
  mkdir -p "$(dirname "$output")"
  tar -xzPf "$work/bundle.tar.gz" -O /policy.wasm >"$output"
  rm -rf "$work"
}

# compile_all <output root>: compiles every target under <output root>/<relative wasm path>.
compile_all() {
  local out_root="$1" capabilities
  capabilities="$(mktemp)"
  write_capabilities "$capabilities"
  local source output entrypoints
  while read -r source output entrypoints; do
    # shellcheck disable=SC2086 # entrypoint names are single words
    compile_target "$source" "$out_root/$output" "$capabilities" $entrypoints
    echo "policies: compiled ${source#"$ROOT"/} -> $output" >&2
  done < <(list_targets)
  rm -f "$capabilities" "$capabilities.base"
}

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
  ensure_opa
  compile_all "$ROOT"
fi
