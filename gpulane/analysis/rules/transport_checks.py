"""``nccl_transport``: did NCCL use the transport the path allows?

The rows' ``extra.nccl`` (from NCCL's own INFO lines, topology/nccl_logs.summary) says
which transport NCCL chose between which GPUs; the topology says the path between them.
On NV# pairs, and PIX/PXB pairs whose P2P status is OK, NCCL should use P2P (or NVLS);
across nodes it should use InfiniBand/RoCE (not sockets), with GPUDirect RDMA where the
GPU's nearest NIC sits behind the same PCIe switch (PIX/PXB). Each miss names the pair,
the transport used and the likely cause (an NCCL_* variable, NCCL's own words, the
doctor's findings, the P2P status).
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import pairwise
from typing import Any

from gpulane.analysis.rules.model import FAIL, PASS, SKIP, Check, Context
from gpulane.analysis.rules.select import select_rows
from gpulane.record import Row, frame_rows
from gpulane.topology.model import Gpu, Pair, Topology, same_device
from gpulane.topology.nccl_logs import gpu_order
from gpulane.topology.paths import PCIE_LABELS, best_label, is_label, nvlink_count

GDR_PATHS = ("PIX", "PXB")  # NCCL's default NCCL_NET_GDR_LEVEL reaches this far
P2P_MODES = ("read", "write", "r", "w", "any")
_TRUE = ("1", "true", "yes", "on")


def check_nccl_transport(rule_id: str, rule: Mapping[str, Any], ctx: Context) -> list[Check]:
    rows = select_rows(ctx.frame, rule.get("select") or {})
    runs: dict[str, Row] = {}
    for rec in frame_rows(rows):
        extra = rec.extra if isinstance(rec.extra, dict) else {}
        nccl = extra.get("nccl") if isinstance(extra, dict) else None
        if not isinstance(nccl, dict) or not nccl.get("transport"):
            continue
        key = f"{rec.build}/{rec.run_id}"
        runs[key] = rec  # the last row of a run: its account is the most complete
    if not runs:
        status = FAIL if rule.get("required") else SKIP
        why = "no row carries NCCL's transport (extra.nccl: runs on GPUs record it)"
        return [Check(rule_id, status, "rows", "-", why)]
    out: list[Check] = []
    for rec in runs.values():
        out.extend(_run_checks(rule_id, rec, ctx))
    return out or [Check(rule_id, SKIP, "rows", "-", "NCCL logged no connection")]


def _run_checks(rule_id: str, rec: Row, ctx: Context) -> list[Check]:
    nccl: dict[str, Any] = rec.extra["nccl"]
    raw_env = rec.env
    env: dict[str, Any] = raw_env if isinstance(raw_env, dict) else {}
    pairs, nets = list(nccl.get("pairs") or []), list(nccl.get("net") or [])
    one_host = _one_host_pairs(rec, nets)
    if one_host:
        pairs, nets = pairs + one_host, []
    multi_host = len({p.get("host") for p in pairs}) > 1 or bool(nets)
    out = []
    for pair in pairs:
        subject = _subject(
            rec, f"{pair.get('a')}-{pair.get('b')}", pair.get("host"), ctx, multi_host
        )
        out.append(_pair_check(rule_id, subject, pair, rec, nccl, env, ctx))
    for net in nets:
        subject = _subject(rec, str(net.get("gpu")), net.get("host"), ctx, True)
        out.append(_net_check(rule_id, subject, net, nccl, env, ctx))
    return out


def _one_host_pairs(rec: Row, nets: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """NCCL's network connections between GPUs of one host, as pairs of those GPUs.

    With P2P and SHM both off NCCL 2.28.9 makes each rank of one host its own node
    (``nNodes 2 localRanks 1``) and connects them through NET/Socket; rows recorded before
    nccl_logs knew that list each GPU under ``net``. The row's own hosts (the ranks', as
    the sweep found them) say whether they are one host. NET lines name the local GPU only,
    so the GPUs are paired in order: NCCL's ring joins neighbours, all over the same transport.
    """
    extra = rec.extra
    hosts = extra.get("hosts") if isinstance(extra, Mapping) else None
    if not nets or not isinstance(hosts, list) or len(hosts) != 1:
        return []
    if any(n.get("host") not in (None, hosts[0]) for n in nets):
        return []
    gpus = sorted({str(n.get("gpu")) for n in nets}, key=gpu_order)
    transport = "+".join(sorted({str(n.get("transport")) for n in nets}))
    channels = max((n["channels"] for n in nets if isinstance(n.get("channels"), int)), default=0)
    return [
        {"host": hosts[0], "a": a, "b": b, "transport": transport, "channels": channels}
        for a, b in pairwise(gpus)
    ]


def _subject(rec: Row, name: str, host: Any, ctx: Context, multi_host: bool) -> str:
    text = f"{host}:{name}" if multi_host and host else name
    return f"{rec.build}/{text}" if ctx.multi_build else text


def find_gpu(topo: Topology | None, name: str) -> Gpu | None:
    """A GPU named as NCCL names it: ``GPU0`` (NVML index) or a PCI bus id."""
    if topo is None:
        return None
    gpu = topo.gpu(name)
    if gpu is not None:
        return gpu
    return next((g for g in topo.gpus if g.bus_id and same_device(g.bus_id, name)), None)


def _path(a: str, b: str, rec: Row, topo: Topology | None) -> tuple[str | None, Pair | None]:
    ga, gb = find_gpu(topo, a), find_gpu(topo, b)
    if topo is not None and ga is not None and gb is not None:
        pair = topo.pair(ga.name, gb.name)
        if pair is not None and pair.label:
            return pair.label, pair
    # Without the pair in a topology, a two-GPU run's own path label is the pair's.
    path = rec.path
    if isinstance(path, str) and is_label(path) and rec.world_size == 2:
        return path, None
    return None, None


def p2p_status(pair: Pair | None) -> tuple[bool | None, str]:
    """(P2P OK in every read/write mode known, the statuses in words); None when unknown."""
    if pair is None or not pair.p2p:
        return None, "P2P status unknown"
    known = {k: v for k, v in pair.p2p.items() if k in P2P_MODES} or dict(pair.p2p)
    bad = {k: v for k, v in known.items() if v.upper() != "OK"}
    words = ", ".join(f"{k}={v}" for k, v in sorted(known.items()))
    return (not bad), f"topo -p2p {words}"


def _pair_check(
    rule_id: str,
    subject: str,
    pair: Mapping[str, Any],
    rec: Row,
    nccl: Mapping[str, Any],
    env: Mapping[str, Any],
    ctx: Context,
) -> Check:
    used = str(pair.get("transport") or "")
    label, topo_pair = _path(str(pair.get("a")), str(pair.get("b")), rec, ctx.topology)
    if label is None:
        return Check(rule_id, SKIP, "topology", subject, f"NCCL used {used}; path unknown")
    on_p2p = "P2P" in used or "NVLS" in used
    if nvlink_count(label) is not None:
        want = "P2P over NVLink"
    elif label in ("PIX", "PXB"):
        ok, words = p2p_status(topo_pair)
        if ok is None:
            return Check(rule_id, SKIP, "topology", subject, f"{label}: NCCL used {used}; {words}")
        if not ok:
            return Check(
                rule_id,
                PASS,
                "topology",
                subject,
                f"{label}: NCCL used {used}; P2P is not available here ({words})",
            )
        want = f"P2P over PCIe ({words})"
    else:
        return Check(
            rule_id,
            PASS,
            "topology",
            subject,
            f"{label}: NCCL used {used} (no P2P expected across {label})",
        )
    if on_p2p:
        return Check(rule_id, PASS, "topology", subject, f"{label}: NCCL used {used}")
    cause = p2p_cause(env, nccl, topo_pair, ctx, used)
    return Check(
        rule_id,
        FAIL,
        "topology",
        subject,
        f"{label}: NCCL used {used}, not {want}; likely cause: {cause}",
    )


def p2p_cause(
    env: Mapping[str, Any],
    nccl: Mapping[str, Any],
    pair: Pair | None,
    ctx: Context,
    used: str = "",
) -> str:
    """Why NCCL did not use P2P (``used`` instead), from the strongest evidence there is."""
    seen = {**(nccl.get("nccl_env") or {}), **env}
    if str(seen.get("NCCL_P2P_DISABLE", "")).lower() in _TRUE:
        both = f"NCCL_P2P_DISABLE={seen['NCCL_P2P_DISABLE']}"
        if used.startswith("NET") and str(seen.get("NCCL_SHM_DISABLE", "")).lower() in _TRUE:
            # SHM off too is why the pair fell to the network rather than host memory.
            both += f" and NCCL_SHM_DISABLE={seen['NCCL_SHM_DISABLE']}"
        return f"{both} in the run's environment"
    level = str(seen.get("NCCL_P2P_LEVEL", "")).upper()
    if level in ("LOC", "0"):
        return f"NCCL_P2P_LEVEL={seen['NCCL_P2P_LEVEL']} in the run's environment"
    if nccl.get("p2p_disabled"):
        return "NCCL says P2P is disabled between connected GPUs (the driver refused it)"
    ok, words = p2p_status(pair)
    if ok is False:
        return f"the driver reports no P2P ({words})"
    doctor = _doctor_titles(ctx, ("acs", "iommu", "p2p"))
    if doctor:
        return "; ".join(doctor)
    return "P2P refused by the platform (ACS redirect, IOMMU translation, or the driver): run gpulane doctor"


def _doctor_titles(ctx: Context, checks: tuple[str, ...]) -> list[str]:
    findings = ctx.evidence.get("doctor") or []
    return [
        str(f.get("title"))
        for f in findings
        if isinstance(f, Mapping)
        and str(f.get("check", "")).split(".")[0] in checks
        and f.get("severity") in ("error", "warning")
    ][:2]


def _net_check(
    rule_id: str,
    subject: str,
    net: Mapping[str, Any],
    nccl: Mapping[str, Any],
    env: Mapping[str, Any],
    ctx: Context,
) -> Check:
    used = str(net.get("transport") or "")
    seen = {**(nccl.get("nccl_env") or {}), **env}
    if used == "NET/Socket":
        if str(seen.get("NCCL_IB_DISABLE", "")).lower() in _TRUE:
            cause = f"NCCL_IB_DISABLE={seen['NCCL_IB_DISABLE']} in the run's environment"
        elif str(seen.get("NCCL_NET", "")).lower() == "socket":
            cause = f"NCCL_NET={seen['NCCL_NET']} in the run's environment"
        elif nccl.get("no_device"):
            cause = "NCCL found no InfiniBand/RoCE device (" + ", ".join(nccl["no_device"]) + ")"
        else:
            cause = "no RDMA network plugin or device NCCL could use"
        return Check(
            rule_id,
            FAIL,
            "topology",
            subject,
            f"NET: NCCL used NET/Socket between nodes, not InfiniBand/RoCE; likely cause: {cause}",
        )
    nic_path = _nic_path(ctx.topology, str(net.get("gpu")))
    gdr = "GDRDMA" in used
    if nic_path in GDR_PATHS and not gdr:
        cause = gdr_cause(seen, nccl, ctx)
        return Check(
            rule_id,
            FAIL,
            "topology",
            subject,
            f"NET: NCCL used {used} without GPUDirect RDMA although the NIC is {nic_path} "
            f"from the GPU; likely cause: {cause}",
        )
    where = f" (NIC {nic_path} from the GPU)" if nic_path else ""
    return Check(rule_id, PASS, "topology", subject, f"NET: NCCL used {used}{where}")


def _nic_path(topo: Topology | None, gpu_name: str) -> str | None:
    gpu = find_gpu(topo, gpu_name)
    if topo is None or gpu is None or not topo.nics:
        return None
    nics = {n.name for n in topo.nics}
    labels = [
        p.label
        for p in topo.pairs
        if p.label and gpu.name in (p.a, p.b) and ({p.a, p.b} & nics) and (p.label in PCIE_LABELS)
    ]
    return best_label(labels) if labels else None


def gdr_cause(seen: Mapping[str, Any], nccl: Mapping[str, Any], ctx: Context) -> str:
    for name in ("NCCL_NET_GDR_LEVEL", "NCCL_NET_GDR_READ", "NCCL_GDR_DISABLE"):
        if name in seen:
            return f"{name}={seen[name]} in the run's environment"
    disabled = nccl.get("gdr_disabled") or []
    doctor = _doctor_titles(ctx, ("gdr",))
    if doctor:
        return "; ".join(doctor)
    if disabled:
        return (
            "NCCL disabled GPU Direct RDMA for the HCA (see its 'GPU Direct RDMA Disabled' lines)"
        )
    return "no GPUDirect RDMA provider (nvidia_peermem not loaded, or no DMA-BUF support)"
