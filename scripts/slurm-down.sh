#!/usr/bin/env bash
# Stop the Slurm that scripts/slurm-up.sh started: the namespaced clusters' slurmds and
# slurmctlds, then slurmd, slurmctld, slurmdbd, mariadbd, munged, in that order, each by
# the process id slurm-up.sh recorded, and only after checking /proc/PID/comm (a pid file
# on disk can outlive its process, and the pid be reused). Daemons it did not start are
# left alone. Configuration and job state are kept; the namespaces and the bridge go.

set -euo pipefail

# shellcheck source=scripts/slurm-lib.sh
source "$(dirname "$0")/slurm-lib.sh"

say() { printf 'slurm-down: %s\n' "$*"; }

[ "$(id -u)" = 0 ] || {
  echo "slurm-down: error: run as root" >&2
  exit 1
}

# stop RECORD [NAME]: the process recorded as RECORD, whose comm starts with NAME
# (default: RECORD).
stop() {
  local record="$STATE/$1.pid" name=${2:-$1} pid comm i
  [ -s "$record" ] || return 0
  pid=$(tr -dc '0-9' <"$record")
  if [ -z "$pid" ] || [ ! -r "/proc/$pid/comm" ] || [[ "$(cat "/proc/$pid/comm")" != "$name"* ]]; then
    say "$name (pid ${pid:-?}) is not running"
    rm -f "$record"
    return 0
  fi
  kill -TERM "$pid" 2>/dev/null || true
  for i in $(seq 1 100); do
    if [ ! -r "/proc/$pid/comm" ] || [[ "$(cat "/proc/$pid/comm" 2>/dev/null)" != "$name"* ]]; then
      break
    fi
    sleep 0.1
  done
  if [ -r "/proc/$pid/comm" ] && [[ "$(cat "/proc/$pid/comm" 2>/dev/null)" == "$name"* ]]; then
    say "$name (pid $pid) did not stop in 10 s; killing it"
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$record"
  say "stopped $name (pid $pid)"
}

# The namespaced clusters first (they use munge and slurmdbd).
for f in "$STATE"/node-*; do
  [ -e "$f" ] || continue
  stop "slurmd-${f##*/node-}" slurmd
done
stop slurmd-n1 slurmd # recorded by an older slurm-up.sh, without node-* files
stop slurmd-n2 slurmd
stop slurmctld-pair slurmctld
stop slurmctld-nodes slurmctld

for name in slurmd slurmctld slurmdbd mariadbd munged; do
  stop "$name"
done

# Their namespaces (with whatever still runs in them: a node's job steps) and the bridge.
for f in "$STATE"/node-*; do
  [ -e "$f" ] || continue
  ns=$(sed -n 's/^NS=//p' "$f")
  for pid in $(ns_pids "$ns"); do kill -KILL "$pid" 2>/dev/null || true; done
  if [ -e "/run/netns/$ns" ]; then ip netns del "$ns" 2>/dev/null || true; fi
  rm -f "$f"
done
for ns in gpl-n1 gpl-n2; do
  if [ -e "/run/netns/$ns" ]; then ip netns del "$ns" 2>/dev/null || true; fi
done
if ip link show "$BRIDGE" >/dev/null 2>&1; then ip link del "$BRIDGE" 2>/dev/null || true; fi
