#!/usr/bin/env bash
# Bring up a real Slurm on this Debian machine, for trying gpulane's Slurm path on one box
# and for the Slurm tests in CI: a single-node cluster, a 2-node cluster in network
# namespaces (n1, n2), and on request a cluster of N nodes in network namespaces (c1..cN).
#
#   sudo scripts/slurm-up.sh       # install what is missing, write the configs, start daemons
#   sudo scripts/slurm-up.sh 8     # ... and the 8-node cluster c1..c8 (GPULANE_SLURM_NODES=8)
#   sudo scripts/slurm-down.sh     # stop what this script started (by process id)
#   sudo scripts/slurm-fault.sh c3 slow|lossy|down|clear   # faults on a node's link
#
# What it starts, in order: munged (as user munge), mariadbd (accounting database),
# slurmdbd, slurmctld, slurmd; then each namespaced cluster's slurmctld and slurmds.
# With accounting, `sacct` and submitit know job states (COMPLETED, FAILED, CANCELLED,
# TIMEOUT, NODE_FAIL) instead of UNKNOWN.
#
# Idempotent: run it again and it only starts what is not running; when everything is
# installed and up it returns in about a second.
#
# It writes /etc/slurm/slurm.conf, /etc/slurm/slurmdbd.conf (and gres.conf where
# nvidia-smi sees GPUs), /etc/slurm-pair/ and /etc/slurm-nodes/, and refuses to
# overwrite a slurm.conf it did not write itself (set GPULANE_SLURM_FORCE=1 to take it
# over). Process ids of what it started are kept in $GPULANE_SLURM_STATE (default
# /run/gpulane-slurm) for slurm-down.sh, with each namespaced node's facts
# (node-<name>) for slurm-fault.sh.
#
# Settings (environment):
#   GPULANE_SLURM_NODES      nodes of the namespaced cluster (the argument wins; default 2:
#                            only the pair; 3 or more: also c1..cN; 8 fits the 2-core CI box)
#   GPULANE_SLURM_CPUS       CPUs the node advertises (default: the larger of nproc and 4;
#                            more than the machine has lets small test jobs run side by side)
#   GPULANE_SLURM_LINK_KBIT  line rate of every namespaced node's link, kbit/s (default
#                            1000000 = 1 Gbit/s; 0: unshaped)
#   GPULANE_SLURM_STATE      where the pid records go
#   GPULANE_SLURM_FORCE      1: overwrite an existing /etc/slurm/slurm.conf

set -euo pipefail

# shellcheck source=scripts/slurm-lib.sh
source "$(dirname "$0")/slurm-lib.sh"
CONF_DIR=/etc/slurm
NODES=${1:-${GPULANE_SLURM_NODES:-2}}
DB_PASS=gpulane-slurm
CLUSTER=gpulane
# iproute2 (ip, tc), nftables and ethtool: the namespaced clusters and slurm-fault.sh
PACKAGES=(munge slurmctld slurmd slurm-client slurmdbd mariadb-server openmpi-bin libopenmpi-dev
  iproute2 nftables ethtool)

say() { printf 'slurm-up: %s\n' "$*"; }
die() {
  printf 'slurm-up: error: %s\n' "$*" >&2
  exit 1
}

[ "$(id -u)" = 0 ] || die "run as root (it installs packages and starts system daemons)"
[[ "$NODES" =~ ^[0-9]+$ ]] && [ "$NODES" -ge 2 ] && [ "$NODES" -le 99 ] ||
  die "nodes: expected a whole number from 2 to 99, got '$NODES'"

# --- packages (MPI before slurmd starts: srun --mpi=pmix needs libpmix at slurmd start) ----
missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -gt 0 ]; then
  say "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# --- helpers ---------------------------------------------------------------------------
# record NAME PIDFILE: remember that this script started NAME (for slurm-down.sh).
record() {
  local name=$1 file=$2 i
  for i in $(seq 1 100); do
    if alive "$name" "$file"; then
      tr -dc '0-9' <"$file" >"$STATE/$name.pid"
      return 0
    fi
    sleep 0.1
  done
  die "$name did not start (pid file $file); see its log under $LOG_DIR or /var/log"
}

# wait_for WHAT SECONDS COMMAND...: retry COMMAND until it succeeds.
wait_for() {
  local what=$1 secs=$2 i
  shift 2
  for i in $(seq 1 $((secs * 10))); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.1
  done
  die "$what is not answering after ${secs} s"
}

mkdir -p "$STATE" "$LOG_DIR" "$SPOOL/slurmctld" "$SPOOL/slurmd" "$CONF_DIR"

HOST=$(hostname -s)
if ! getent hosts "$HOST" >/dev/null; then
  # slurmd and srun look the node up by name.
  echo "127.0.0.1 $HOST" >>/etc/hosts
fi

# --- configuration ---------------------------------------------------------------------
if [ -f "$CONF_DIR/slurm.conf" ] && ! grep -qF "$MARKER" "$CONF_DIR/slurm.conf" &&
  [ "${GPULANE_SLURM_FORCE:-0}" != 1 ]; then
  die "$CONF_DIR/slurm.conf exists and was not written by this script; set GPULANE_SLURM_FORCE=1 to replace it"
fi

# A batch job is scheduled when it is submitted, not up to batch_sched_delay (3 s by
# default) later: with the default, sbatch until the job ran took 0.4-2.7 s (median about
# 2.5 s) on the 8-node cluster, 0.2-1.1 s without it; the campaigns of the tests start some
# 40 rounds of jobs one after another.
SCHED_PARAMS="SchedulerParameters=batch_sched_delay=0"
NPROC=$(nproc)
CPUS=${GPULANE_SLURM_CPUS:-$((NPROC > 4 ? NPROC : 4))}
MEM_MB=$(awk '/MemTotal/ {print int($2 / 1024 * 0.9)}' /proc/meminfo)
GRES_LINE=""
GRES_NODE=""
if command -v nvidia-smi >/dev/null 2>&1; then
  NGPU=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
  if [ "${NGPU:-0}" -gt 0 ]; then
    GRES_LINE="GresTypes=gpu"
    GRES_NODE="Gres=gpu:$NGPU"
    {
      echo "$MARKER"
      echo "NodeName=$HOST Name=gpu File=/dev/nvidia[0-$((NGPU - 1))]"
    } >"$CONF_DIR/gres.conf.new"
    mv "$CONF_DIR/gres.conf.new" "$CONF_DIR/gres.conf"
  fi
fi

cat >"$CONF_DIR/slurm.conf.new" <<EOF
$MARKER
ClusterName=$CLUSTER
SlurmctldHost=$HOST
AuthType=auth/munge
CryptoType=crypto/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$SPOOL/slurmctld
SlurmdSpoolDir=$SPOOL/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=$LOG_DIR/slurmctld.log
SlurmdLogFile=$LOG_DIR/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
$SCHED_PARAMS
MpiDefault=none
MailProg=/bin/true
ReturnToService=2
# The node advertises the CPUs written below even where the machine has fewer.
SlurmdParameters=config_overrides
SlurmdTimeout=60
KillWait=5
MinJobAge=300
InactiveLimit=0
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
$GRES_LINE
NodeName=$HOST NodeAddr=127.0.0.1 CPUs=$CPUS Sockets=1 CoresPerSocket=$CPUS ThreadsPerCore=1 RealMemory=$MEM_MB $GRES_NODE State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
mv "$CONF_DIR/slurm.conf.new" "$CONF_DIR/slurm.conf"

cat >"$CONF_DIR/slurmdbd.conf.new" <<EOF
$MARKER
AuthType=auth/munge
DbdHost=localhost
SlurmUser=root
PidFile=/run/slurmdbd.pid
LogFile=$LOG_DIR/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageUser=slurm
StoragePass=$DB_PASS
StorageLoc=slurm_acct_db
EOF
chmod 600 "$CONF_DIR/slurmdbd.conf.new"
mv "$CONF_DIR/slurmdbd.conf.new" "$CONF_DIR/slurmdbd.conf"

# --- munge -----------------------------------------------------------------------------
if [ ! -s /etc/munge/munge.key ]; then
  say "creating /etc/munge/munge.key"
  dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=1024 status=none
fi
chown munge:munge /etc/munge /etc/munge/munge.key
chmod 700 /etc/munge
chmod 400 /etc/munge/munge.key
mkdir -p /run/munge /var/lib/munge /var/log/munge
chown munge:munge /run/munge /var/lib/munge /var/log/munge
if ! alive munged /run/munge/munged.pid; then
  rm -f /run/munge/munged.pid /run/munge/munge.socket.2*
  runuser -u munge -- /usr/sbin/munged
  record munged /run/munge/munged.pid
fi
wait_for munge 10 bash -c 'munge -n | unmunge'

# --- MariaDB (accounting storage) ------------------------------------------------------
mkdir -p /run/mysqld
chown mysql:mysql /run/mysqld
if [ ! -d /var/lib/mysql/mysql ]; then
  say "initialising the MariaDB data directory"
  mariadb-install-db --user=mysql --datadir=/var/lib/mysql >/dev/null
fi
if ! mariadb-admin --protocol=socket ping >/dev/null 2>&1; then
  rm -f /run/mysqld/mysqld.pid
  setsid mariadbd --user=mysql --pid-file=/run/mysqld/mysqld.pid \
    --socket=/run/mysqld/mysqld.sock --skip-networking=0 --bind-address=127.0.0.1 \
    </dev/null >>"$LOG_DIR/mariadb.log" 2>&1 &
  wait_for mariadb 30 mariadb-admin --protocol=socket ping
  record mariadbd /run/mysqld/mysqld.pid
fi
mariadb --protocol=socket -e "
  CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY '$DB_PASS';
  ALTER USER 'slurm'@'localhost' IDENTIFIED BY '$DB_PASS';
  GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';"

# --- slurmdbd, slurmctld, slurmd -------------------------------------------------------
if ! alive slurmdbd /run/slurmdbd.pid; then
  rm -f /run/slurmdbd.pid
  slurmdbd
  record slurmdbd /run/slurmdbd.pid
fi
wait_for slurmdbd 30 sacctmgr -n list cluster
if ! sacctmgr -n -P list cluster format=cluster | grep -qx "$CLUSTER"; then
  sacctmgr -i add cluster "$CLUSTER" >/dev/null
fi

if ! alive slurmctld /run/slurmctld.pid; then
  rm -f /run/slurmctld.pid
  slurmctld
  record slurmctld /run/slurmctld.pid
else
  scontrol reconfigure >/dev/null 2>&1 || true
fi
wait_for slurmctld 30 scontrol ping

if ! alive slurmd /run/slurmd.pid; then
  rm -f /run/slurmd.pid
  slurmd
  record slurmd /run/slurmd.pid
fi

# A node left down or drained by an earlier run comes back.
for _ in $(seq 1 300); do
  state=$(sinfo -h -n "$HOST" -o %T 2>/dev/null | head -1 || true)
  case "$state" in
  idle* | mixed* | allocated* | completing*) break ;;
  down* | drain* | fail*) scontrol update nodename="$HOST" state=resume >/dev/null 2>&1 || true ;;
  esac
  sleep 0.1
done
case "$state" in
idle* | mixed* | allocated* | completing*) ;;
*) die "node $HOST is '${state:-unknown}' (see $LOG_DIR/slurmd.log and slurmctld.log)" ;;
esac
say "up: node $HOST, $CPUS CPUs, partition debug, accounting on (sinfo: $state)"

# --- clusters of N nodes in network namespaces ------------------------------------------
# Each node a "host" of its own: slurmd in its own network, UTS and mount namespace, with a
# veth to the bridge gplbr (10.77.0.1), under a slurmctld of its own (the same munge and
# slurmdbd). Jobs across nodes meet over that bridge, as ranks on several hosts do (gloo
# over TCP), and scripts/slurm-fault.sh slows, loses or cuts a node's link there.
#   2 nodes (always; CI's): n1, n2, cluster gpulane-pair,  SLURM_CONF=/etc/slurm-pair/slurm.conf
#   N > 2 (slurm-up.sh N):  c1..cN, cluster gpulane-nodes, SLURM_CONF=/etc/slurm-nodes/slurm.conf
# GPULANE_SLURM_PAIR=0 skips the 2-node one. Where namespaces or bridges are not allowed it
# warns and leaves the single-node cluster as it is (the tests that need them then fail).

# write_cluster_conf TAG N: the cluster's slurm.conf; 0 when it changed the node set.
write_cluster_conf() {
  local tag=$1 n=$2 cpus=$(((CPUS + 1) / 2)) mem i
  cluster_facts "$tag"
  mem=$((MEM_MB / (n > 2 ? n : 2)))
  mkdir -p "$C_CONF_DIR" "$C_SPOOL/ctld"
  {
    echo "$MARKER"
    echo "ClusterName=$C_NAME"
    echo "SlurmctldHost=$HOST($BRIDGE_IP)"
    echo "SlurmctldPort=$C_CTLD_PORT"
    echo "SlurmdPort=$C_SLURMD_PORT"
    echo "AuthType=auth/munge"
    echo "CryptoType=crypto/munge"
    echo "SlurmUser=root"
    echo "SlurmdUser=root"
    echo "StateSaveLocation=$C_SPOOL/ctld"
    echo "SlurmdSpoolDir=$C_SPOOL/%n"
    echo "SlurmctldPidFile=$C_SPOOL/slurmctld.pid"
    echo "SlurmdPidFile=$C_SPOOL/slurmd-%n.pid"
    echo "SlurmctldLogFile=$LOG_DIR/$C_LOG-slurmctld.log"
    echo "SlurmdLogFile=$LOG_DIR/$C_LOG-slurmd-%n.log"
    echo "ProctrackType=proctrack/linuxproc"
    echo "TaskPlugin=task/none"
    echo "SelectType=select/cons_tres"
    echo "SelectTypeParameters=CR_Core"
    echo "$SCHED_PARAMS"
    echo "MpiDefault=none"
    echo "MailProg=/bin/true"
    echo "ReturnToService=2"
    echo "SlurmdParameters=config_overrides"
    echo "SlurmdTimeout=$C_TIMEOUT"
    echo "KillWait=5"
    echo "MinJobAge=300"
    # A job that loses a node ends NODE_FAIL instead of going back to the queue.
    [ "$tag" = pair ] || echo "JobRequeue=0"
    echo "AccountingStorageType=accounting_storage/slurmdbd"
    echo "AccountingStorageHost=localhost"
    echo "JobAcctGatherType=jobacct_gather/none"
    echo "JobCompType=jobcomp/none"
    for i in $(seq 1 "$n"); do
      echo "NodeName=$C_PREFIX$i NodeAddr=$(node_ip "$tag" "$i") CPUs=$cpus Sockets=1 CoresPerSocket=$cpus ThreadsPerCore=1 RealMemory=$mem State=UNKNOWN"
    done
    echo "PartitionName=$C_PART Nodes=ALL Default=YES MaxTime=INFINITE State=UP"
  } >"$C_CONF.new"
  local changed=1
  if [ -f "$C_CONF" ] && [ "$(grep -c '^NodeName=' "$C_CONF")" != "$n" ]; then changed=0; fi
  # Another setting changed (same nodes): a running slurmctld reads it on reconfigure.
  C_RECONFIGURE=0
  if [ -f "$C_CONF" ] && ! cmp -s "$C_CONF" "$C_CONF.new"; then C_RECONFIGURE=1; fi
  mv "$C_CONF.new" "$C_CONF"
  return $changed
}

# cluster_stop TAG: its slurmds and slurmctld, by the pids recorded (a resize).
cluster_stop() {
  local tag=$1 f name
  cluster_facts "$tag"
  for f in "$STATE"/node-"$C_PREFIX"*; do
    [ -e "$f" ] || continue
    name=${f##*/node-}
    stop_recorded "slurmd-$name" slurmd
  done
  stop_recorded "slurmctld-$tag" slurmctld
}

# stop_recorded RECORD NAME: the process recorded as RECORD when it still runs NAME.
stop_recorded() {
  local rec="$STATE/$1.pid" pid i
  [ -s "$rec" ] || return 0
  pid=$(tr -dc '0-9' <"$rec")
  if [ -n "$pid" ] && [[ "$(cat "/proc/$pid/comm" 2>/dev/null)" == "$2"* ]]; then
    kill -TERM "$pid" 2>/dev/null || true
    for i in $(seq 1 100); do
      [[ "$(cat "/proc/$pid/comm" 2>/dev/null)" == "$2"* ]] || break
      sleep 0.1
    done
  fi
  rm -f "$rec"
}

# cluster_up TAG N: the cluster's slurmctld and its N nodes, all answering.
cluster_up() {
  local tag=$1 n=$2 i st="" names
  cluster_facts "$tag"
  bridge_up || return 1
  if write_cluster_conf "$tag" "$n"; then
    say "$C_NAME: the node set changed; restarting its daemons"
    cluster_stop "$tag"
    rm -f "$C_SPOOL/ctld/node_state"*
  fi
  cluster_facts "$tag"
  if ! sacctmgr -n -P list cluster format=cluster | grep -qx "$C_NAME"; then
    sacctmgr -i add cluster "$C_NAME" >/dev/null || return 1
  fi
  if ! alive slurmctld "$C_SPOOL/slurmctld.pid"; then
    rm -f "$C_SPOOL/slurmctld.pid"
    SLURM_CONF=$C_CONF slurmctld || return 1
    record_as "slurmctld-$tag" slurmctld "$C_SPOOL/slurmctld.pid" || return 1
  elif [ "$C_RECONFIGURE" = 1 ]; then
    SLURM_CONF=$C_CONF scontrol reconfigure >/dev/null 2>&1 || true
  fi
  for i in $(seq 1 100); do
    SLURM_CONF=$C_CONF scontrol ping >/dev/null 2>&1 && break
    sleep 0.1
  done
  for i in $(seq 1 "$n"); do
    node_up "$tag" "$i" "$HOST" || return 1
  done
  cluster_facts "$tag"
  names="$C_PREFIX[1-$n]"
  for i in $(seq 1 600); do
    st=$(SLURM_CONF=$C_CONF sinfo -h -o %T 2>/dev/null | sort -u | tr '\n' ' ')
    case "$st" in
    *down* | *drain* | *fail*)
      SLURM_CONF=$C_CONF scontrol update nodename="$names" state=resume >/dev/null 2>&1 || true
      ;;
    *idle* | *mixed* | *allocated*)
      [[ "$st" == *unk* || "$st" == *'*'* ]] || break
      ;;
    esac
    sleep 0.1
  done
  case "$st" in
  *down* | *drain* | *fail* | *unk* | *'*'*) return 1 ;;
  *idle* | *mixed* | *allocated* | *completing*) ;;
  *) return 1 ;;
  esac
  say "up: $n-node cluster $C_NAME ($C_PREFIX""1..$C_PREFIX$n in network namespaces, links ${LINK_KBIT} kbit/s): SLURM_CONF=$C_CONF"
}

if [ "${GPULANE_SLURM_PAIR:-1}" != 0 ]; then
  cluster_up pair 2 || say "warning: the 2-node cluster in network namespaces is not up (see $LOG_DIR/pair-*.log); the single-node cluster is"
fi
if [ "$NODES" -gt 2 ]; then
  cluster_up nodes "$NODES" || die "the $NODES-node cluster in network namespaces is not up (see $LOG_DIR/nodes-*.log; namespaces, veth, bridges and tc must be allowed)"
fi
