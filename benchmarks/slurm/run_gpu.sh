#!/usr/bin/env bash
# gpulane's Slurm path on a lent GPU machine (issue 24 item 6, issue 30): a single-node
# Slurm with gres/gpu for all its GPUs (4 on nvidia-h200-x4 / nvidia-h100-x4; at most
# GPULANE_SLURM_GPUS, default 4), from Debian's packages unpacked into a folder (not over
# /), then, one rank per GPU:
#   1. srun with one task per GPU: which GPU each task sees;
#   2. gpulane sweep launcher=slurm launcher.gpus_per_node=N, alternated twice with the
#      same sweep under the local launcher: rows, transport and path labels must agree
#      (busbw within 10 % at 64 MiB and up);
#   3. gpulane accept launcher=slurm launcher.gpus_per_node=N suite.localize=always
#      suite.localize_pattern=halving, and the same accept with the local launcher: the
#      verdict, the localization (what it names, how many subsets) and the topology must
#      agree;
#   4. (GPULANE_SLURM_ARRAY=1 only) gpulane sweep -m ... preset=nvlink,pcie-host, a job
#      array of two elements through hydra-submitit-launcher.
# Everything lands in $OUT (or the first argument): steps.log, each step's output, the
# rows, compare.md, the Slurm configuration and daemon logs. About 5 minutes on 4x H200
# (about 3 with GPULANE_SLURM_SWEEPS=1, as benchmarks/gpu/call_round3.sh runs it).
#
# Usage on the GPU machine, from the repository root:
#   benchmarks/slurm/run_gpu.sh [OUTDIR] [DEBDIR]      # DEBDIR default: .debs
#
# The GPU machine reaches no registry, so the .deb files travel with the working tree.
# The lead fetches them on this (x86-64 Debian 12) machine, into the ignored .debs/:
#   mkdir -p .debs && cd .debs && apt-get update -qq &&
#   apt-get download slurmctld slurmd slurm-client slurm-wlm-basic-plugins munge \
#     libmunge2 libhwloc15 libjson-c5 liblua5.1-0 liblz4-1 libnuma1 libyaml-0-2
# (all amd64, about 6 MB; `apt-get download` fetches the machine's own architecture, and
# this machine is amd64: `dpkg --print-architecture`). Then a `run` call carries them:
#   run(command="benchmarks/slurm/run_gpu.sh /tmp/out", carry=[".debs", ".whl"],
#       kind="nvidia-h200-x4")
# together with .whl/ (hydra-core, omegaconf, antlr4, submitit, cloudpickle for Python
# 3.12; benchmarks/gpu/env.sh installs them). The C library and the other base libraries
# are not carried: the packages' libraries go first on LD_LIBRARY_PATH, and a library the
# host lacks is named by `ldd` in steps.log before anything starts.
#
# GPULANE_SLURM_NOGPU=1 tries the packages without GPUs (no gres; stops after one srun):
# how the unpacked Slurm is checked on the CPU machine before the GPU run.
# GPULANE_SLURM_FAKEGPU=N: gres/gpu with N stand-in device files (/dev/tty1..N): the node
# must register Gres=gpu:N and the sruns must hand out CUDA_VISIBLE_DEVICES; stops there,
# or with GPULANE_SLURM_CPU_RUNS=1 goes on through the gpulane steps on gloo (device=cpu).
# On the 2-core CPU machine, beside the test cluster of scripts/slurm-up.sh:
#   GPULANE_SLURM_FAKEGPU=4 GPULANE_SLURM_CPUS=8 GPULANE_SLURM_WORK=/tmp/gsw1 \
#   GPULANE_SLURM_PORT=7917 benchmarks/slurm/run_gpu.sh /tmp/out /work/main/.debs
# (its own work folder, ports, slurm.conf and munge socket; CPUS: config_overrides lets
# the node advertise more CPUs than it has, so that N tasks fit). Also settable:
# GPULANE_SLURM_SWEEPS (sweeps each way, default 2), GPULANE_SLURM_SIZES_MAX (1G),
# GPULANE_SLURM_ITERS (20), GPULANE_SLURM_GPUS (4), GPULANE_SLURM_ARRAY (0).
#
# Exit status: 0 when every step ran and the Slurm results agree with the local ones;
# otherwise 1, with what stopped it in steps.log.
set -u -o pipefail

OUT=${1:-${OUT:-/tmp/gpulane-slurm-gpu}}
DEBS=${2:-.debs}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
cd "$(dirname "$0")/../.." || exit 1
out=$OUT # for env.sh's step()
source benchmarks/gpu/env.sh
WORK=${GPULANE_SLURM_WORK:-/tmp/gpulane-slurm}
ROOT=$WORK/root
HOST=$(hostname -s)
PORT=${GPULANE_SLURM_PORT:-7817}
ok=0

fail() {
  echo "=== STOPPED: $*" | tee -a "$OUT/steps.log"
  cp "$WORK"/log/*.log "$OUT/" 2>/dev/null # the daemons' own account of why
  exit 1
}

# run NAME LIMIT CMD...: env.sh's step, and its exit status (step itself returns 0).
run() {
  step "$@"
  local rc
  rc=$(tail -1 "$OUT/steps.log" | sed -n 's/.*: exit \([0-9]*\) in .*/\1/p')
  [ "${rc:-1}" = 0 ]
}

# --- 1. unpack the packages into $ROOT ---------------------------------------------------
ls "$DEBS"/*.deb >/dev/null 2>&1 || fail "no .deb files in $DEBS (see this script's header)"
rm -rf "$WORK"
mkdir -p "$ROOT" "$WORK"/{etc,spool/ctld,spool/d,log,run,munge}
for deb in "$DEBS"/*.deb; do
  dpkg-deb -x "$deb" "$ROOT" 2>>"$OUT/steps.log" || fail "dpkg-deb -x $deb failed"
done
LIBS="$ROOT/usr/lib/x86_64-linux-gnu/slurm-wlm:$ROOT/usr/lib/x86_64-linux-gnu:$ROOT/lib/x86_64-linux-gnu"
export LD_LIBRARY_PATH="$LIBS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PATH="$ROOT/usr/bin:$ROOT/usr/sbin:$PATH"
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "host: $HOST"
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  ls "$DEBS"
  cat /etc/os-release 2>/dev/null | head -2
  nvidia-smi -L
} >"$OUT/machine.txt" 2>&1
SBIN=$ROOT/usr/sbin # Debian names them slurmctld-wlm, slurmd-wlm, slurmstepd-wlm
# ...and its postinst (update-alternatives, not run by dpkg-deb -x) links /usr/sbin/slurmd
# to slurmd-wlm. The daemons must run under their plain names: Slurm asks its own program
# name whether it is slurmd (running_in_slurmd()), and slurmd-wlm started as "slurmd-wlm"
# reads the node's Gres= from slurm.conf as zero. That was the 2026-11-27 h200x4 run's
# `Gres=(null)` and "A line in gres.conf for GRES gpu has 4 more configured than expected
# in slurm.conf" (`slurmd-wlm -G` warns so; the same binary through a link named slurmd
# prints the 4 GPUs).
BIN=$WORK/bin
mkdir -p "$BIN"
for d in slurmctld slurmd slurmstepd; do ln -sf "$SBIN/$d-wlm" "$BIN/$d"; done
missing=$({
  for b in slurmctld-wlm slurmd-wlm slurmstepd-wlm munged; do ldd "$SBIN/$b"; done
  for b in sbatch srun sacct squeue scancel sinfo; do ldd "$ROOT/usr/bin/$b"; done
} 2>&1 | grep "not found\|No such file" | sort -u | tr -s ' \t' ' ')
[ -z "$missing" ] || fail "libraries the host lacks (add their Debian packages to .debs): $missing"

# --- 2. munge and a single-node Slurm with gres/gpu -------------------------------------
NOGPU=${GPULANE_SLURM_NOGPU:-0}
FAKE=${GPULANE_SLURM_FAKEGPU:-0}
if [ "$NOGPU" = 1 ]; then
  NGPU=0
elif [ "$FAKE" -gt 0 ]; then
  NGPU=$FAKE # stand-in device files: Slurm only counts and hands out indices
  DEVS="/dev/tty[1-$FAKE]"
else
  NGPU=$(nvidia-smi -L | grep -c '^GPU ')
  [ "$NGPU" -ge 2 ] || fail "nvidia-smi sees $NGPU GPU(s); this needs at least 2"
  WANT=${GPULANE_SLURM_GPUS:-4}
  [ "$NGPU" -gt "$WANT" ] && NGPU=$WANT
  DEVS="/dev/nvidia[0-$((NGPU - 1))]"
fi
dd if=/dev/urandom of="$WORK/munge/munge.key" bs=1 count=1024 status=none
chmod 700 "$WORK/munge"
chmod 400 "$WORK/munge/munge.key"
SOCK=$WORK/munge/munge.socket.2
"$SBIN/munged" --force --key-file="$WORK/munge/munge.key" --socket="$SOCK" \
  --pid-file="$WORK/run/munged.pid" --log-file="$WORK/log/munged.log" \
  --seed-file="$WORK/munge/munged.seed" 2>>"$OUT/steps.log" || fail "munged did not start"
for _ in $(seq 1 50); do [ -S "$SOCK" ] && break; sleep 0.1; done
MEM=$(awk '/MemTotal/ {print int($2 / 1024 * 0.8)}' /proc/meminfo)
# GPULANE_SLURM_CPUS: more CPUs than the host has (config_overrides lets the node advertise
# them), so that N tasks fit on the 2-core CPU machine in the fake-GPU check
CPUS=${GPULANE_SLURM_CPUS:-$(nproc)}
PLUGINS=$ROOT/usr/lib/x86_64-linux-gnu/slurm-wlm
export SLURM_CONF=$WORK/etc/slurm.conf
cat >"$SLURM_CONF" <<EOF
ClusterName=gpulane-gpu
SlurmctldHost=$HOST(127.0.0.1)
SlurmctldPort=$PORT
SlurmdPort=$((PORT + 1))
AuthType=auth/munge
CryptoType=crypto/munge
AuthInfo=socket=$SOCK
PluginDir=$PLUGINS
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$WORK/spool/ctld
SlurmdSpoolDir=$WORK/spool/d
SlurmctldPidFile=$WORK/run/slurmctld.pid
SlurmdPidFile=$WORK/run/slurmd.pid
SlurmctldLogFile=$WORK/log/slurmctld.log
SlurmdLogFile=$WORK/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
MailProg=/bin/true
ReturnToService=2
SlurmdParameters=config_overrides
JobRequeue=0
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
$([ "$NGPU" -gt 0 ] && echo "GresTypes=gpu")
NodeName=$HOST NodeAddr=127.0.0.1 CPUs=$CPUS Sockets=1 CoresPerSocket=$CPUS ThreadsPerCore=1 RealMemory=$MEM $([ "$NGPU" -gt 0 ] && echo "Gres=gpu:$NGPU") State=UNKNOWN
PartitionName=gpu Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
# cgroup/v1, which proctrack/linuxproc and task/none never ask for a controller: on a
# cgroup2-only host (the lent Firecracker VM) slurmd 22.05 picks cgroup/v2 by itself, whose
# plugin needs libdbus and systemd, and stops with "Unable to initialize cgroup plugin"
# (seen there 2026-11-27, benchmarks/gpu/h200x4-smoke).
echo "CgroupPlugin=cgroup/v1" >"$WORK/etc/cgroup.conf"
cat >"$WORK/etc/gres.conf" <<EOF
AutoDetect=off
$([ "$NGPU" -gt 0 ] && echo "NodeName=$HOST Name=gpu File=$DEVS")
EOF
cp "$SLURM_CONF" "$WORK/etc/gres.conf" "$OUT/"
# slurmd runs slurmstepd from the path it was built with, /usr/sbin/slurmstepd. In a mount
# namespace of its own, slurmd sees a /usr/sbin that holds the system's programs and that
# one; where mount namespaces are not allowed, a single link /usr/sbin/slurmstepd is made
# (and removed at the end) when none is there.
LINKED=""
start_slurmd() {
  # the namespace way needs bind mounts too: where they are refused (seen on the lent
  # Firecracker VM, 2026-11-27: "slurmd did not start"), fall back to the link.
  if unshare -m --propagation private sh -c "mount --bind /usr/sbin /usr/sbin" 2>/dev/null; then
    mkdir -p "$WORK/sbin" "$WORK/orig-sbin"
    for f in /usr/sbin/*; do ln -sf "$WORK/orig-sbin/${f##*/}" "$WORK/sbin/"; done
    ln -sf "$BIN/slurmstepd" "$WORK/sbin/slurmstepd"
    unshare -m --propagation private sh -c "mount --bind /usr/sbin '$WORK/orig-sbin' &&
      mount --bind '$WORK/sbin' /usr/sbin && exec '$BIN/slurmd'"
  else
    if [ ! -e /usr/sbin/slurmstepd ]; then
      ln -s "$BIN/slurmstepd" /usr/sbin/slurmstepd && LINKED=/usr/sbin/slurmstepd
      echo "=== made the link /usr/sbin/slurmstepd (no mount namespace here)" >>"$OUT/steps.log"
    fi
    "$BIN/slurmd"
  fi
}
stop_daemons() {
  local d pid
  for d in slurmd slurmctld munged; do
    pid=$(cat "$WORK/run/$d.pid" 2>/dev/null)
    if [ -n "$pid" ] && [[ "$(cat "/proc/$pid/comm" 2>/dev/null)" == "$d"* ]]; then
      kill "$pid"
    fi
  done
  for _ in $(seq 1 50); do # gone before the next start on the same ports
    pgrep -f "^$WORK/" >/dev/null || break
    sleep 0.1
  done
  [ -n "$LINKED" ] && rm -f "$LINKED"
  cp "$WORK"/log/*.log "$OUT/" 2>/dev/null
  return 0
}
trap 'stop_daemons' EXIT # also when a limit (timeout) ends this script
trap 'exit 143' TERM INT
"$BIN/slurmctld" 2>>"$OUT/steps.log" || fail "slurmctld did not start"
if ! start_slurmd 2>>"$OUT/steps.log"; then
  # its reason, in the foreground and verbose, for the record
  timeout 8 "$BIN/slurmd" -D -vvv >"$OUT/slurmd-foreground.log" 2>&1
  fail "slurmd did not start (slurmd-foreground.log)"
fi
state=""
for _ in $(seq 1 300); do
  state=$(sinfo -h -o %T 2>/dev/null | head -1)
  case "$state" in idle* | mixed*) break ;; esac
  sleep 0.1
done
sinfo -N -o '%N %T %G' >"$OUT/sinfo.txt" 2>&1
cp "$WORK"/log/*.log "$OUT/" 2>/dev/null
case "$state" in idle* | mixed*) ;; *) fail "the node is '${state:-not answering}' (slurmd.log, slurmctld.log in $OUT)" ;; esac
scontrol show node "$HOST" >"$OUT/node.txt" 2>&1
gres=$(sed -n 's/^ *Gres=\([^ ]*\).*/\1/p' "$OUT/node.txt")
echo "=== slurm up: $(sinfo --version), node $HOST $state, Gres=$gres" | tee -a "$OUT/steps.log"
if [ "$NGPU" -gt 0 ] && [ "$gres" != "gpu:$NGPU" ]; then
  stop_daemons
  fail "the node registered Gres=$gres, not gpu:$NGPU (node.txt, slurmd.log)"
fi

if [ "$NOGPU" = 1 ]; then
  run srun-cpu 60 srun -N1 -n2 bash -c 'echo "task $SLURM_PROCID on $(hostname -s)"' || ok=1
  stop_daemons
  exit $ok
fi

# --- 3. each task its own GPU ----------------------------------------------------------
# --gpus-per-node (what gpulane's launcher asks): every task sees the node's N GPUs and a
# rank takes cuda:LOCAL_RANK; --gpus-per-task=1: each task is given one GPU of its own.
TASK='echo "task $SLURM_PROCID local $SLURM_LOCALID CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES-unset}"'
run srun-gpus 60 srun -N1 -n"$NGPU" --gpus-per-node="$NGPU" -l bash -c "$TASK" || ok=1
run srun-gpu-per-task 60 srun -N1 -n"$NGPU" --gpus-per-task=1 -l bash -c "$TASK" || ok=1
# every task saw CUDA_VISIBLE_DEVICES: all N in the first, one each (all different) in the second
all=$(seq -s, 0 $((NGPU - 1)))
[ "$(grep -c "CUDA_VISIBLE_DEVICES=$all\$" "$OUT/srun-gpus.txt")" = "$NGPU" ] || ok=1
[ "$(grep -o 'CUDA_VISIBLE_DEVICES=[0-9]*$' "$OUT/srun-gpu-per-task.txt" | sort -u | wc -l)" = "$NGPU" ] || ok=1
log "srun: $([ $ok = 0 ] && echo "every task saw its GPUs" || echo "NOT every task saw its GPUs")"

if [ "$FAKE" -gt 0 ] && [ "${GPULANE_SLURM_CPU_RUNS:-0}" != 1 ]; then
  stop_daemons
  exit $ok
fi

# --- 4. the same sweep under Slurm and locally, one rank per GPU ------------------------
RUNS=$OUT/runs
SLURM=(launcher=slurm "launcher.gpus_per_node=$NGPU" launcher.poll_s=1)
# GPULANE_SLURM_SIZES_MAX / _ITERS: smaller for the fake-GPU run on CPUs (gloo)
SMAX=${GPULANE_SLURM_SIZES_MAX:-1G}
ITERS=${GPULANE_SLURM_ITERS:-20}
SWEEP=("collectives=[all_reduce,all_gather]" sizes.min=8 "sizes.max=$SMAX" warmup=5 "iters=$ITERS" progress=false)
# stand-in GPUs: Slurm sets CUDA_VISIBLE_DEVICES, so the ranks are told to run on the CPU
[ "$FAKE" -gt 0 ] && SWEEP+=(device=cpu)
# alternated (GPULANE_SLURM_SWEEPS times each, default 2): compared at 64 MiB and up
for k in $(seq 1 "${GPULANE_SLURM_SWEEPS:-2}"); do
  run "slurm-$k" 300 gpulane sweep "${SLURM[@]}" "${SWEEP[@]}" results_dir="$RUNS/slurm" build=slurm || ok=1
  run "local-$k" 300 gpulane sweep "ranks=$NGPU" "${SWEEP[@]}" results_dir="$RUNS/local" build=local || ok=1
done
for f in "$RUNS"/slurm/*/preflight.json; do cp "$f" "$OUT/preflight-$(basename "$(dirname "$f")").json"; done

# --- 5. accept under Slurm and locally, localization included ---------------------------
# copies are left out here (they do not go through the launcher): their rules are skipped knowingly
ACCEPT=(suite.copy=false suite.localize=always suite.localize_pattern=halving html=false
        --allow-skip "p2p_copy_nvlink,pinned_h2d,pinned_d2h,pinned_h2d_all_gpus,pinned_d2h_all_gpus")
[ -n "${GPULANE_SLURM_SIZES_MAX:-}" ] && ACCEPT+=("suite.sizes_max=$SMAX")
if [ "$FAKE" -gt 0 ]; then
  ACCEPT+=("suite.sweep_overrides=['iters=$ITERS','device=cpu']" "suite.localize_overrides=['device=cpu']")
elif [ -n "${GPULANE_SLURM_ITERS:-}" ]; then
  ACCEPT+=("suite.sweep_overrides=['iters=$ITERS']")
fi
run accept-slurm 300 gpulane accept "${SLURM[@]}" "${ACCEPT[@]}" results_dir="$RUNS/accept-slurm" build=slurm
run accept-local 300 gpulane accept "${ACCEPT[@]}" results_dir="$RUNS/accept-local" build=local

# --- 6. a job array over presets (optional) ---------------------------------------------
if [ "${GPULANE_SLURM_ARRAY:-0}" = 1 ]; then
  run array 600 gpulane sweep -m "${SLURM[@]}" preset=nvlink,pcie-host "${SWEEP[@]}" \
    results_dir="$RUNS/array" "hydra.sweep.dir=$RUNS/array/multirun" || ok=1
fi

# --- 7. the rows, transports, labels, verdicts and localizations compared ----------------
python3 benchmarks/slurm/compare_gpu.py "$RUNS" >"$OUT/compare.md" 2>&1 || ok=1
tail -8 "$OUT/compare.md" | tee -a "$OUT/steps.log"

# --- 8. stop what this script started ---------------------------------------------------
stop_daemons
echo "=== outcome: $([ $ok = 0 ] && echo 'every step ran; Slurm rows match the local ones' || echo 'see steps.log')" | tee -a "$OUT/steps.log"
exit $ok
