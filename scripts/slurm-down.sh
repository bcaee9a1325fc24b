#!/usr/bin/env bash
# Stop the single-node Slurm that scripts/slurm-up.sh started: slurmd, slurmctld, slurmdbd,
# mariadbd, munged, in that order, each by the process id slurm-up.sh recorded, and only
# after checking /proc/PID/comm (a pid file on disk can outlive its process, and the pid be
# reused). Daemons it did not start are left alone. Configuration and job state are kept.

set -euo pipefail

STATE=${GPULANE_SLURM_STATE:-/run/gpulane-slurm}

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

# The 2-node cluster in network namespaces first (it uses munge and slurmdbd).
stop slurmd-n1 slurmd
stop slurmd-n2 slurmd
stop slurmctld-pair slurmctld

for name in slurmd slurmctld slurmdbd mariadbd munged; do
  stop "$name"
done

# Its namespaces and bridge (its configuration, /etc/slurm-pair, is kept).
for ns in gpl-n1 gpl-n2; do
  if [ -e "/run/netns/$ns" ]; then ip netns del "$ns" 2>/dev/null || true; fi
done
if ip link show gplbr >/dev/null 2>&1; then ip link del gplbr 2>/dev/null || true; fi
