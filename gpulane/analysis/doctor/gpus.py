"""The GPUs themselves: persistence mode, clock and power throttling, ECC and Xid errors,
NVLink error counters (``nvidia-smi -q``, ``nvidia-smi nvlink -e``, the kernel log), and
other processes on them (NVML: the run's gpu_state.json, or read now)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from gpulane.analysis.doctor.model import Finding, NotRun
from gpulane.topology.evidence import Evidence
from gpulane.topology.evidence.kernel import HARDWARE_XIDS
from gpulane.topology.gpu_state import GPU_STATE_FILE, GpuState, capture, gpu_states
from gpulane.topology.smi_query import SmiGpu

# Clock event reasons (older drivers: "Clocks Throttle Reasons") and how bad each is.
THROTTLE = {
    "HW Slowdown": "error",
    "HW Thermal Slowdown": "error",
    "HW Power Brake Slowdown": "error",
    "SW Thermal Slowdown": "warning",
    "SW Power Cap": "warning",
}
_NUMBER = re.compile(r"^-?\d+(?:\.\d+)?")


def _smi(ev: Evidence) -> list[SmiGpu]:
    if ev.smi is None:
        raise NotRun(ev.absent.get("smi", "no nvidia-smi -q"))
    return ev.smi.gpus


def check_persistence(ev: Evidence) -> list[Finding]:
    out = []
    for g in _smi(ev):
        value = g.fields.get("Persistence Mode")
        if value == "Disabled":
            out.append(
                Finding(
                    "warning",
                    "persistence",
                    f"GPU{g.index}: persistence mode off",
                    f"GPU{g.index} ({g.bus_id}): Persistence Mode: {value}",
                    "without a client the driver tears the GPU down between processes: every run "
                    "pays seconds of initialization and starts from low clocks, so short runs and "
                    "the first sizes of a sweep measure the wake-up, not the path",
                    "run nvidia-persistenced (systemctl enable --now nvidia-persistenced) or "
                    "`nvidia-smi -pm 1` as root",
                    f"GPU{g.index}",
                )
            )
    return out


def _number(text: str | None) -> float | None:
    m = _NUMBER.match((text or "").strip())
    return float(m.group()) if m else None


_THROTTLE_WHY = (
    "a throttled GPU runs its SMs and copy engines slower: reductions in "
    "collectives and the token rate drop, and ranks fall out of step"
)
_THROTTLE_FIX = (
    "HW/SW thermal: check airflow, fans and inlet temperature; power brake "
    "or HW slowdown: check the PSUs and power cables; SW power cap: "
    "`nvidia-smi -q -d POWER`, raise the limit with `nvidia-smi -pl`"
)


def _nvml_clocks(ev: Evidence) -> list[Finding]:
    """The clocks event reasons NVML reads (nvmlDeviceGetCurrentClocksEventReasons), for
    a machine where nvidia-smi -q is not there to say them."""
    out = []
    states = gpu_states(ev.nvml or {})
    for s in states:
        for reason in s.reasons:
            if reason in THROTTLE:
                out.append(
                    Finding(
                        THROTTLE[reason],
                        "clocks",
                        f"{s.name}: clocks held down ({reason})",
                        f"{s.name}: NVML clocks event reasons: {', '.join(s.reasons)}",
                        _THROTTLE_WHY,
                        _THROTTLE_FIX,
                        s.name,
                    )
                )
    lost = [f"{s.name} ({s.lost})" for s in states if s.lost]
    if lost and not out:  # "nothing found" would pass GPUs whose reasons were not read
        raise NotRun("not read through NVML: " + ", ".join(lost))
    return out


def check_clocks(ev: Evidence) -> list[Finding]:
    if ev.smi is None and ev.nvml is not None:
        return _nvml_clocks(ev)
    out = []
    for g in _smi(ev):
        for section in ("Clocks Event Reasons", "Clocks Throttle Reasons"):
            for reason, severity in THROTTLE.items():
                value = g.fields.get(f"{section}/{reason}") or g.fields.get(
                    f"{section}/HW Slowdown/{reason}"
                )
                if value == "Active":
                    out.append(
                        Finding(
                            severity,
                            "clocks",
                            f"GPU{g.index}: clocks held down ({reason})",
                            f"GPU{g.index}: {section}/{reason}: Active",
                            _THROTTLE_WHY,
                            _THROTTLE_FIX,
                            f"GPU{g.index}",
                        )
                    )
        limit = _number(g.fields.get("GPU Power Readings/Current Power Limit"))
        default = _number(g.fields.get("GPU Power Readings/Default Power Limit"))
        if limit is not None and default is not None and limit < default * 0.95:
            out.append(
                Finding(
                    "warning",
                    "clocks",
                    f"GPU{g.index}: power limit {limit:.0f} W below its default {default:.0f} W",
                    f"GPU{g.index}: Current Power Limit {limit:.2f} W, Default Power Limit {default:.2f} W",
                    "a lowered power limit caps clocks under load: compute and reductions run slower",
                    "restore it with `nvidia-smi -pl <default>` (as root) or find who set it",
                    f"GPU{g.index}",
                )
            )
    return out


def check_ecc(ev: Evidence) -> list[Finding]:
    out = []
    for g in _smi(ev):
        f = g.fields
        for key, value in sorted(f.items()):
            if not key.startswith("ECC Errors/") or "Uncorrectable" not in key:
                continue
            n = _number(value)
            if n and n > 0:
                volatile = "/Volatile/" in key
                out.append(
                    Finding(
                        "error" if volatile else "warning",
                        "ecc",
                        f"GPU{g.index}: {int(n)} uncorrectable ECC error(s) ({key.split('/')[1].lower()})",
                        f"GPU{g.index}: {key}: {value}",
                        "uncorrectable memory errors kill the running job and retire or remap "
                        "memory; a GPU that keeps logging them stalls every collective it is in",
                        "drain the GPU, reset it (`nvidia-smi -r`) so remapping applies, run "
                        "field diagnostics (dcgmi diag -r 3); RMA if they recur",
                        f"GPU{g.index}",
                    )
                )
        checks = (
            ("Remapped Rows/Pending", "Yes", "warning", "row remapping pending (reset needed)"),
            ("Remapped Rows/Remapping Failure Occurred", "Yes", "error", "row remapping failed"),
            ("Retired Pages/Pending Page Blacklist", "Yes", "warning", "page retirement pending"),
            ("Retired Pages/Pending", "Yes", "warning", "page retirement pending"),
        )
        for key, bad, severity, words in checks:
            if f.get(key) == bad:
                out.append(
                    Finding(
                        severity,
                        "ecc",
                        f"GPU{g.index}: {words}",
                        f"GPU{g.index}: {key}: {bad}",
                        "memory with pending repairs runs degraded until the GPU is reset; a "
                        "failed remapping means the memory cannot be repaired",
                        "drain and reset the GPU (`nvidia-smi -r`); a failure to remap is an RMA",
                        f"GPU{g.index}",
                    )
                )
        action = f.get("GPU Recovery Action")
        if action and action not in ("None", "N/A"):
            out.append(
                Finding(
                    "error",
                    "ecc",
                    f"GPU{g.index}: the driver asks for recovery ({action})",
                    f"GPU{g.index}: GPU Recovery Action: {action}",
                    "the GPU hit a fault it cannot continue from as is; work on it will fail or stall",
                    "do what it asks: drain the GPU's peer traffic, reset it, or reboot the node",
                    f"GPU{g.index}",
                )
            )
    return out


def check_xids(ev: Evidence) -> list[Finding]:
    if ev.xids is None:
        raise NotRun(ev.absent.get("kernel_log", "no kernel log"))
    out = []
    seen: set[tuple[str, int]] = set()
    for x in ev.xids:
        if (x.bus_id, x.code) in seen:
            continue
        seen.add((x.bus_id, x.code))
        count = sum(1 for y in ev.xids if (y.bus_id, y.code) == (x.bus_id, x.code))
        meaning = HARDWARE_XIDS.get(x.code)
        out.append(
            Finding(
                "error" if meaning else "info",
                "xid",
                f"Xid {x.code} on {x.bus_id}"
                + (f": {meaning}" if meaning else "")
                + (f" ({count} times)" if count > 1 else ""),
                x.text,
                "the driver reported a GPU fault: hardware Xids (ECC, NVLink, fallen off the bus, "
                "GSP) mean a GPU or link that stalls or kills collectives; others are usually an "
                "application's own fault",
                "look the Xid up in NVIDIA's Xid catalogue; hardware Xids: drain, reset or reboot, "
                "run dcgmi diag, check NVLink/PCIe seating; application Xids: the job's own errors",
                x.bus_id,
            )
        )
    return out


def check_nvlink_errors(ev: Evidence) -> list[Finding]:
    if not ev.nvlink_errors:
        raise NotRun(ev.absent.get("nvlink_errors", "no nvidia-smi nvlink -e"))
    out = []
    for gpu in ev.nvlink_errors:
        bad = gpu.nonzero()
        if not bad:
            continue
        worst = max(bad, key=lambda b: b[2])
        recovery = any("recovery" in name.lower() for _, name, _ in bad)
        out.append(
            Finding(
                "error" if recovery else "warning",
                "nvlink_errors",
                f"GPU{gpu.index}: NVLink errors on {len({b[0] for b in bad})} link(s)",
                f"GPU{gpu.index} Link {worst[0]}: {worst[1]}: {worst[2]}"
                + (f" (and {len(bad) - 1} more counters)" if len(bad) > 1 else ""),
                "replays resend flits that arrived damaged and recoveries retrain the link: the "
                "NVLink bandwidth of this GPU drops and collectives wait for it",
                "reset the counters (`nvidia-smi nvlink -re`), run load and read them again; if "
                "they grow, reseat or replace the NVLink bridge/baseboard and check "
                "`nvidia-smi nvlink -s` for links down",
                f"GPU{gpu.index}",
            )
        )
    return out


def _foreign_states(ev: Evidence) -> list[GpuState]:
    """The GPUs' states as the run saw them (its gpu_state.json, the ranks left out), or
    read from NVML now on a live machine (this process left out)."""
    if ev.run_dir and Path(ev.run_dir).is_dir():
        states: dict[str, GpuState] = {}
        for path in sorted(Path(ev.run_dir).rglob(GPU_STATE_FILE)):
            try:
                before = json.loads(path.read_text()).get("before") or {}
            except (OSError, ValueError, AttributeError):
                continue
            for s in gpu_states(before.get("raw") or {}, set(before.get("own_pids") or [])):
                if s.foreign or s.name not in states:
                    states[s.name] = s
        if states:
            return list(states.values())
    if ev.live:
        raw = ev.nvml if ev.nvml is not None else capture()
        if raw.get("gpus"):
            return gpu_states(raw, {os.getpid()})
        raise NotRun(str(raw.get("error") or "NVML read no GPU"))
    raise NotRun("no NVML reading: run on the GPU machine, or give a run with gpu_state.json")


def check_foreign(ev: Evidence) -> list[Finding]:
    """Other processes on the GPUs: pid, name, memory and SM utilization (NVML)."""
    out = []
    for s in _foreign_states(ev):
        if s.lost:  # not read: neither "in use" nor "free"
            out.append(_lost(s))
        if not s.foreign:
            continue
        computing = any(p.sm_util is None or p.sm_util >= 10 for p in s.foreign)
        out.append(
            Finding(
                "error" if computing else "warning",
                "foreign",
                f"{s.name}: in use by another process ({', '.join(p.words() for p in s.foreign)})",
                s.words(),
                "another process shares the GPU's SMs, memory bandwidth and power budget: "
                "collectives and copies measured beside it describe a shared GPU, and the GPU "
                "is slow in every subset it is in",
                "find who runs it (`ps -o user,etime,cmd -p PID`), stop it or wait for it, then "
                "measure again; a job scheduler that placed two jobs on one GPU needs "
                "exclusive mode (`nvidia-smi -c EXCLUSIVE_PROCESS`) or a gres fix",
                s.name,
            )
        )
    return out


def _lost(s: GpuState) -> Finding:
    return Finding(
        "error",
        "foreign",
        f"{s.name}: not read through NVML ({s.lost})",
        s.words(),
        "a GPU that stops answering NVML has usually fallen off the bus or hung (Xid 79, "
        "GSP errors): work on it fails or stalls, and what else runs on it is unknown",
        "look for Xid errors in the kernel log (`dmesg | grep -i xid`), drain the node and "
        "reset the GPU (`nvidia-smi -r -i N`) or reboot; one that keeps falling off is an RMA",
        s.name,
    )


def check_mig(ev: Evidence) -> list[Finding]:
    """GPUs in MIG mode: what a MIG slice cannot measure, said once per GPU."""
    if ev.nvml is None:
        raise NotRun(ev.absent.get("nvml", "no NVML reading"))
    states = gpu_states(ev.nvml)
    if all(s.mig is None for s in states if not s.lost):
        raise NotRun("NVML does not say the GPUs' MIG mode (a GPU or driver without MIG)")
    out = []
    for s in states:
        if not s.mig:
            continue
        slices = f", {s.mig_devices} MIG device(s)" if s.mig_devices is not None else ""
        out.append(
            Finding(
                "info",
                "mig",
                f"{s.name}: MIG mode on{slices}",
                f"{s.name}: NVML MIG mode: enabled{slices}",
                "a MIG device is a slice of the GPU: P2P and NVLink between MIG devices are not "
                "available and NCCL runs one rank per GPU, so collectives, peer copies and "
                "NVLink figures of this GPU are not measured; copies and tokens measure one "
                "slice, not the GPU",
                "to measure the whole GPU's paths, turn MIG off (as root, no process on the "
                "GPU: `nvidia-smi -i N -mig 0`, then reset the GPU)",
                s.name,
            )
        )
    return out
