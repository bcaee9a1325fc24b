#!/usr/bin/env bash
# Faults on a node of a namespaced cluster that scripts/slurm-up.sh started (n1, n2, c1..cN),
# for tests and demos of cluster acceptance. Real faults on the node's own link, nothing
# mocked:
#
#   sudo scripts/slurm-fault.sh NODE slow         # the node's bandwidth cut to a tenth
#   sudo scripts/slurm-fault.sh NODE lossy [PEER] # 1 % of its packets lost (only those to
#                                                 # and from PEER: the link between the two)
#   sudo scripts/slurm-fault.sh NODE down         # the node is lost: its link goes down and
#                                                 # slurmd with every process of the node is
#                                                 # killed (a power cut, mid-job if one runs)
#   sudo scripts/slurm-fault.sh NODE clear        # undo: line rate back, no loss, link up,
#                                                 # slurmd restarted, the node resumed
#   sudo scripts/slurm-fault.sh NODE status       # the node's qdiscs and loss rules
#
# How:
# - slow: `tc tbf` at a tenth of the line rate (GPULANE_SLURM_LINK_KBIT in slurm-up.sh) on
#   both ends of the node's veth (into and out of the node), and on the node's loopback
#   (shaped to the line rate like its link), so that its ranks are slow among themselves
#   as well (what a per-node test sees).
# - lossy: `tc netem loss 1%` (with the line rate) on both ends where the kernel has netem;
#   this machine's kernel is built without it (CONFIG_NET_SCH_NETEM is not set), so the
#   loss comes from nftables there: `numgen random mod 100 < 1 drop` on what enters the
#   node (its input hook, in its namespace) and on what leaves it (the bridge's forward
#   hook), with segmentation offloads off on both ends of its veth so that the dropped
#   packets are wire-size ones. With PEER, only packets to and from PEER are dropped
#   (netem cannot tell peers apart, so PEER always uses nftables).
#   GPULANE_SLURM_LOSS_PCT sets the percentage (default 1).
# - down: `ip link set DEV down` on the host end first (the node drops off the fabric, so
#   no reset reaches its peers), then SIGKILL to every process in its network namespace
#   (checked by namespace inode). Slurm marks it DOWN after SlurmdTimeout (10 s on c1..cN)
#   and its jobs end NODE_FAIL.
#
# Exit status: 0 done, 1 the fault could not be made (the reason on stderr: namespaces or
# tc not permitted, an unknown node), 2 bad usage.

set -euo pipefail

# shellcheck source=scripts/slurm-lib.sh
source "$(dirname "$0")/slurm-lib.sh"

say() { printf 'slurm-fault: %s\n' "$*"; }
die() {
  printf 'slurm-fault: error: %s\n' "$*" >&2
  exit 1
}
usage() {
  printf 'usage: slurm-fault.sh NODE slow|lossy [PEER]|down|clear|status\n' >&2
  exit 2
}

[ $# -ge 2 ] || usage
NODE=$1 ACTION=$2 PEER=${3:-}
[ "$(id -u)" = 0 ] || die "run as root (it changes network namespaces and qdiscs)"
FACTS="$STATE/node-$NODE"
[ -f "$FACTS" ] || die "no node $NODE started by scripts/slurm-up.sh (known: $(cd "$STATE" 2>/dev/null && ls node-* 2>/dev/null | sed 's/^node-//' | tr '\n' ' '))"
# shellcheck disable=SC1090
source "$FACTS" # TAG NAME INDEX NS DEV IP CONF LINK_KBIT PIDFILE
[ -e "/run/netns/$NS" ] || die "node $NODE: its network namespace $NS is gone; run scripts/slurm-up.sh"
LOSS_PCT=${GPULANE_SLURM_LOSS_PCT:-1}
TABLE=gpulane_fault

in_ns() { nsenter --net="/run/netns/$NS" "$@"; }

# offloads on|off: segmentation offloads of both ends of the link. Off while lossy, so
# that a dropped packet is a wire-size one, as on a real link (with them on, the kernel
# hands the filter 64 KiB super-packets and 1 % of those is another loss pattern).
offloads() {
  command -v ethtool >/dev/null || return 0
  ethtool -K "$DEV" tso "$1" gso "$1" gro "$1" >/dev/null 2>&1 || true
  in_ns ethtool -K gpl0 tso "$1" gso "$1" gro "$1" >/dev/null 2>&1 || true
}

no_loss() {
  in_ns nft delete table inet "$TABLE" >/dev/null 2>&1 || true
  nft delete table bridge "${TABLE}_$NODE" >/dev/null 2>&1 || true
  offloads on
}

line_rate() {
  shape "$DEV" "$LINK_KBIT" || die "tc on $DEV failed (is tc permitted here?)"
  shape gpl0 "$LINK_KBIT" "$NS" || die "tc in $NS failed (is tc permitted here?)"
  shape lo "$LINK_KBIT" "$NS" || die "tc on $NS's loopback failed"
}

case "$ACTION" in
slow)
  [ "$LINK_KBIT" -gt 0 ] || die "node $NODE: its link has no line rate (GPULANE_SLURM_LINK_KBIT=0), so a tenth of it is undefined"
  tenth=$((LINK_KBIT / 10))
  shape "$DEV" "$tenth" || die "tc tbf on $DEV failed (is tc permitted here?)"
  shape gpl0 "$tenth" "$NS" || die "tc tbf in $NS failed"
  shape lo "$tenth" "$NS" || die "tc tbf on $NS's loopback failed"
  say "$NODE slow: ${tenth} kbit/s (a tenth of ${LINK_KBIT}) into, out of and within the node"
  ;;
lossy)
  peer_ip=""
  if [ -n "$PEER" ]; then
    [ -f "$STATE/node-$PEER" ] || die "no node $PEER started by scripts/slurm-up.sh"
    peer_ip=$(sed -n 's/^IP=//p' "$STATE/node-$PEER")
  fi
  no_loss
  if [ -z "$peer_ip" ] && [ "$LINK_KBIT" -gt 0 ] &&
    tc qdisc replace dev "$DEV" root netem loss "${LOSS_PCT}%" rate "${LINK_KBIT}kbit" 2>/dev/null &&
    tc -n "$NS" qdisc replace dev gpl0 root netem loss "${LOSS_PCT}%" rate "${LINK_KBIT}kbit"; then
    say "$NODE lossy: tc netem loss ${LOSS_PCT}% both ways"
    exit 0
  fi
  command -v nft >/dev/null || die "tc netem is not in this kernel and nft is not installed (apt-get install nftables)"
  offloads off
  if [ -n "$peer_ip" ]; then
    from_peer="ip saddr $peer_ip" to_peer="ip daddr $peer_ip" what="to and from $PEER ($peer_ip)"
  else
    from_peer="" to_peer="" what="on its link"
  fi
  # Into the node: its input hook (its host end segments what arrives, so these are
  # wire-size packets). Out of it: the bridge, after its gpl0 has segmented them.
  in_ns nft -f - <<EOF || die "nftables in $NS failed (is netfilter permitted here?)"
table inet $TABLE {
  chain in { type filter hook input priority 0; iifname "gpl0" $from_peer numgen random mod 100 < $LOSS_PCT counter drop; }
}
EOF
  nft -f - <<EOF || die "nftables on the bridge failed (is netfilter permitted here?)"
table bridge ${TABLE}_$NODE {
  chain out { type filter hook forward priority 0; iifname "$DEV" $to_peer numgen random mod 100 < $LOSS_PCT counter drop; }
}
EOF
  say "$NODE lossy: ${LOSS_PCT}% of packets $what dropped, both ways (nftables; no netem in this kernel)"
  ;;
down)
  ip link set "$DEV" down || die "ip link set $DEV down failed"
  killed=0
  for pid in $(ns_pids "$NS"); do
    kill -KILL "$pid" 2>/dev/null && killed=$((killed + 1))
  done
  say "$NODE down: link $DEV down, $killed process(es) of the node killed (slurmd with them)"
  ;;
clear)
  no_loss
  ip link set "$DEV" up || die "ip link set $DEV up failed"
  line_rate
  if ! alive slurmd "$PIDFILE"; then
    node_up "$TAG" "$INDEX" "$(hostname -s)" || die "slurmd on $NODE did not start again (see $LOG_DIR)"
  fi
  for _ in $(seq 1 300); do
    st=$(SLURM_CONF=$CONF sinfo -h -n "$NODE" -o %T 2>/dev/null || true)
    case "$st" in
    down* | drain* | fail*) SLURM_CONF=$CONF scontrol update nodename="$NODE" state=resume >/dev/null 2>&1 || true ;;
    idle | mixed | allocated | completing) break ;;
    esac
    sleep 0.1
  done
  say "$NODE clear: line rate ${LINK_KBIT} kbit/s, no loss, link up, slurm state ${st:-unknown}"
  ;;
status)
  echo "# $NODE ($NS, $IP), host end $DEV, line rate $LINK_KBIT kbit/s"
  ip -br link show "$DEV"
  tc qdisc show dev "$DEV"
  tc -n "$NS" qdisc show dev gpl0
  tc -n "$NS" qdisc show dev lo
  in_ns nft list table inet "$TABLE" 2>/dev/null || echo "(no loss rules into the node)"
  nft list table bridge "${TABLE}_$NODE" 2>/dev/null || echo "(no loss rules out of the node)"
  SLURM_CONF=$CONF sinfo -h -N -n "$NODE" -o '%N %T %E'
  ;;
*) usage ;;
esac
