#!/usr/bin/env bash
# Installs what the tests need on a fresh machine: the npm packages pinned in
# package-lock.json, Debian's chromium-headless-shell when
# /usr/bin/chromium-headless-shell is missing (the browser tests' Chromium:
# test/chromium.mjs), curl when it is missing (docs/fencing.md's
# fence-proxy session runs it), and
# Debian's postgresql when no /usr/lib/postgresql/*/bin/initdb exists (the
# sqlfence tests start their own server in a temporary directory; the package
# is installed without creating or starting the system's cluster), and
# Debian's redis-server when it is missing (the redisfence tests start their
# own server on a free port; the package's service is not started).
set -euo pipefail
cd "$(dirname "$0")/.."

# install_unstarted installs Debian package $1 without starting its service:
# a policy-rc.d that refuses every start stands while apt-get runs, unless
# the machine already has one.
install_unstarted() {
  local policy_added=
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
    chmod 755 /usr/sbin/policy-rc.d
    policy_added=1
  fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$1" >/dev/null
  [ -z "$policy_added" ] || rm -f /usr/sbin/policy-rc.d
}

lock_sum=$(sha256sum package-lock.json | cut -d' ' -f1)
if [ ! -f node_modules/.lock-sum ] || [ "$(cat node_modules/.lock-sum)" != "$lock_sum" ]; then
  echo "setup: npm ci"
  npm ci --no-audit --no-fund
  echo "$lock_sum" > node_modules/.lock-sum
fi

need=()
[ -x /usr/bin/chromium-headless-shell ] || need+=(chromium-headless-shell)
command -v curl >/dev/null || need+=(curl)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup: missing Debian packages: ${need[*]}; run as root or: apt-get install -y ${need[*]}" >&2
    exit 1
  fi
  echo "setup: apt-get install ${need[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi

if ! compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup: PostgreSQL is missing; run as root or: apt-get install -y postgresql" >&2
    exit 1
  fi
  echo "setup: apt-get install postgresql (no cluster created, no service started)"
  mkdir -p /etc/postgresql-common/createcluster.d
  echo 'create_main_cluster = false' > /etc/postgresql-common/createcluster.d/lease-fence.conf
  install_unstarted postgresql
fi

if ! command -v redis-server >/dev/null; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup: redis-server is missing; run as root or: apt-get install -y redis-server" >&2
    exit 1
  fi
  echo "setup: apt-get install redis-server (its service not started)"
  install_unstarted redis-server
fi
