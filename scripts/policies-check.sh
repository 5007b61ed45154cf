#!/usr/bin/env bash
# CI gate for policies: runs every Rego test with the pinned opa, proves compilation is
# deterministic (two builds, byte-identical), and fails when a committed .wasm differs
# from what its source compiles to. Usage: bash scripts/policies-check.sh
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=scripts/policies-build.sh
source "$ROOT/scripts/policies-build.sh"

ensure_opa
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
write_capabilities "$work/capabilities.json"

# 1. Rego tests: every bundle folder and every example (at any depth) that has *_test.rego files.
#    Each test gets 120 s, a liveness guard rather than a speed check: opa's default of 5 s failed
#    family-spend's test that evaluates every case (nine passkey signatures each) on a loaded
#    two-core machine.
status=0
opa_test() { "$OPA" test --timeout 120s --capabilities "$work/capabilities.json" "$@"; }
for bundle in "$ROOT"/policies/*/; do
  compgen -G "$bundle*_test.rego" >/dev/null || continue
  files=("$bundle"*.rego)
  compgen -G "$bundle*.json" >/dev/null && [ -f "$bundle/cases.json" ] && files+=("$bundle/cases.json")
  echo "policies: opa test ${bundle#"$ROOT"/}" >&2
  opa_test "${files[@]}" || status=1
done
while read -r test_file; do
  echo "policies: opa test ${test_file#"$ROOT"/}" >&2
  opa_test "${test_file%_test.rego}.rego" "$test_file" || status=1
done < <(example_tests)

# 2. Compile twice into temp dirs: the output must be deterministic.
compile_all "$work/first"
compile_all "$work/second"
if ! diff -r "$work/first" "$work/second" >/dev/null; then
  echo "policies: FAIL: opa build is not deterministic (two builds differ)" >&2
  status=1
fi

# 3. Every committed .wasm must equal what its source compiles to.
while read -r _source output _entrypoints; do
  if [ ! -f "$ROOT/$output" ]; then
    echo "policies: FAIL: $output is missing; run bash scripts/policies-build.sh and commit it" >&2
    status=1
  elif ! cmp -s "$ROOT/$output" "$work/first/$output"; then
    echo "policies: FAIL: $output differs from its source; run bash scripts/policies-build.sh and commit it" >&2
    status=1
  fi
done < <(list_targets)

[ "$status" -eq 0 ] && echo "policies: ok" >&2
exit "$status"
