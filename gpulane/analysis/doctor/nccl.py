"""NCCL: variables that switch paths off, GPUDirect RDMA availability, and what NCCL
actually used against the path (its own INFO lines, ``nccl_transport_matches_path``)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gpulane.analysis.doctor.model import Finding, NotRun
from gpulane.analysis.rules.model import FAIL, Context
from gpulane.analysis.rules.transport_checks import check_nccl_transport
from gpulane.analysis.store import frame_from_rows
from gpulane.record import Row
from gpulane.topology.evidence import Evidence

_TRUE = ("1", "true", "yes", "on")


@dataclass(frozen=True)
class Setting:
    """A variable, when its value is a problem, how bad, why and the fix."""

    bad: Callable[[str], bool]
    severity: str
    why: str
    fix: str


def _true(v: str) -> bool:
    return v.strip().lower() in _TRUE


def _false(v: str) -> bool:
    return v.strip().lower() in ("0", "false", "no", "off")


def _small(limit: int) -> Callable[[str], bool]:
    return lambda v: v.strip().isdigit() and int(v) < limit


SETTINGS: dict[str, Setting] = {
    "NCCL_P2P_DISABLE": Setting(
        _true,
        "error",
        "switches P2P off for every GPU pair: NVLink and PCIe peer traffic goes through host "
        "memory (SHM) at a fraction of the path's rate",
        "unset it (a workaround left behind)",
    ),
    "NCCL_SHM_DISABLE": Setting(
        _true,
        "warning",
        "with P2P off too, GPUs of one node talk over the network stack (sockets)",
        "unset it",
    ),
    "NCCL_IB_DISABLE": Setting(
        _true,
        "warning",
        "InfiniBand/RoCE off: traffic between nodes goes over TCP sockets",
        "unset it",
    ),
    "NCCL_NET": Setting(
        lambda v: v.strip().lower() == "socket",
        "warning",
        "forces NCCL's socket transport between nodes",
        "unset it, or name the RDMA network",
    ),
    "NCCL_P2P_LEVEL": Setting(
        lambda v: v.strip().upper() in ("LOC", "0"),
        "warning",
        "P2P allowed on no path: every pair falls back to SHM",
        "unset it (NCCL picks per path)",
    ),
    "NCCL_NET_GDR_LEVEL": Setting(
        lambda v: v.strip().upper() in ("LOC", "0"),
        "warning",
        "GPUDirect RDMA off: network data is staged through host memory",
        "unset it (NCCL's default reaches NICs behind the same PCIe switch)",
    ),
    "NCCL_NET_GDR_READ": Setting(
        _false, "info", "GPUDirect RDMA reads off: sends are staged through host memory", "unset it"
    ),
    "NCCL_ALGO": Setting(
        lambda v: bool(v.strip()),
        "warning",
        "forces the algorithm for every size: NCCL cannot pick tree for small or NVLS/ring for "
        "large messages",
        "unset it unless it was measured to help",
    ),
    "NCCL_PROTO": Setting(
        lambda v: bool(v.strip()),
        "warning",
        "forces the protocol (LL/LL128/Simple) for every size",
        "unset it",
    ),
    "NCCL_MAX_NCHANNELS": Setting(
        _small(4), "warning", "too few channels cannot fill NVLink or several NICs", "unset it"
    ),
    "NCCL_MAX_CTAS": Setting(
        _small(4),
        "warning",
        "too few CTAs (channels) cannot fill NVLink or several NICs",
        "unset it",
    ),
    "NCCL_NVLS_ENABLE": Setting(
        _false,
        "info",
        "NVLink SHARP off: on NVSwitch systems all_reduce gives up in-switch reduction",
        "unset it where NVLS works (keep it off where the driver or fabric lacks it)",
    ),
    "NCCL_COLLNET_ENABLE": Setting(
        _false, "info", "in-network reduction (SHARP) off", "unset it on SHARP fabrics"
    ),
    "NCCL_CUMEM_ENABLE": Setting(
        _false, "info", "cuMem-based P2P buffers off: NCCL uses legacy CUDA IPC", "unset it"
    ),
    "NCCL_SOCKET_IFNAME": Setting(
        lambda v: v.strip().lstrip("=^") in ("lo", "lo0"),
        "warning",
        "bootstrap and socket traffic bound to the loopback: nodes cannot reach each other",
        "name the data network's interface",
    ),
    "NCCL_IGNORE_CPU_AFFINITY": Setting(
        _true, "info", "NCCL ignores the process's CPU binding for its threads", "unset it"
    ),
    "NCCL_DEBUG": Setting(
        lambda v: v.strip().upper() == "TRACE",
        "info",
        "TRACE logging slows every call",
        "unset it (INFO at most)",
    ),
}


def _settings(ev: Evidence) -> dict[str, tuple[str, str]]:
    """variable -> (value, where), from the environment/files and the run's rows."""
    out = {k: (v, ev.env_from.get(k, "environment")) for k, v in ev.env.items()}
    for row in ev.rows or []:
        raw = row.env
        env: dict[str, Any] = raw if isinstance(raw, dict) else {}
        for k, v in env.items():
            if k.startswith("NCCL_") and k not in out:
                out[k] = (str(v), f"run {row.run_id}'s env")
    return out


def check_env(ev: Evidence) -> list[Finding]:
    if "env" in ev.absent and not ev.rows:
        raise NotRun(ev.absent["env"])
    out = []
    for name, (value, where) in sorted(_settings(ev).items()):
        setting = SETTINGS.get(name)
        if setting is None or not setting.bad(value):
            continue
        run = re.fullmatch(r"run (.+)'s env", where)
        asked = ev.run_asked.get(run.group(1), {}).get(name) if run else None
        if asked is not None and asked[0] == value:
            # The run was asked to measure with this path off (a preset, env.*): that is
            # what it measured, not a workaround left behind.
            out.append(
                Finding(
                    "info",
                    "nccl_env",
                    f"{name}={value} was the run's choice ({asked[1]})",
                    f"{name}={value} ({asked[1]})",
                    f"the run measured with this setting on purpose: {setting.why}",
                    "nothing to fix; compare the run with one without it "
                    "(gpulane compare) to see what the setting costs",
                    name,
                )
            )
            continue
        out.append(
            Finding(
                setting.severity,
                "nccl_env",
                f"{name}={value} switches a path off",
                f"{name}={value} ({where})",
                setting.why,
                setting.fix,
                name,
            )
        )
    return out


def _nics(ev: Evidence) -> list[str]:
    names = [n.device or n.name for n in ev.topology.nics] if ev.topology else []
    names += [f"{f.bus_id} {f.name[:40]}" for f in ev.pci or [] if f.is_nic and f.bus_id]
    return names


def check_gdr(ev: Evidence) -> list[Finding]:
    nics = _nics(ev)
    if not nics:
        raise NotRun("no RDMA NIC found (topology or lspci): GPUDirect RDMA is not needed")
    if ev.modules is None:
        raise NotRun(ev.absent.get("modules", "loaded modules unknown"))
    providers = sorted(ev.modules & {"nvidia_peermem", "nv_peer_mem"})
    providers += [f"memory_peers/{p}" for p in ev.memory_peers or []]
    dmabuf = bool(ev.driver_version and "Open Kernel Module" in ev.driver_version)
    out = []
    if not providers and not dmabuf:
        driver = f"; driver: {ev.driver_version}" if ev.driver_version else ""
        out.append(
            Finding(
                "warning",
                "gdr",
                "GPUDirect RDMA unavailable: no nvidia_peermem, no DMA-BUF driver",
                f"{ev.sources.get('modules', 'modules')}: neither nvidia_peermem nor nv_peer_mem "
                f"loaded{driver} (NICs: {', '.join(nics[:3])})",
                "without a GPUDirect provider the NIC cannot read or write GPU memory: NCCL stages "
                "every network transfer through host memory (no GDRDMA in its connections)",
                "load it: `modprobe nvidia_peermem` (and add it to /etc/modules-load.d), or use the "
                "open kernel modules with a kernel >= 5.12 for DMA-BUF",
            )
        )
    disabled = (ev.nccl or {}).get("gdr_disabled") or []
    if disabled:
        d = disabled[0]
        out.append(
            Finding(
                "warning",
                "gdr",
                "NCCL disabled GPUDirect RDMA for a GPU/NIC pair",
                f"GPU Direct RDMA Disabled for {d.get('gpu')} / HCA {d.get('hca')} "
                f"(distance {d.get('distance')} > {d.get('level')})",
                "NCCL judged the GPU-NIC path too long for GPUDirect RDMA: data is staged "
                "through host memory",
                "place a NIC behind the GPU's PCIe switch, or raise NCCL_NET_GDR_LEVEL only if "
                "the platform routes peer traffic well",
            )
        )
    return out


def _transport_rows(ev: Evidence) -> list[Row]:
    rows = [r for r in ev.rows or [] if isinstance(r.extra, dict) and r.extra.get("nccl")]
    if rows or ev.nccl is None:
        return rows
    # No run's rows: the NCCL log alone, as one row the transport check reads.
    return [
        Row(
            run_id="nccl-log",
            kind="collective",
            backend="nccl",
            op="-",
            build=ev.host,
            nodes=None,
            extra={"nccl": ev.nccl},
        )
    ]


def asked_off(ev: Evidence, build: str | None) -> list[str]:
    """The variables that switch a path off which the runs of ``build`` (None: of every
    build) were asked to set (a preset, env.*), in words:
    ``NCCL_P2P_DISABLE=1 (run X's preset=pcie-host)``."""
    runs = {str(r.run_id) for r in ev.rows or [] if build is None or str(r.build) == build}
    out = []
    for run in sorted(runs):
        for name, (value, how) in sorted(ev.run_asked.get(run, {}).items()):
            setting = SETTINGS.get(name)
            if setting is not None and setting.bad(value):
                out.append(f"{name}={value} ({how})")
    return list(dict.fromkeys(out))


def check_transport(ev: Evidence) -> list[Finding]:
    rows = _transport_rows(ev)
    if not rows:
        raise NotRun("no NCCL INFO lines (give --run DIR of a GPU run, or --nccl-log FILE)")
    frame = frame_from_rows(rows)
    ctx = Context(
        frame=frame,
        topology=ev.topology,
        multi_build=frame["build"].dropna().nunique() > 1 if len(frame) else False,
    )
    out = []
    for c in check_nccl_transport("nccl_transport", {}, ctx):
        if c.status != FAIL:
            continue
        # "build/GPU0-GPU1" where rows of several builds were judged, else "GPU0-GPU1"
        build = str(c.subject).split("/")[0] if "/" in str(c.subject or "") else None
        asked = asked_off(ev, build)
        if asked:
            # The run switched the path off on purpose (preset=pcie-host, socket): the
            # slower transport is what it set out to measure.
            out.append(
                Finding(
                    "info",
                    "transport",
                    f"{c.subject}: NCCL used another transport, as the run asked",
                    f"{c.message}; the run asked for {', '.join(asked)}",
                    "the run measured this pair with the path's own transport switched off",
                    "nothing to fix; compare it with a run without the setting to see its cost",
                    c.subject,
                )
            )
            continue
        out.append(
            Finding(
                "error",
                "transport",
                f"{c.subject}: NCCL did not use the path's transport",
                c.message,
                "NCCL moved this pair's bytes over a slower transport than the path offers: "
                "its bus bandwidth is that transport's, not the path's",
                "remove the cause named in the evidence; then a sweep's `transport` column "
                "shows P2P (or NET/IB/GDRDMA between nodes)",
                c.subject,
            )
        )
    return out
