#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for the tests: on 127.0.0.1 only, on its own port, in a temporary directory, run by an
# unprivileged user (PostgreSQL refuses to run as root). CI uses it; so can a developer:
#
#   export TEST_DATABASE_URL=$(scripts/pg-test-cluster.sh start)   # prints the URL of the database `petstore`
#   npm test && npm run test:system
#   scripts/pg-test-cluster.sh fresh-db acceptance                  # (re)creates an empty database, prints its URL
#   scripts/pg-test-cluster.sh stop                                 # stops the cluster and deletes its directory
#   scripts/pg-test-cluster.sh bindir                               # where the server binaries are (fails if none)
#
# Environment: PG_TEST_PORT (25432: below Linux's ephemeral ports, 32768 and up, which a client connection in TIME_WAIT
# may hold after a load test), PG_TEST_DIR (${TMPDIR:-/tmp}/petstore-pg-$PG_TEST_PORT), PG_TEST_USER (the OS user
# that runs the server when this script runs as root; petstore-ci, created when missing). PG_BINDIR overrides where the
# server binaries are looked for. Progress goes to stderr; stdout carries only the URL.
set -euo pipefail

port=${PG_TEST_PORT:-25432}
dir=${PG_TEST_DIR:-${TMPDIR:-/tmp}/petstore-pg-$port}
os_user=${PG_TEST_USER:-petstore-ci}
# The database role and its password: a throwaway cluster on loopback, but with password authentication, so that the
# tests can check the password never shows in a log line or an error.
role=petstore
password=petstore-test-password

say() { printf 'pg-test-cluster: %s\n' "$*" >&2; }

bindir() {
  if [[ -n ${PG_BINDIR:-} ]]; then echo "$PG_BINDIR"; return; fi
  if command -v pg_config >/dev/null 2>&1 && [[ -x $(pg_config --bindir)/pg_ctl ]]; then pg_config --bindir; return; fi
  local found
  found=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
  if [[ -n $found && -x $found/pg_ctl ]]; then echo "$found"; return; fi
  say "no PostgreSQL server binaries found (install Debian's 'postgresql' package, or set PG_BINDIR)"
  exit 1
}

# Runs a command as the unprivileged owner of the cluster (as ourselves when we are not root).
as_owner() {
  if [[ $(id -u) == 0 ]]; then runuser -u "$os_user" -- "$@"; else "$@"; fi
}

url_of() { echo "postgres://$role:$password@127.0.0.1:$port/$1"; }

psql_admin() { PGPASSWORD=$password PGOPTIONS='-c client_min_messages=warning' "$(bindir)/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$port" -U "$role" -d postgres "$@"; }

running() { [[ -f $dir/data/PG_VERSION ]] && as_owner "$(bindir)/pg_ctl" -D "$dir/data" status >/dev/null 2>&1; }

start() {
  local bin
  bin=$(bindir)
  if running; then
    say "already running on 127.0.0.1:$port ($dir)"
  else
    if [[ $(id -u) == 0 ]] && ! id "$os_user" >/dev/null 2>&1; then
      say "creating the unprivileged user $os_user"
      useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin "$os_user"
    fi
    rm -rf "$dir"
    mkdir -p "$dir"
    printf '%s\n' "$password" >"$dir/pwfile"
    [[ $(id -u) == 0 ]] && chown -R "$os_user" "$dir"
    chmod 700 "$dir"
    say "initdb in $dir ($bin)"
    as_owner "$bin/initdb" -D "$dir/data" -U "$role" --pwfile="$dir/pwfile" --auth-local=scram-sha-256 \
      --auth-host=scram-sha-256 --encoding=UTF8 --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 \
      || { cat "$dir/initdb.log" >&2; exit 1; }
    rm -f "$dir/pwfile"
    # Durability is not under test here: no fsync, to keep the suites fast. Loopback only.
    say "starting on 127.0.0.1:$port"
    as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 30 start -o \
      "-c listen_addresses=127.0.0.1 -c port=$port -c unix_socket_directories='$dir' -c max_connections=300 -c fsync=off -c synchronous_commit=off -c full_page_writes=off" \
      >&2 || { tail -n 30 "$dir/server.log" >&2; exit 1; }
  fi
  fresh_db petstore keep
}

# Creates the database NAME if missing (keep), or drops and recreates it empty; prints its URL.
fresh_db() {
  local name=${1:?database name} mode=${2:-fresh}
  [[ $name =~ ^[a-z_][a-z0-9_]*$ ]] || { say "bad database name: $name"; exit 2; }
  running || { say "the cluster is not running: scripts/pg-test-cluster.sh start"; exit 1; }
  if [[ $mode == fresh ]]; then psql_admin -c "DROP DATABASE IF EXISTS $name WITH (FORCE)"; fi
  if [[ -z $(psql_admin -tA -c "SELECT 1 FROM pg_database WHERE datname = '$name'") ]]; then
    psql_admin -c "CREATE DATABASE $name"
  fi
  url_of "$name"
}

stop() {
  if running; then
    say "stopping the cluster on 127.0.0.1:$port"
    as_owner "$(bindir)/pg_ctl" -D "$dir/data" -m fast -w stop >&2 || true
  fi
  rm -rf "$dir"
}

case ${1:-} in
  start) start ;;
  stop) stop ;;
  fresh-db) fresh_db "${2:-}" ;;
  url) url_of petstore ;;
  bindir) bindir ;;
  *) echo "usage: $0 start|stop|fresh-db NAME|url|bindir" >&2; exit 2 ;;
esac
