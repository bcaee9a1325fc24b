#!/usr/bin/env bash
# Bring up a real single-node Slurm on this Debian machine, for trying gpulane's Slurm path
# on one box and for the Slurm tests in CI.
#
#   sudo scripts/slurm-up.sh      # install what is missing, write the configs, start daemons
#   sudo scripts/slurm-down.sh    # stop what this script started (by process id)
#
# What it starts, in order: munged (as user munge), mariadbd (accounting database),
# slurmdbd, slurmctld, slurmd. With accounting, `sacct` and submitit know job states
# (COMPLETED, FAILED, CANCELLED, TIMEOUT) instead of UNKNOWN.
#
# Idempotent: run it again and it only starts what is not running; when everything is
# installed and up it returns in well under a second.
#
# It writes /etc/slurm/slurm.conf, /etc/slurm/slurmdbd.conf (and gres.conf where
# nvidia-smi sees GPUs), and refuses to overwrite a slurm.conf it did not write itself
# (set GPULANE_SLURM_FORCE=1 to take it over). Process ids of what it started are kept
# in $GPULANE_SLURM_STATE (default /run/gpulane-slurm) for slurm-down.sh.
#
# Settings (environment):
#   GPULANE_SLURM_CPUS   CPUs the node advertises (default: the larger of nproc and 4;
#                        more than the machine has lets small test jobs run side by side)
#   GPULANE_SLURM_STATE  where the pid records go
#   GPULANE_SLURM_FORCE  1: overwrite an existing /etc/slurm/slurm.conf

set -euo pipefail

STATE=${GPULANE_SLURM_STATE:-/run/gpulane-slurm}
MARKER="# written by gpulane scripts/slurm-up.sh"
CONF_DIR=/etc/slurm
LOG_DIR=/var/log/slurm
SPOOL=/var/lib/slurm
DB_PASS=gpulane-slurm
CLUSTER=gpulane
PACKAGES=(munge slurmctld slurmd slurm-client slurmdbd mariadb-server openmpi-bin libopenmpi-dev)

say() { printf 'slurm-up: %s\n' "$*"; }
die() {
  printf 'slurm-up: error: %s\n' "$*" >&2
  exit 1
}

[ "$(id -u)" = 0 ] || die "run as root (it installs packages and starts system daemons)"

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
# alive NAME PIDFILE: the pid in PIDFILE runs a process whose comm starts with NAME.
# (/run may be on disk, so a pid file can outlive its process: check /proc/PID/comm.)
alive() {
  local name=$1 file=$2 pid comm
  [ -s "$file" ] || return 1
  pid=$(tr -dc '0-9' <"$file")
  [ -n "$pid" ] && [ -r "/proc/$pid/comm" ] || return 1
  comm=$(cat "/proc/$pid/comm")
  [[ "$comm" == "$name"* ]]
}

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

# --- a second cluster of 2 nodes in network namespaces ----------------------------------
# Two "hosts" on one machine: slurmd n1 and n2, each in its own network namespace (and
# UTS namespace: hostname n1/n2) on a bridge, 10.77.0.11 and .12, under their own
# slurmctld (port 6917; the same munge and slurmdbd; cluster gpulane-pair). Jobs across
# both nodes meet over that bridge, as ranks on two hosts do. Use it with
#   SLURM_CONF=/etc/slurm-pair/slurm.conf gpulane sweep launcher=slurm launcher.nodes=2 ...
# GPULANE_SLURM_PAIR=0 skips it. Where namespaces or bridges are not allowed it warns and
# leaves the single-node cluster as it is (the tests that need the pair then fail).
PAIR_CONF_DIR=/etc/slurm-pair
PAIR_CONF=$PAIR_CONF_DIR/slurm.conf
PAIR_SPOOL=$SPOOL/pair

# record_as RECORD NAME PIDFILE: like record, under another record name; 1 when not up.
record_as() {
  local rec=$1 name=$2 file=$3 i
  for i in $(seq 1 100); do
    if alive "$name" "$file"; then
      tr -dc '0-9' <"$file" >"$STATE/$rec.pid"
      return 0
    fi
    sleep 0.1
  done
  return 1
}

# pair_node_up I: the namespace, link and slurmd of node nI.
pair_node_up() {
  local i=$1 ns=gpl-n$1
  if [ ! -e "/run/netns/$ns" ]; then
    ip netns add "$ns" || return 1
  fi
  if ! ip -n "$ns" link show gpl0 >/dev/null 2>&1; then
    ip link del "gpl-h$i" >/dev/null 2>&1 || true
    ip link add "gpl-h$i" type veth peer name gpl0 netns "$ns" || return 1
    ip link set "gpl-h$i" master gplbr up || return 1
    ip -n "$ns" addr add "10.77.0.1$i/24" dev gpl0 || return 1
    ip -n "$ns" link set gpl0 up || return 1
    ip -n "$ns" link set lo up || return 1
  fi
  mkdir -p "/etc/netns/$ns" "$PAIR_SPOOL/n$i"
  printf '127.0.0.1 localhost\n10.77.0.1 %s\n10.77.0.11 n1\n10.77.0.12 n2\n' "$HOST" \
    >"/etc/netns/$ns/hosts"
  if ! alive slurmd "$PAIR_SPOOL/slurmd-n$i.pid"; then
    rm -f "$PAIR_SPOOL/slurmd-n$i.pid"
    # nsenter, not `ip netns exec` (which remounts /sys and hides the cgroup mounts slurmd
    # reads); a mount namespace of its own for the node's /etc/hosts.
    nsenter --net="/run/netns/$ns" unshare -m -u --propagation private sh -c \
      "mount --bind /etc/netns/$ns/hosts /etc/hosts && hostname n$i &&
       SLURM_CONF=$PAIR_CONF exec slurmd -N n$i" || return 1
    record_as "slurmd-n$i" slurmd "$PAIR_SPOOL/slurmd-n$i.pid" || return 1
  fi
}

write_pair_conf() {
  local cpus=$(((CPUS + 1) / 2)) mem=$((MEM_MB / 2))
  mkdir -p "$PAIR_CONF_DIR" "$PAIR_SPOOL/ctld"
  {
    echo "$MARKER"
    echo "ClusterName=gpulane-pair"
    echo "SlurmctldHost=$HOST(10.77.0.1)"
    echo "SlurmctldPort=6917"
    echo "SlurmdPort=6918"
    echo "AuthType=auth/munge"
    echo "CryptoType=crypto/munge"
    echo "SlurmUser=root"
    echo "SlurmdUser=root"
    echo "StateSaveLocation=$PAIR_SPOOL/ctld"
    echo "SlurmdSpoolDir=$PAIR_SPOOL/%n"
    echo "SlurmctldPidFile=$PAIR_SPOOL/slurmctld.pid"
    echo "SlurmdPidFile=$PAIR_SPOOL/slurmd-%n.pid"
    echo "SlurmctldLogFile=$LOG_DIR/pair-slurmctld.log"
    echo "SlurmdLogFile=$LOG_DIR/pair-slurmd-%n.log"
    echo "ProctrackType=proctrack/linuxproc"
    echo "TaskPlugin=task/none"
    echo "SelectType=select/cons_tres"
    echo "SelectTypeParameters=CR_Core"
    echo "MpiDefault=none"
    echo "MailProg=/bin/true"
    echo "ReturnToService=2"
    echo "SlurmdParameters=config_overrides"
    echo "SlurmdTimeout=60"
    echo "KillWait=5"
    echo "MinJobAge=300"
    echo "AccountingStorageType=accounting_storage/slurmdbd"
    echo "AccountingStorageHost=localhost"
    echo "JobAcctGatherType=jobacct_gather/none"
    echo "JobCompType=jobcomp/none"
    for i in 1 2; do
      echo "NodeName=n$i NodeAddr=10.77.0.1$i CPUs=$cpus Sockets=1 CoresPerSocket=$cpus ThreadsPerCore=1 RealMemory=$mem State=UNKNOWN"
    done
    echo "PartitionName=pair Nodes=n1,n2 Default=YES MaxTime=INFINITE State=UP"
  } >"$PAIR_CONF.new"
  mv "$PAIR_CONF.new" "$PAIR_CONF"
}

pair_up() {
  command -v ip >/dev/null && command -v nsenter >/dev/null || return 1
  if ! ip link show gplbr >/dev/null 2>&1; then
    ip link add gplbr type bridge || return 1
    ip addr add 10.77.0.1/24 dev gplbr || return 1
  fi
  ip link set gplbr up || return 1
  write_pair_conf || return 1
  if ! sacctmgr -n -P list cluster format=cluster | grep -qx gpulane-pair; then
    sacctmgr -i add cluster gpulane-pair >/dev/null || return 1
  fi
  if ! alive slurmctld "$PAIR_SPOOL/slurmctld.pid"; then
    rm -f "$PAIR_SPOOL/slurmctld.pid"
    SLURM_CONF=$PAIR_CONF slurmctld || return 1
    record_as slurmctld-pair slurmctld "$PAIR_SPOOL/slurmctld.pid" || return 1
  fi
  local i st=""
  for i in $(seq 1 100); do
    SLURM_CONF=$PAIR_CONF scontrol ping >/dev/null 2>&1 && break
    sleep 0.1
  done
  pair_node_up 1 || return 1
  pair_node_up 2 || return 1
  for i in $(seq 1 300); do
    st=$(SLURM_CONF=$PAIR_CONF sinfo -h -o %T 2>/dev/null | sort -u | tr '\n' ' ')
    case "$st" in
    *down* | *drain*)
      SLURM_CONF=$PAIR_CONF scontrol update nodename=n1,n2 state=resume >/dev/null 2>&1 || true
      ;;
    *idle* | *mixed* | *allocated*) [[ "$st" == *unk* ]] || break ;;
    esac
    sleep 0.1
  done
  case "$st" in
  *idle* | *mixed* | *allocated*) ;;
  *) return 1 ;;
  esac
  say "up: 2-node cluster gpulane-pair (n1, n2 in network namespaces): SLURM_CONF=$PAIR_CONF"
}

if [ "${GPULANE_SLURM_PAIR:-1}" != 0 ]; then
  pair_up || say "warning: the 2-node cluster in network namespaces is not up (see $LOG_DIR/pair-*.log); the single-node cluster is"
fi
