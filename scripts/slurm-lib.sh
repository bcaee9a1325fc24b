# Shared by slurm-up.sh, slurm-down.sh and slurm-fault.sh (sourced, not run).
#
# A namespaced cluster is N "hosts" on this machine: each slurmd in its own network
# namespace (and UTS namespace: its host name) and mount namespace (its /etc/hosts), with a
# veth pair to the bridge gplbr (10.77.0.1/24 on the host side). Two are known:
#   pair   nodes n1, n2        10.77.0.11-12   /etc/slurm-pair   ports 6917/6918 (CI's)
#   nodes  nodes c1..cN        10.77.0.101-    /etc/slurm-nodes  ports 6919/6920
# Every node link is shaped to a line rate (tbf, both directions, and the node's loopback
# too), so that "a tenth of the bandwidth" (slurm-fault.sh slow) means something and
# figures do not follow the load on this machine's CPUs: GPULANE_SLURM_LINK_KBIT (default
# 1000000 = 1 Gbit/s; 0 leaves the links unshaped). Each node's facts are kept in
# $STATE/node-<name> for slurm-fault.sh.

STATE=${GPULANE_SLURM_STATE:-/run/gpulane-slurm}
MARKER="# written by gpulane scripts/slurm-up.sh"
LOG_DIR=/var/log/slurm
SPOOL=/var/lib/slurm
BRIDGE=gplbr
BRIDGE_IP=10.77.0.1
LINK_KBIT=${GPULANE_SLURM_LINK_KBIT:-1000000}

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

# record_as RECORD NAME PIDFILE: remember (for slurm-down.sh) that NAME, whose pid is in
# PIDFILE, was started as RECORD; 1 when it is not up within 10 s.
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

# cluster_facts TAG: sets C_CONF_DIR C_CONF C_SPOOL C_NAME C_PART C_PREFIX C_CTLD_PORT
# C_SLURMD_PORT C_TIMEOUT C_LOG for the cluster TAG (pair or nodes).
cluster_facts() {
  case "$1" in
  pair)
    C_CONF_DIR=/etc/slurm-pair C_NAME=gpulane-pair C_PART=pair C_PREFIX=n
    C_CTLD_PORT=6917 C_SLURMD_PORT=6918 C_TIMEOUT=60 C_LOG=pair
    ;;
  nodes)
    # A short SlurmdTimeout: a node lost mid-job ends it NODE_FAIL within ~15 s.
    C_CONF_DIR=/etc/slurm-nodes C_NAME=gpulane-nodes C_PART=nodes C_PREFIX=c
    C_CTLD_PORT=6919 C_SLURMD_PORT=6920 C_TIMEOUT=10 C_LOG=nodes
    ;;
  *) return 1 ;;
  esac
  C_CONF=$C_CONF_DIR/slurm.conf
  C_SPOOL=$SPOOL/$1
}

# node_ip TAG I / node_ns TAG I / node_dev TAG I: a node's address, namespace, and the
# host end of its veth.
node_ip() { if [ "$1" = pair ]; then echo "10.77.0.$((10 + $2))"; else echo "10.77.0.$((100 + $2))"; fi; }
node_ns() { if [ "$1" = pair ]; then echo "gpl-n$2"; else echo "gpl-c$2"; fi; }
node_dev() { if [ "$1" = pair ]; then echo "gpl-h$2"; else echo "gpl-hc$2"; fi; }

# shape DEV KBIT [NETNS]: a token bucket of KBIT kbit/s as DEV's root qdisc (0: none).
# The burst holds a millisecond at that rate, and at least two of DEV's largest packets
# (tbf drops a packet larger than its bucket: 64 KiB on a loopback), so that TCP keeps
# the link full without a whole small message slipping through unshaped.
shape() {
  local dev=$1 kbit=$2 ns=${3:-} burst mtu
  local tc=(tc) ipc=(ip)
  [ -n "$ns" ] && tc=(tc -n "$ns") ipc=(ip -n "$ns")
  if [ "$kbit" -le 0 ]; then
    "${tc[@]}" qdisc del dev "$dev" root >/dev/null 2>&1 || true
    return 0
  fi
  mtu=$("${ipc[@]}" -o link show dev "$dev" | sed -n 's/.* mtu \([0-9]*\).*/\1/p')
  burst=$((kbit * 1000 / 8 / 1000))
  [ "$burst" -lt $((2 * ${mtu:-1500} + 256)) ] && burst=$((2 * ${mtu:-1500} + 256))
  [ "$burst" -lt 16384 ] && burst=16384
  "${tc[@]}" qdisc replace dev "$dev" root tbf rate "${kbit}kbit" burst "$burst" latency 100ms
}

# hosts_file: every namespaced node (of both clusters), for each node's /etc/hosts.
hosts_file() {
  local host=$1 tag i n
  printf '127.0.0.1 localhost\n%s %s\n' "$BRIDGE_IP" "$host"
  for tag in pair nodes; do
    cluster_facts "$tag"
    n=$(cluster_size "$tag")
    for i in $(seq 1 "$n"); do printf '%s %s%s\n' "$(node_ip "$tag" "$i")" "$C_PREFIX" "$i"; done
  done
}

# cluster_size TAG: the nodes its configuration lists (0 when none is written).
cluster_size() {
  local conf
  cluster_facts "$1"
  conf=$C_CONF
  [ -f "$conf" ] || {
    echo 0
    return
  }
  grep -c '^NodeName=' "$conf" || true
}

# bridge_up: the bridge every node's veth joins.
bridge_up() {
  command -v ip >/dev/null && command -v nsenter >/dev/null && command -v tc >/dev/null || return 1
  if ! ip link show "$BRIDGE" >/dev/null 2>&1; then
    ip link add "$BRIDGE" type bridge || return 1
    ip addr add "$BRIDGE_IP/24" dev "$BRIDGE" || return 1
  fi
  ip link set "$BRIDGE" up
}

# node_up TAG I HOST: node I's namespace, link (shaped to the line rate), /etc/hosts and
# slurmd; its facts in $STATE/node-<name>.
node_up() {
  local tag=$1 i=$2 host=$3 ns dev ip name
  cluster_facts "$tag"
  ns=$(node_ns "$tag" "$i") dev=$(node_dev "$tag" "$i") ip=$(node_ip "$tag" "$i")
  name=$C_PREFIX$i
  if [ ! -e "/run/netns/$ns" ]; then
    ip netns add "$ns" || return 1
  fi
  if ! ip -n "$ns" link show gpl0 >/dev/null 2>&1; then
    ip link del "$dev" >/dev/null 2>&1 || true
    ip link add "$dev" type veth peer name gpl0 netns "$ns" || return 1
    ip link set "$dev" master "$BRIDGE" || return 1
    ip -n "$ns" addr add "$ip/24" dev gpl0 || return 1
    ip -n "$ns" link set gpl0 up || return 1
    ip -n "$ns" link set lo up || return 1
  fi
  ip link set "$dev" up || return 1
  # The line rate, both ways: into the node (the host end) and out of it (gpl0); and
  # between the node's own ranks (its loopback), so that a node's figures alone are set
  # by its links, as on a GPU node, not by how busy this machine's CPUs are.
  shape "$dev" "$LINK_KBIT" || return 1
  shape gpl0 "$LINK_KBIT" "$ns" || return 1
  shape lo "$LINK_KBIT" "$ns" || return 1
  mkdir -p "/etc/netns/$ns" "$C_SPOOL/$name"
  (hosts_file "$host") >"/etc/netns/$ns/hosts"
  printf 'TAG=%s\nNAME=%s\nINDEX=%s\nNS=%s\nDEV=%s\nIP=%s\nCONF=%s\nLINK_KBIT=%s\nPIDFILE=%s\n' \
    "$tag" "$name" "$i" "$ns" "$dev" "$ip" "$C_CONF" "$LINK_KBIT" "$C_SPOOL/slurmd-$name.pid" \
    >"$STATE/node-$name"
  if ! alive slurmd "$C_SPOOL/slurmd-$name.pid"; then
    rm -f "$C_SPOOL/slurmd-$name.pid"
    # nsenter, not `ip netns exec` (which remounts /sys and hides the cgroup mounts slurmd
    # reads); a mount namespace of its own for the node's /etc/hosts.
    nsenter --net="/run/netns/$ns" unshare -m -u --propagation private sh -c \
      "mount --bind /etc/netns/$ns/hosts /etc/hosts && hostname $name &&
       SLURM_CONF=$C_CONF exec slurmd -N $name" || return 1
    record_as "slurmd-$name" slurmd "$C_SPOOL/slurmd-$name.pid" || return 1
  fi
}

# ns_pids NS: the processes whose network namespace is NS.
ns_pids() {
  local want pid
  want=$(stat -L -c %i "/run/netns/$1" 2>/dev/null) || return 0
  for pid in /proc/[0-9]*; do
    pid=${pid#/proc/}
    [ "$(stat -L -c %i "/proc/$pid/ns/net" 2>/dev/null)" = "$want" ] && echo "$pid"
  done
  return 0
}
