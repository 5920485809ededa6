#!/usr/bin/env bash
# Installs what the tests need on a fresh machine: the npm packages pinned in
# package-lock.json, and Debian's chromium when /usr/bin/chromium is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

lock_sum=$(sha256sum package-lock.json | cut -d' ' -f1)
if [ ! -f node_modules/.lock-sum ] || [ "$(cat node_modules/.lock-sum)" != "$lock_sum" ]; then
  echo "setup: npm ci"
  npm ci --no-audit --no-fund
  echo "$lock_sum" > node_modules/.lock-sum
fi

need=()
[ -x /usr/bin/chromium ] || need+=(chromium)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup: missing Debian packages: ${need[*]}; run as root or: apt-get install -y ${need[*]}" >&2
    exit 1
  fi
  echo "setup: apt-get install ${need[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
