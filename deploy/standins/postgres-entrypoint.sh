#!/bin/sh
# The stand-in postgres image's entrypoint (deploy/standins/standins.Containerfile): what the
# official image's docker-entrypoint.sh does for deploy/docker-compose.postgres.yml, and nothing
# it does not. As root it makes the data and socket folders the postgres user's and runs itself
# again as that user. An empty data folder is initialised first: initdb with POSTGRES_USER as the
# superuser, POSTGRES_HOST_AUTH_METHOD for connections from other hosts, then, on a server that
# listens on its unix socket only (as the official image's temporary server does), the database
# POSTGRES_DB; that server is stopped, and `postgres` is exec'd as the container's PID 1.
# Anything this subset does not do (a password, init scripts) is refused, never ignored.
set -eu

if [ "${1#-}" != "$1" ]; then
  set -- postgres "$@"
fi
[ "${1:-}" = postgres ] || exec "$@"

if [ "$(id -u)" = 0 ]; then
  mkdir -p "$PGDATA" /var/run/postgresql
  chown postgres:postgres "$PGDATA" /var/run/postgresql
  chmod 700 "$PGDATA"
  chmod 3777 /var/run/postgresql
  exec setpriv --reuid=postgres --regid=postgres --init-groups "$0" "$@"
fi

if [ ! -s "$PGDATA/PG_VERSION" ]; then
  if [ -n "${POSTGRES_PASSWORD:-}" ] || [ "${POSTGRES_HOST_AUTH_METHOD:-}" != trust ]; then
    echo "postgres stand-in: only POSTGRES_HOST_AUTH_METHOD=trust without POSTGRES_PASSWORD is supported" >&2
    exit 1
  fi
  if [ -d /docker-entrypoint-initdb.d ] && [ -n "$(ls -A /docker-entrypoint-initdb.d)" ]; then
    echo "postgres stand-in: /docker-entrypoint-initdb.d is not supported" >&2
    exit 1
  fi
  user="${POSTGRES_USER:-postgres}"
  database="${POSTGRES_DB:-$user}"
  initdb --username="$user" --pgdata="$PGDATA"
  printf '\nhost all all all %s\n' "$POSTGRES_HOST_AUTH_METHOD" >>"$PGDATA/pg_hba.conf"
  pg_ctl --pgdata="$PGDATA" --wait --options="-c listen_addresses='' -p 5432" start
  if [ "$database" != postgres ]; then
    # From stdin, where psql quotes the variable as an identifier (it does not in --command).
    echo 'CREATE DATABASE :"database";' \
      | psql --no-psqlrc --set ON_ERROR_STOP=1 --username="$user" --dbname=postgres --set database="$database"
  fi
  pg_ctl --pgdata="$PGDATA" --wait --mode=fast stop
  echo "postgres stand-in: init process complete; ready for start up."
fi

exec "$@"
