#!/usr/bin/env bash
# The Docker showcase, run for real (issue 27): builds both images of deploy/ in a container
# engine, runs deploy/docker-compose.yml with it, and orders a pizza through the published port;
# then runs deploy/docker-compose.postgres.yml with the same images (issue 28: PostgreSQL, two app
# instances behind nginx) and orders through its one published port too.
# CI runs it from .ci/run; its steps are documented in deploy/README.md ("What CI proves").
#
#   1. engine        Debian's podman (rootful, runc), docker-compose v1, debootstrap; a config of
#                    this harness's own (storage, rlimits, runtime, networks) under $DEPLOY_STATE
#   2. base images   stand-ins for node:20-bookworm(-slim), python:3.11-slim-bookworm, postgres:15-bookworm
#                    and nginx:1.25-bookworm, built from Debian's packages (deploy/standins/)
#   3. build         both images from deploy/*.Dockerfile, the stand-ins passed as build arguments
#   4. compose up    podman's Docker-compatible API service, a healthcheck loop (podman runs none
#                    without systemd), then `docker-compose up -d`, which starts the shop only once
#                    the app is healthy
#   5. healthchecks  both containers healthy
#   6. checks        from the host: health says hybrid, the pages answer, both enrollment codes in
#                    the app's log, only 127.0.0.1:3000 published, the shop has no route out; then a
#                    whole $15 order in Chromium, a shop restart, and the next order
#                    (tests/deploy/compose-order.spec.ts)
#   7. down          `docker-compose down -v`, then a check that nothing is left
#   8. pg compose up   deploy/docker-compose.postgres.yml with the images of step 3 and the stand-ins
#   9. pg healthchecks PostgreSQL, both app instances, nginx and the shop healthy, none restarted
#  10. pg checks       from the host, through 127.0.0.1:3000 only: nginx's round robin reaches both
#                      instances, the pages answer, the household was made once (the second instance
#                      printed no code, the first one's are live in the database), PostgreSQL has no
#                      network; then a whole $15 order in Chromium, whose codes and requests are seen
#                      in the database and in nginx's log
#  11. pg down         `docker-compose down -v`, then a check that nothing is left
#
# Whatever happens, the exit trap takes everything down again: containers, networks, volumes, the
# API service and the healthcheck loop. Images and the build cache stay in $DEPLOY_STATE, so the
# next run on the same machine rebuilds only what changed.
#
# Usage (as root):
#   bash scripts/deploy-run.sh            the whole run
#   bash scripts/deploy-run.sh --fresh    the same, from empty engine storage (measures a fresh machine)
# Used by the order spec while a run is under way:
#   bash scripts/deploy-run.sh app-log        the app container's log (app-a's on the PostgreSQL stack)
#   bash scripts/deploy-run.sh restart-shop   restart the shop container, wait until it is healthy
# Environment: DEPLOY_STATE (engine storage and config; default /var/lib/extensible-mcp-deploy);
# DEPLOY_COMPOSE_STACK (single or postgres: the stack the subcommands act on, set by the harness
# for the order spec).
set -Eeuo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

# The order after the shop's restart must complete: the proxy opens a new session with the
# restarted shop (issue 31). "known-gap" reports a failed order there without failing the run.
SHOP_RESTART_RECOVERY="required"

STATE="${DEPLOY_STATE:-/var/lib/extensible-mcp-deploy}"
RUN_DIR="/run/extensible-mcp-deploy"
SOCKET="$RUN_DIR/podman.sock"
PROJECT="extensible-mcp-deploy"
APP_URL="http://localhost:3000"
STANDIN="extensible-mcp-standin"
APP_IMAGE="extensible-mcp-app:local"
SHOP_IMAGE="extensible-mcp-shop:local"
STEPS=11
export CONTAINERS_CONF="$STATE/containers.conf"
export CONTAINERS_STORAGE_CONF="$STATE/storage.conf"
export DOCKER_HOST="unix://$SOCKET"
export COMPOSE_PROJECT_NAME="$PROJECT"
# The PostgreSQL compose file's images for the database and the reverse proxy: the stand-ins.
export POSTGRES_IMAGE="$STANDIN/postgres:15-bookworm"
export NGINX_IMAGE="$STANDIN/nginx:1.22-bookworm"

say() { echo "deploy-run: $*"; }
fail() {
  echo "deploy-run: FAILED: $*" >&2
  exit 1
}

# The stack the compose commands drive: the showcase's file (single) or the PostgreSQL one. Both
# run as one compose project, one after the other, so the clean-up below covers either.
use_stack() {
  case "$1" in
    single)
      COMPOSE=(docker-compose --ansi never -f deploy/docker-compose.yml)
      SERVICES=(app shop)
      APP_SERVICE=app
      ;;
    postgres)
      COMPOSE=(docker-compose --ansi never -f deploy/docker-compose.postgres.yml)
      SERVICES=(postgres app-a app-b proxy shop)
      APP_SERVICE=app-a
      ;;
    *) fail "DEPLOY_COMPOSE_STACK is single or postgres, not $1" ;;
  esac
  STACK="$1"
}
use_stack "${DEPLOY_COMPOSE_STACK:-single}"

# ---------------------------------------------------------------------------------------------
# Steps: each is announced by number and name, timed, and named again if it fails.
step_number=0
step_name=""
step_started=0
timings=()

begin_step() {
  end_step
  step_number=$((step_number + 1))
  step_name="$1"
  step_started=$SECONDS
  echo "::group::deploy-run: step $step_number/$STEPS — $step_name"
}

end_step() {
  if [ -n "$step_name" ]; then
    timings+=("$(printf '%-2s %-14s %5ss' "$step_number" "$step_name" "$((SECONDS - step_started))")")
    echo "::endgroup::"
    step_name=""
  fi
}

# ---------------------------------------------------------------------------------------------
# The engine's configuration: this harness's own files, so nothing of the machine's is changed.
write_engine_config() {
  mkdir -p "$STATE/storage" "$STATE/networks" "$RUN_DIR"
  local nofile
  nofile="$(ulimit -Hn)"
  # nofile: the hard limit (containers may not raise it past ours); runc: crun fails on this
  # machine's hybrid cgroups; cgroupfs and file events: there is no systemd or journald;
  # netavark: with CNI, podman's internal networks have no DNS, so the app could not resolve
  # `shop` (aardvark-dns answers on internal networks too).
  cat >"$CONTAINERS_CONF" <<EOF
[containers]
default_ulimits = ["nofile=$nofile:$nofile", "nproc=32768:32768"]

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"

[network]
network_backend = "netavark"
network_config_dir = "$STATE/networks"
EOF
  cat >"$CONTAINERS_STORAGE_CONF" <<EOF
[storage]
driver = "overlay"
graphroot = "$STATE/storage"
runroot = "$RUN_DIR/storage"
EOF
}

engine_ready() { [ -f "$CONTAINERS_CONF" ] && command -v podman >/dev/null 2>&1; }

# ---------------------------------------------------------------------------------------------
# Background processes of this run, each in its own process group so that it can be ended whole.
service_pid=""
health_loop_pid=""

stop_group() {
  local pid="$1"
  [ -n "$pid" ] || return 0
  kill -TERM -- "-$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}

start_service() {
  rm -f "$SOCKET"
  setsid podman system service --time=0 "unix://$SOCKET" >"$RUN_DIR/service.log" 2>&1 &
  service_pid=$!
  local waited=0
  until curl -fsS --unix-socket "$SOCKET" http://d/_ping >/dev/null 2>&1; do
    if ! kill -0 "$service_pid" 2>/dev/null; then
      cat "$RUN_DIR/service.log" >&2
      fail "podman's API service exited"
    fi
    waited=$((waited + 1))
    [ "$waited" -lt 300 ] || fail "podman's API service did not answer on $SOCKET within 30 s"
    sleep 0.1
  done
  say "podman's Docker-compatible API answers on $SOCKET"
}

# Docker runs each container's HEALTHCHECK on its interval; podman does that through systemd
# timers, and there is no systemd here, so this loop runs every check of the project's running
# containers every 3 s (podman still applies each check's start period, timeout and retries).
start_health_loop() {
  setsid bash -c '
    while :; do
      for id in $(podman ps -q --filter "label=com.docker.compose.project=$1"); do
        podman healthcheck run "$id" >/dev/null 2>&1 || true
      done
      sleep 3
    done' health-loop "$PROJECT" >/dev/null 2>&1 &
  health_loop_pid=$!
}

# The project's containers, networks and volumes, as podman lists them.
leftovers() {
  podman ps -aq --filter "label=com.docker.compose.project=$PROJECT" 2>/dev/null | sed 's/^/container /'
  podman volume ls -q --filter "label=com.docker.compose.project=$PROJECT" 2>/dev/null | sed 's/^/volume /'
  podman network ls -q 2>/dev/null | grep "^${PROJECT}_" | sed 's/^/network /' || true
}

# Takes everything of a run down; safe to call when nothing, or only part, is up.
take_down() {
  stop_group "$health_loop_pid"
  health_loop_pid=""
  if [ -n "$service_pid" ] && kill -0 "$service_pid" 2>/dev/null; then
    "${COMPOSE[@]}" down -v --remove-orphans --timeout 10 || say "docker-compose down failed; removing with podman"
  fi
  stop_group "$service_pid"
  service_pid=""
  rm -f "$SOCKET"
  engine_ready || return 0
  local ids
  ids="$(podman ps -aq --filter "label=com.docker.compose.project=$PROJECT" 2>/dev/null || true)"
  [ -z "$ids" ] || podman rm -f -t 5 $ids >/dev/null || true
  ids="$(podman volume ls -q --filter "label=com.docker.compose.project=$PROJECT" 2>/dev/null || true)"
  [ -z "$ids" ] || podman volume rm -f $ids >/dev/null || true
  ids="$(podman network ls -q 2>/dev/null | grep "^${PROJECT}_" || true)"
  [ -z "$ids" ] || podman network rm -f $ids >/dev/null || true
}

# The health of a compose service's container: healthy, unhealthy, starting, or none.
health_of() {
  local id
  id="$("${COMPOSE[@]}" ps -q "$1" 2>/dev/null || true)"
  [ -n "$id" ] || {
    echo none
    return 0
  }
  podman inspect --format '{{.State.Health.Status}}' "$id" 2>/dev/null || echo none
}

# What the last healthcheck runs of a service's container printed.
health_log() {
  local id
  id="$("${COMPOSE[@]}" ps -q "$1" 2>/dev/null || true)"
  [ -n "$id" ] || return 0
  podman inspect --format '{{range .State.Health.Log}}{{.ExitCode}}: {{.Output}}{{"\n"}}{{end}}' "$id" 2>/dev/null \
    | tail -n 5 | sed "s/^/  $1 healthcheck: /" >&2 || true
}

# Waits until a service's container is healthy; fails if it turns unhealthy or takes too long.
wait_healthy() {
  local service="$1" limit="$2" started=$SECONDS status id restarts
  id="$("${COMPOSE[@]}" ps -q "$service")"
  [ -n "$id" ] || fail "there is no $service container"
  while :; do
    # By the id, with podman: a docker-compose call per poll took a second or two.
    status="$(podman inspect --format '{{.State.Health.Status}}' "$id" 2>/dev/null || echo none)"
    # A container that exits and is restarted (restart: unless-stopped) would stay "starting".
    restarts="$(podman inspect --format '{{.RestartCount}} {{.State.Status}} {{.State.ExitCode}}' "$id")"
    if [ "${restarts%% *}" != 0 ] || [ "$(cut -d' ' -f2 <<<"$restarts")" = exited ]; then
      "${COMPOSE[@]}" logs --no-color --tail 20 "$service" | sed 's/^/  log: /' >&2 || true
      fail "the $service container exited (restarts, state, exit code: $restarts)"
    fi
    case "$status" in
      healthy)
        say "$service is healthy after $((SECONDS - started)) s"
        return 0
        ;;
      unhealthy)
        health_log "$service"
        fail "$service is unhealthy"
        ;;
    esac
    if [ $((SECONDS - started)) -ge "$limit" ]; then
      health_log "$service"
      fail "$service is not healthy after $limit s (health: $status)"
    fi
    sleep 1
  done
}

# tests/deploy/compose-order.spec.ts against the stack that is up (DEPLOY_COMPOSE_STACK tells it
# which): each test's outcome and full name, a line each, into $work/order-results; the spec's
# exit code into order_code.
run_order_spec() {
  local report="$work/order-report-$STACK.json"
  order_code=0
  DEPLOY_COMPOSE_STACK="$STACK" DEPLOY_COMPOSE_URL="$APP_URL" npx vitest run -c tests/deploy/compose.vitest.config.ts \
    --reporter=default --reporter=json --outputFile.json="$report" || order_code=$?
  [ -f "$report" ] || fail "the order spec did not run (exit $order_code)"
  node -e '
    const report = JSON.parse(require("node:fs").readFileSync(process.argv[1], "utf8"));
    for (const file of report.testResults) for (const test of file.assertionResults)
      console.log(`${test.status}\t${test.fullName}`);' "$report" >"$work/order-results"
  sed 's/^/  /' "$work/order-results"
  grep -q . "$work/order-results" || fail "the order spec ran no test"
}

# The PostgreSQL stack's container ids by service, looked up once in its checks (each
# docker-compose v1 call takes a second or two on a busy machine; podman's own are quicker).
declare -A container=()

# The address a compose service's container has on one of the project's networks.
address_on() {
  podman inspect --format "{{(index .NetworkSettings.Networks \"${PROJECT}_$2\").IPAddress}}" "${container[$1]}"
}

# A service's log, its output and its errors (what `docker-compose logs` shows).
log_of() { podman logs "${container[$1]}" 2>&1; }

# How many requests nginx's log (deploy/nginx-postgres.conf) shows answered by an upstream address.
served_by() {
  log_of proxy | grep -cE "upstream=${1//./\\.}:3000$" || true
}

# What the PostgreSQL stack's database answers to one query (psql over its socket, unaligned).
database() {
  podman exec "${container[postgres]}" \
    psql --no-psqlrc --host /var/run/postgresql --username household --dbname household -tA -c "$1"
}

# The whole script runs as one function, parsed whole before it starts: editing this file while
# a run is under way cannot change what that run executes.
main() {
# ---------------------------------------------------------------------------------------------
# Subcommands for the order spec, while a run is under way (its service and health loop).
case "${1:-}" in
  app-log)
    exec "${COMPOSE[@]}" logs --no-color "$APP_SERVICE"
    ;;
  restart-shop)
    "${COMPOSE[@]}" restart --timeout 10 shop
    # The container's own healthcheck, run here until it passes (the loop runs it too).
    id="$("${COMPOSE[@]}" ps -q shop)"
    for _ in $(seq 1 60); do
      if podman healthcheck run "$id" >/dev/null 2>&1; then
        say "the shop restarted and is healthy"
        exit 0
      fi
      sleep 1
    done
    fail "the shop was not healthy within 60 s of its restart"
    ;;
  "" | --fresh) ;;
  *)
    echo "usage: bash scripts/deploy-run.sh [--fresh] | app-log | restart-shop" >&2
    exit 2
    ;;
esac
fresh="${1:-}"

[ "$(id -u)" -eq 0 ] || fail "run as root: the engine is rootful podman"

work="$(mktemp -d)"
on_exit() {
  local code=$?
  trap - EXIT INT TERM
  if [ "$code" -ne 0 ] && [ -n "$step_name" ]; then
    echo "deploy-run: FAILED at step $step_number/$STEPS ($step_name), exit code $code" >&2
    if [ -n "$service_pid" ]; then
      for service in "${SERVICES[@]}"; do health_log "$service"; done
      "${COMPOSE[@]}" logs --no-color --tail 40 2>/dev/null | sed 's/^/  log: /' >&2 || true
    fi
  fi
  end_step
  take_down
  rm -rf "$work"
  local left
  left="$(engine_ready && leftovers || true)"
  if [ -n "$left" ]; then
    echo "deploy-run: FAILED: left behind:" >&2
    echo "$left" >&2
    code=1
  fi
  if [ "${#timings[@]}" -gt 0 ]; then
    say "step times:"
    printf '  %s\n' "${timings[@]}"
  fi
  say "wall time $SECONDS s"
  if [ "$code" -eq 0 ]; then say "passed"; else say "FAILED (exit $code)"; fi
  exit "$code"
}
trap on_exit EXIT
trap 'echo "deploy-run: command failed (line $LINENO): $BASH_COMMAND" >&2' ERR
trap 'exit 130' INT
trap 'exit 143' TERM

# ---------------------------------------------------------------------------------------------
begin_step "engine"
missing=()
for tool in podman:podman runc:runc /usr/libexec/podman/catatonit:catatonit /usr/lib/podman/netavark:netavark \
  /usr/lib/podman/aardvark-dns:aardvark-dns iptables:iptables docker-compose:docker-compose debootstrap:debootstrap; do
  command -v "${tool%%:*}" >/dev/null 2>&1 || [ -x "${tool%%:*}" ] || missing+=("${tool##*:}")
done
if [ "${#missing[@]}" -gt 0 ]; then
  say "installing from Debian: ${missing[*]}"
  apt-get update -qq
  # Recommends are skipped; catatonit is the init process `init: true` asks for; netavark and
  # aardvark-dns give the compose networks their DNS, and netavark sets their rules with iptables
  # (only a Recommends of it: without it, starting a container fails with "netavark: No such file
  # or directory").
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
write_engine_config
# Whatever a run killed outright left behind (this harness's project only).
take_down
if [ "$fresh" = "--fresh" ]; then
  say "--fresh: emptying the engine storage"
  podman system reset --force >/dev/null 2>&1 || true
  rm -rf "$STATE/storage" "$STATE/networks"
  write_engine_config
fi
podman --version
docker-compose version --short
say "storage $STATE/storage, runtime $(podman info --format '{{.Host.OCIRuntime.Name}}')"

# ---------------------------------------------------------------------------------------------
begin_step "base images"
if podman image exists "$STANDIN/debian:bookworm"; then
  say "$STANDIN/debian:bookworm is there (delete it to bootstrap Debian again)"
else
  say "debootstrap --variant=minbase bookworm"
  debootstrap --variant=minbase bookworm "$work/rootfs" >"$work/debootstrap.log" 2>&1 \
    || { tail -n 30 "$work/debootstrap.log" >&2; fail "debootstrap failed"; }
  rm -rf "$work/rootfs/var/lib/apt/lists/"* "$work/rootfs/var/cache/apt/"*.bin "$work/rootfs/var/cache/apt/archives/"*.deb
  tar -C "$work/rootfs" -c . | podman import --quiet --change 'CMD ["bash"]' - "$STANDIN/debian:bookworm" >/dev/null
  rm -rf "$work/rootfs"
fi
# This machine's Node 20: its node binary, npm and the Node headers (node-gyp's nodedir), as
# installed under node's prefix (the nodejs package's layout: bin/, lib/node_modules/npm, include/node).
mkdir -p "$work/standins"
node_prefix="$(dirname "$(dirname "$(readlink -f "$(command -v node)")")")"
[ "$node_prefix" = /usr ] || fail "node is installed under $node_prefix; the stand-ins expect Debian's layout under /usr"
[ -f /usr/include/node/node_version.h ] || fail "the Node headers are not in /usr/include/node"
printf '%s\n' usr/bin/node usr/bin/npm usr/bin/npx usr/lib/node_modules/npm usr/include/node >"$work/node-files"
tar -C / --mtime='2000-01-01' --sort=name --owner=0 --group=0 -cf "$work/standins/nodejs.tar" -T "$work/node-files"
cp /etc/ssl/certs/ca-certificates.crt "$work/standins/ca-certificates.crt"
install -m 0755 deploy/standins/postgres-entrypoint.sh "$work/standins/postgres-entrypoint.sh"
# Each stage of the Containerfile is its own stand-in; unchanged, each is a cache hit.
for target in node-slim:node:20-bookworm-slim node-build:node:20-bookworm python:python:3.11-slim-bookworm \
  postgres:postgres:15-bookworm nginx:nginx:1.22-bookworm; do
  started=$SECONDS
  podman build --quiet --pull=never --network=host --format docker \
    --build-arg "BASE=$STANDIN/debian:bookworm" --target "${target%%:*}" \
    -f deploy/standins/standins.Containerfile -t "$STANDIN/${target#*:}" "$work/standins" >/dev/null
  say "stand-in $STANDIN/${target#*:} ($(podman run --rm --network=none "$STANDIN/${target#*:}" \
    sh -c 'node --version 2>/dev/null || python3 --version 2>/dev/null || postgres --version 2>/dev/null || nginx -v 2>&1'), $((SECONDS - started)) s)"
done

# ---------------------------------------------------------------------------------------------
begin_step "build"
build_args=(
  --build-arg "NODE_IMAGE=$STANDIN/node:20-bookworm"
  --build-arg "NODE_SLIM_IMAGE=$STANDIN/node:20-bookworm-slim"
)
for image in shop app; do
  started=$SECONDS
  tag="$SHOP_IMAGE"
  if [ "$image" = app ]; then
    tag="$APP_IMAGE"
    build_args+=(--build-arg "PYTHON_IMAGE=$STANDIN/python:3.11-slim-bookworm")
  fi
  podman build --pull=never --network=host --format docker "${build_args[@]}" \
    -f "deploy/$image.Dockerfile" -t "$tag" . 2>&1 | sed -u "s/^/  $image: /"
  [ "${PIPESTATUS[0]}" -eq 0 ] || fail "the $image image did not build"
  say "$image image built in $((SECONDS - started)) s"
done
podman images --format '{{.Repository}}:{{.Tag}} {{.Size}}' | grep -E "extensible-mcp-(app|shop):local" \
  | sed 's/^/image size: /'

# ---------------------------------------------------------------------------------------------
begin_step "compose up"
ss -Hltn 'sport = :3000' | grep -q . && fail "port 3000 is in use on this machine: the compose file publishes it"
start_service
start_health_loop
# The shop waits for the app's healthcheck (depends_on: service_healthy): an app that never gets
# healthy fails here.
if ! "${COMPOSE[@]}" up -d --no-build; then
  fail "docker-compose up failed (app health: $(health_of app))"
fi

# ---------------------------------------------------------------------------------------------
begin_step "healthchecks"
wait_healthy app 300
wait_healthy shop 120

# ---------------------------------------------------------------------------------------------
begin_step "checks"
app_id="$("${COMPOSE[@]}" ps -q app)"
shop_id="$("${COMPOSE[@]}" ps -q shop)"

health="$(curl -fsS "$APP_URL/api/health")" || fail "$APP_URL/api/health did not answer"
[ "$(node -e 'process.stdout.write(JSON.parse(process.argv[1]).searchMode ?? "")' "$health")" = hybrid ] \
  || fail "/api/health does not say hybrid search: $health"
say "✓ /api/health: $health"

for path in / "/approve?as=child" "/approve?as=parent"; do
  code="$(curl -sS -o /dev/null -w '%{http_code}' "$APP_URL$path")"
  [ "$code" = 200 ] || fail "$APP_URL$path answered $code, not 200"
  say "✓ $path: 200"
done

log="$("${COMPOSE[@]}" logs --no-color app)"
for role in child parent; do
  grep -qE "Enrollment code for $role: $role-[0-9A-Z]{4}-[0-9A-Z]{4}-[0-9A-Z]{4}" <<<"$log" \
    || fail "the app's log shows no enrollment code for $role"
done
say "✓ the app's log shows both enrollment codes"

app_ports="$(podman port "$app_id")"
shop_ports="$(podman port "$shop_id")"
[ "$app_ports" = "3000/tcp -> 127.0.0.1:3000" ] || fail "the app publishes $app_ports, not only 127.0.0.1:3000"
[ -z "$shop_ports" ] || fail "the shop publishes a port: $shop_ports"
say "✓ published: the app's 127.0.0.1:3000 only (the shop: none)"

# The shop's only network is internal: no default route, and a connection to an address outside
# it fails at once (ENETUNREACH), be it the internet or this machine's own address.
host_address="$(ip -4 route get 1.1.1.1 | sed -n 's/.* src \([0-9.]*\).*/\1/p')"
outside="$(podman exec "$shop_id" node -e '
  const { connect } = require("node:net");
  const routes = require("node:fs").readFileSync("/proc/net/route", "utf8").split("\n").slice(1);
  if (routes.some((line) => line.split("\t")[1] === "00000000")) { console.log("a default route"); process.exit(1); }
  let left = process.argv.length - 1;
  const results = [];
  for (const host of process.argv.slice(1)) {
    const socket = connect({ host, port: 443, timeout: 5000 });
    const done = (what) => { results.push(`${host}: ${what}`); socket.destroy(); if (--left === 0) { console.log(results.join(", ")); process.exit(results.every((r) => /ENETUNREACH|EHOSTUNREACH/.test(r)) ? 0 : 1); } };
    socket.once("connect", () => done("connected"));
    socket.once("timeout", () => done("timeout"));
    socket.once("error", (error) => done(error.code));
  }' 1.1.1.1 "$host_address")" || fail "the shop reaches outside its network: $outside"
say "✓ the shop has no route out ($outside)"

# The app found no shop at its start and keeps trying PIZZA_URL (http://shop:7600/mcp): the
# shop logs the client that connects (its initialize answered), over the internal network, by the
# service's name.
waited=0
until "${COMPOSE[@]}" logs --no-color shop | grep -q '"event":"client-connected"'; do
  waited=$((waited + 1))
  [ "$waited" -lt 60 ] || fail "the app did not connect to the shop at http://shop:7600/mcp within 60 s"
  sleep 1
done
say "✓ the app reached the shop by its service name over the internal network (client connected)"

say "the order in Chromium through $APP_URL (tests/deploy/compose-order.spec.ts)"
run_order_spec
restart_test="after a restart of the shop container"
if grep -v "$restart_test" "$work/order-results" | grep -qv '^passed'; then
  fail "the order through the published port failed"
fi
say "✓ a whole \$15 order in Chromium through $APP_URL"
if grep "$restart_test" "$work/order-results" | grep -q '^passed'; then
  say "✓ after the shop's restart, the next order completed (no restart of the app)"
elif [ "$SHOP_RESTART_RECOVERY" = known-gap ]; then
  echo "deploy-run: KNOWN GAP: after the shop container's restart, the next order did not complete;"
  echo "deploy-run: KNOWN GAP: not failing the run for it (SHOP_RESTART_RECOVERY=known-gap)."
else
  fail "after the shop's restart, the next order did not complete"
fi
[ "$order_code" -eq 0 ] || [ "$SHOP_RESTART_RECOVERY" = known-gap ] || fail "the order spec failed (exit $order_code)"

# ---------------------------------------------------------------------------------------------
begin_step "down"
"${COMPOSE[@]}" down -v --remove-orphans --timeout 10
left="$(leftovers)"
[ -z "$left" ] || fail "left behind after down -v: $left"
say "nothing left of deploy/docker-compose.yml: no container, network or volume of $PROJECT"

# ---------------------------------------------------------------------------------------------
# The PostgreSQL stack (deploy/docker-compose.postgres.yml): the images of step 3 and the
# stand-ins of step 2, nothing built again; the API service and the healthcheck loop go on.
begin_step "pg compose up"
use_stack postgres
ss -Hltn 'sport = :3000' | grep -q . && fail "port 3000 is in use on this machine: the compose file publishes it"
# app-b starts once app-a is healthy, nginx and the shop once both are (depends_on).
if ! "${COMPOSE[@]}" up -d --no-build; then
  fail "docker-compose up failed (health: $(for service in "${SERVICES[@]}"; do printf '%s %s, ' "$service" "$(health_of "$service")"; done))"
fi

# ---------------------------------------------------------------------------------------------
begin_step "pg healthchecks"
wait_healthy postgres 60
wait_healthy app-a 300
wait_healthy app-b 300
wait_healthy proxy 60
wait_healthy shop 120

# ---------------------------------------------------------------------------------------------
begin_step "pg checks"
for service in "${SERVICES[@]}"; do container[$service]="$("${COMPOSE[@]}" ps -q "$service")"; done
for service in "${SERVICES[@]}"; do
  ports="$(podman port "${container[$service]}")"
  if [ "$service" = proxy ]; then
    [ "$ports" = "3000/tcp -> 127.0.0.1:3000" ] || fail "nginx publishes $ports, not only 127.0.0.1:3000"
  else
    [ -z "$ports" ] || fail "$service publishes a port: $ports"
  fi
done
say "✓ published: nginx's 127.0.0.1:3000 only (PostgreSQL, both app instances and the shop: none)"

# PostgreSQL has no network but its own loopback, and listens there only (its socket is the way in).
postgres_id="${container[postgres]}"
[ "$(podman inspect --format '{{.HostConfig.NetworkMode}}' "$postgres_id")" = none ] \
  || fail "the postgres container has a network"
interfaces="$(podman exec "$postgres_id" ls /sys/class/net | tr '\n' ' ')"
[ "$interfaces" = "lo " ] || fail "the postgres container has the interfaces $interfaces, not only lo"
listeners="$(podman exec "$postgres_id" cat /proc/net/tcp /proc/net/tcp6 | awk '$4 == "0A" { print $2 }' | sort -u | tr '\n' ' ')"
[ "$listeners" = "0100007F:1538 " ] || fail "PostgreSQL listens on $listeners (hex), not only 127.0.0.1:5432"
say "✓ PostgreSQL has no network (interfaces: lo) and listens on 127.0.0.1:5432 inside its container only"

# Round robin: the health endpoint and the pages through the one port, then nginx's log names the
# instance that answered each request, by its address on the apps' network.
address_a="$(address_on app-a app)"
address_b="$(address_on app-b app)"
[ -n "$address_a" ] && [ -n "$address_b" ] && [ "$address_a" != "$address_b" ] \
  || fail "no distinct addresses of app-a ($address_a) and app-b ($address_b) on the app network"
for _ in 1 2 3 4; do
  health="$(curl -fsS "$APP_URL/api/health")" || fail "$APP_URL/api/health did not answer"
  [ "$(node -e 'process.stdout.write(JSON.parse(process.argv[1]).searchMode ?? "")' "$health")" = hybrid ] \
    || fail "/api/health does not say hybrid search: $health"
done
for path in / "/approve?as=child" "/approve?as=parent"; do
  for _ in 1 2; do
    code="$(curl -sS -o /dev/null -w '%{http_code}' "$APP_URL$path")"
    [ "$code" = 200 ] || fail "$APP_URL$path answered $code, not 200"
  done
done
served_a="$(served_by "$address_a")"
served_b="$(served_by "$address_b")"
[ "$served_a" -gt 0 ] && [ "$served_b" -gt 0 ] \
  || fail "nginx's round robin did not reach both instances: app-a answered $served_a of 10 requests, app-b $served_b"
say "✓ /api/health (hybrid) 4 times, /, /approve?as=child and /approve?as=parent twice each: 200; app-a ($address_a) answered $served_a, app-b ($address_b) $served_b"

# One household: app-a made it and printed both codes; app-b, on the same database, found it and
# its live codes, and printed none.
log_a="$(log_of app-a)"
log_b="$(log_of app-b)"
for role in child parent; do
  grep -qE "Enrollment code for $role: $role-[0-9A-Z]{4}-[0-9A-Z]{4}-[0-9A-Z]{4}" <<<"$log_a" \
    || fail "app-a's log shows no enrollment code for $role"
  if grep -qE "Enrollment code for $role: $role-" <<<"$log_b"; then
    fail "app-b printed an enrollment code for $role too: the household's codes were issued twice"
  fi
  grep -qF "Enrollment code for $role: the one printed earlier is still unused" <<<"$log_b" \
    || fail "app-b's log does not say that the $role's code printed earlier is still unused"
done
live="$(database "SELECT string_agg(role, ' ' ORDER BY role) FROM enrollment_codes WHERE used_at IS NULL")"
[ "$live" = "child parent" ] || fail "the database's unused enrollment codes are for '$live', not the child and the parent"
# One set of identities: the household record's admin, members and settlement DIDs are the only
# DIDs in the database (a second setup would have added its own).
admin_did="$(database "SELECT value::json->>'adminDid' FROM identity_records WHERE kind = 'household' AND id = 'household'")"
[ -n "$admin_did" ] || fail "the database holds no household record"
dids="$(database "SELECT count(*), count(*) FILTER (WHERE d.id NOT IN (h.value::json->>'adminDid',
  h.value::json->'members'->>'child', h.value::json->'members'->>'parent', h.value::json->>'settlementDid'))
  FROM identity_records d, identity_records h WHERE d.kind = 'did' AND h.kind = 'household' AND h.id = 'household'")"
[ "$dids" = "4|0" ] || fail "the database's DIDs are not the one household's four (all, not the household's: $dids)"
# Both instances serve the one admin DID document: four requests, round robin, one body.
before_a="$(served_by "$address_a")"
before_b="$(served_by "$address_b")"
documents=""
for _ in 1 2 3 4; do
  document="$(curl -fsS "$APP_URL/.well-known/did.json")" || fail "$APP_URL/.well-known/did.json did not answer"
  grep -qF "\"id\":\"$admin_did\"" <<<"$document" || fail "a DID document served is not the household's $admin_did"
  documents+="$(sha256sum <<<"$document")"$'\n'
done
[ "$(sort -u <<<"$documents" | grep -c .)" = 1 ] || fail "the instances serve different DID documents"
[ "$(served_by "$address_a")" -gt "$before_a" ] && [ "$(served_by "$address_b")" -gt "$before_b" ] \
  || fail "the DID document was not served by both instances"
say "✓ one household: app-a printed both codes, app-b printed none (both still unused in the database); one admin DID ($admin_did), the same document from both instances"

# Each instance connected to the shop itself, from its own address on the shop's network.
shop_a="$(address_on app-a shop)"
shop_b="$(address_on app-b shop)"
waited=0
until shop_log="$(log_of shop)" \
  && grep -q "\"event\":\"client-connected\",\"address\":\"$shop_a\"" <<<"$shop_log" \
  && grep -q "\"event\":\"client-connected\",\"address\":\"$shop_b\"" <<<"$shop_log"; do
  waited=$((waited + 1))
  [ "$waited" -lt 60 ] || fail "the shop logged no client-connected from both app-a ($shop_a) and app-b ($shop_b) within 60 s"
  sleep 1
done
say "✓ both instances reached the shop over its internal network (client connected from $shop_a and $shop_b)"

say "the order in Chromium through $APP_URL, nginx in front of both instances (tests/deploy/compose-order.spec.ts)"
before_a="$(served_by "$address_a")"
before_b="$(served_by "$address_b")"
run_order_spec
if grep -qv '^passed' "$work/order-results" || [ "$order_code" -ne 0 ]; then
  fail "the order through nginx failed (exit $order_code)"
fi
order_a=$(($(served_by "$address_a") - before_a))
order_b=$(($(served_by "$address_b") - before_b))
[ "$order_a" -gt 0 ] && [ "$order_b" -gt 0 ] \
  || fail "the order's requests did not reach both instances (app-a $order_a, app-b $order_b)"
[ "$(database "SELECT count(*) FROM enrollment_codes WHERE used_at IS NOT NULL")" = 2 ] \
  || fail "app-a's printed codes did not both enrol"
[ "$(database "SELECT count(*) FROM passkeys")" = 2 ] || fail "the database does not hold the two passkeys"
[ "$(database "SELECT count(*) FROM payments WHERE state = 'succeeded'")" = 1 ] \
  || fail "the database does not hold exactly one succeeded charge"
say "✓ a whole \$15 order in Chromium through nginx: app-a answered $order_a of its requests, app-b $order_b; app-a's codes enrolled both passkeys; one succeeded charge"
for service in "${SERVICES[@]}"; do
  restarts="$(podman inspect --format '{{.RestartCount}}' "${container[$service]}")"
  [ "$restarts" = 0 ] || fail "$service restarted $restarts times during the run"
done
say "✓ no container restarted"

# ---------------------------------------------------------------------------------------------
begin_step "pg down"
"${COMPOSE[@]}" down -v --remove-orphans --timeout 10
stop_group "$health_loop_pid"
health_loop_pid=""
stop_group "$service_pid"
service_pid=""
left="$(leftovers)"
[ -z "$left" ] || fail "left behind after down -v: $left"
say "nothing left: no container, network or volume of $PROJECT, no API service, no healthcheck loop"
end_step
}

# On one line: bash reads a script as it runs it, so a line after this one would be read from
# the file as it is when main returns, edited or not.
main "$@"; exit
