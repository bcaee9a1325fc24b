"""What else is on each GPU, and how it is clocked: foreign processes, clocks event
reasons, temperature and power, from NVML (nvidia-ml-py).

:func:`capture` reads NVML into a plain structure (JSON-able: what
``benchmarks/accept/capture_nvml.py`` dumps on a GPU machine); :func:`gpu_states` is a pure
function from that structure to :class:`GpuState`, so the reading is tested on captured
data on machines without a GPU. A process is *foreign* when it is none of the run's own
ranks (``own_pids``): another user's job, a forgotten notebook, a stuck benchmark.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpulane.errors import ParseError
from gpulane.rundir import write_note

# Each GPU's other processes, clocks event reasons, temperature and power, before and after.
GPU_STATE_FILE = "gpu_state.json"

# nvmlClocksEventReason* bits (older bindings: nvmlClocksThrottleReason*) in words, as
# nvidia-smi -q prints them under "Clocks Event Reasons".
CLOCK_REASONS = {
    0x1: "Idle",
    0x2: "Applications Clocks Setting",
    0x4: "SW Power Cap",
    0x8: "HW Slowdown",
    0x10: "Sync Boost",
    0x20: "SW Thermal Slowdown",
    0x40: "HW Thermal Slowdown",
    0x80: "HW Power Brake Slowdown",
    0x100: "Display Clock Setting",
}
# The reasons that hold a busy GPU's clocks down (Idle and settings are not a slowdown).
HELD_DOWN = {
    "SW Power Cap": "held at its power cap",
    "HW Slowdown": "held down by a hardware slowdown",
    "SW Thermal Slowdown": "held down by its temperature (software)",
    "HW Thermal Slowdown": "held down by its temperature (hardware)",
    "HW Power Brake Slowdown": "held down by the power brake",
}
GIB = 1024**3


@dataclass
class Process:
    pid: int
    name: str | None
    used_bytes: int | None
    sm_util: int | None  # percent, from nvmlDeviceGetProcessUtilization; None when unknown

    def words(self) -> str:
        parts = [self.name or "?"]
        if self.sm_util is not None:
            parts.append(f"{self.sm_util} %")
        if self.used_bytes is not None:
            parts.append(f"{self.used_bytes / GIB:.1f} GiB")
        return f"pid {self.pid} ({', '.join(parts)})"


@dataclass
class GpuState:
    name: str  # GPU<NVML index>, as nvidia-smi and gpulane topo name it
    bus_id: str | None = None
    foreign: list[Process] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    util_gpu: int | None = None
    temperature_c: float | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    sm_clock_mhz: int | None = None
    sm_clock_max_mhz: int | None = None
    # NVML's error when the GPU stopped answering while it was read (GPU is lost): what
    # else ran on it is then unknown, never "nothing"
    lost: str | None = None
    mig: bool | None = None  # MIG mode on (None: NVML cannot tell)
    mig_devices: int | None = None

    @property
    def held_down(self) -> list[str]:
        return [r for r in self.reasons if r in HELD_DOWN]

    def words(self) -> str:
        """``GPU2 runs pid 1967 (python3, 100 %, 1.9 GiB) and its clocks are held at its
        power cap``; empty when there is nothing to say."""
        said = []
        if self.lost:
            said.append(f"could not be read through NVML ({self.lost})")
        if self.foreign:
            said.append("runs " + ", ".join(p.words() for p in self.foreign))
        if self.held_down:
            said.append("its clocks are " + " and ".join(HELD_DOWN[r] for r in self.held_down))
        if not said:
            return ""
        power = ""
        if self.power_w is not None and self.power_limit_w:
            power = f" ({self.power_w:.0f} W of {self.power_limit_w:.0f} W"
            power += f", {self.temperature_c:.0f} C)" if self.temperature_c is not None else ")"
        return f"{self.name} " + " and ".join(said) + power

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "bus_id": self.bus_id,
            "foreign": [vars(p) for p in self.foreign],
            "reasons": self.reasons,
            "util_gpu": self.util_gpu,
            "temperature_c": self.temperature_c,
            "power_w": self.power_w,
            "power_limit_w": self.power_limit_w,
            "sm_clock_mhz": self.sm_clock_mhz,
            "sm_clock_max_mhz": self.sm_clock_max_mhz,
            "lost": self.lost,
            "mig": self.mig,
            "mig_devices": self.mig_devices,
            "words": self.words(),
        }


def reason_words(mask: int | None) -> list[str]:
    if not mask:
        return []
    return [w for bit, w in CLOCK_REASONS.items() if int(mask) & bit]


def _num(v: Any) -> float | None:
    try:
        return None if v is None else float(v)
    except (TypeError, ValueError):
        return None


def _listed(value: Any) -> list[Any]:
    """A list NVML gave, or nothing: a capture records a call that failed as
    ``{"nvml_error": ...}`` (nvmlDeviceGetProcessUtilization does when no sample is new)."""
    return value if isinstance(value, list) else []


def gpu_states(capture: dict[str, Any], own_pids: set[int] | None = None) -> list[GpuState]:
    """:class:`GpuState` per GPU of a :func:`capture`; processes in ``own_pids`` are the
    run's own and left out. Also reads NVML's own field names (``usedGpuMemory``,
    ``smUtil``, ``utilization.gpu``, process names beside the GPUs), as a plain dump of
    the nvml calls (``benchmarks/gpu/capture_gpu_state.py``) records them."""
    if not isinstance(capture, dict) or not isinstance(capture.get("gpus", []), list):
        raise ParseError("not an NVML capture: expected an object with a list of gpus")
    own = own_pids or set()
    top_names = capture.get("process_names") or {}
    out = []
    for g in capture.get("gpus") or []:
        if not isinstance(g, dict) or "index" not in g:
            raise ParseError("not an NVML capture: a GPU entry without its index")
        util = {
            int(u["pid"]): u.get("sm_util", u.get("smUtil"))
            for u in _listed(g.get("process_utilization"))
        }
        names = {int(k): v for k, v in {**top_names, **(g.get("process_names") or {})}.items()}
        foreign = []
        for p in _listed(g.get("compute_processes")):
            pid = int(p["pid"])
            if pid in own:
                continue
            sm = util.get(pid)
            used = p.get("used_bytes", p.get("usedGpuMemory"))
            foreign.append(
                Process(
                    pid,
                    _text(names.get(pid) or p.get("name")),
                    int(used) if used is not None else None,
                    int(sm) if sm is not None else None,
                )
            )
        mw = _num(g.get("power_mw"))
        limit = _num(g.get("power_limit_mw"))
        rates = g.get("utilization")
        util_gpu = g.get("util_gpu")
        if util_gpu is None and isinstance(rates, dict):
            util_gpu = rates.get("gpu")
        reasons = g.get("clocks_event_reasons")
        out.append(
            GpuState(
                name=f"GPU{int(g['index'])}",
                bus_id=g.get("bus_id") if isinstance(g.get("bus_id"), str) else None,
                foreign=foreign,
                reasons=reason_words(reasons if isinstance(reasons, int) else None),
                util_gpu=util_gpu,
                temperature_c=_num(g.get("temperature_c")),
                power_w=mw / 1e3 if mw is not None else None,
                power_limit_w=limit / 1e3 if limit is not None else None,
                sm_clock_mhz=_int_or_none(g.get("sm_clock_mhz")),
                sm_clock_max_mhz=_int_or_none(g.get("sm_clock_max_mhz")),
                lost=str(g.get("lost") or g["unread"])
                if g.get("lost") or g.get("unread")
                else None,
                mig=g["mig"] if isinstance(g.get("mig"), bool) else None,
                mig_devices=_int_or_none(g.get("mig_devices")),
            )
        )
    return out


def _int_or_none(v: Any) -> int | None:
    return int(v) if isinstance(v, int | float) else None


def _errors(nvml: Any) -> tuple[type[BaseException], type[BaseException] | None]:
    """The binding's error class, and its class for a GPU that fell off the bus
    (NVML_ERROR_GPU_IS_LOST; None in a binding without it)."""
    lost = getattr(nvml, "NVMLError_GpuIsLost", None)
    return nvml.NVMLError, lost if isinstance(lost, type) else None


def _try(nvml: Any, fn: Any, *args: Any) -> Any:
    """fn(*args), or None when NVML cannot say; a lost GPU is not "cannot say": it raises,
    so that the GPU is recorded as lost instead of as a GPU with nothing on it."""
    error, lost = _errors(nvml)
    try:
        return fn(*args)
    except error as err:
        if lost is not None and isinstance(err, lost):
            raise
        return None


def _text(v: Any) -> Any:
    return v.decode(errors="replace") if isinstance(v, bytes) else v


def _mig(nvml: Any, h: Any) -> dict[str, Any]:
    """MIG mode and how many MIG devices the GPU holds ({} when NVML cannot tell)."""
    mode = (
        _try(nvml, nvml.nvmlDeviceGetMigMode, h) if hasattr(nvml, "nvmlDeviceGetMigMode") else None
    )
    if not mode:
        return {}
    on = bool(mode[0])
    out: dict[str, Any] = {"mig": on}
    if on and hasattr(nvml, "nvmlDeviceGetMigDeviceHandleByIndex"):
        most = _try(nvml, nvml.nvmlDeviceGetMaxMigDeviceCount, h) or 0
        found = [_try(nvml, nvml.nvmlDeviceGetMigDeviceHandleByIndex, h, j) for j in range(most)]
        out["mig_devices"] = sum(1 for d in found if d is not None)
    return out


def _read_gpu(nvml: Any, i: int, since: int) -> dict[str, Any]:
    h = nvml.nvmlDeviceGetHandleByIndex(i)
    pci = _try(nvml, nvml.nvmlDeviceGetPciInfo, h)
    procs = _try(nvml, nvml.nvmlDeviceGetComputeRunningProcesses, h) or []
    samples = _try(nvml, nvml.nvmlDeviceGetProcessUtilization, h, since) or []
    reasons_fn = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
        nvml, "nvmlDeviceGetCurrentClocksThrottleReasons", None
    )
    rates = _try(nvml, nvml.nvmlDeviceGetUtilizationRates, h)
    return {
        "index": i,
        "bus_id": _text(pci.busId) if pci is not None else None,
        "name": _text(_try(nvml, nvml.nvmlDeviceGetName, h)),
        "compute_processes": [
            {"pid": int(p.pid), "used_bytes": getattr(p, "usedGpuMemory", None)} for p in procs
        ],
        "process_names": {
            str(p.pid): _text(_try(nvml, nvml.nvmlSystemGetProcessName, p.pid)) for p in procs
        },
        "process_utilization": [
            {"pid": int(s.pid), "sm_util": int(s.smUtil), "mem_util": int(s.memUtil)}
            for s in samples
        ],
        "clocks_event_reasons": _try(nvml, reasons_fn, h) if reasons_fn else None,
        "util_gpu": int(rates.gpu) if rates is not None else None,
        "temperature_c": _try(nvml, nvml.nvmlDeviceGetTemperature, h, 0),
        "power_mw": _try(nvml, nvml.nvmlDeviceGetPowerUsage, h),
        "power_limit_mw": _try(nvml, nvml.nvmlDeviceGetEnforcedPowerLimit, h),
        "sm_clock_mhz": _try(nvml, nvml.nvmlDeviceGetClockInfo, h, 1),
        "sm_clock_max_mhz": _try(nvml, nvml.nvmlDeviceGetMaxClockInfo, h, 1),
        **_mig(nvml, h),
    }


def capture(nvml: Any = None, window_s: float = 1.0) -> dict[str, Any]:
    """NVML's reading of every GPU now, as plain data (empty ``gpus`` without NVML).
    ``window_s``: how far back nvmlDeviceGetProcessUtilization's samples may go. A GPU
    that stops answering (NVML: GPU is lost) is kept as ``{"index", "lost"}``."""
    if nvml is None:
        try:
            import pynvml
        except ImportError:
            return {"gpus": [], "error": "NVML not available: nvidia-ml-py is not installed"}
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError as err:  # LibraryNotFound, DriverNotLoaded, ...
            return {"gpus": [], "error": f"NVML not available: {err}"}
        nvml = pynvml
    since = int((time.time() - window_s) * 1e6)
    error, lost = _errors(nvml)
    gpus = []
    try:
        count = int(nvml.nvmlDeviceGetCount())
    except error as err:
        return {"gpus": [], "error": f"NVML: {err}"}
    for i in range(count):
        try:
            gpus.append(_read_gpu(nvml, i, since))
        except error as err:  # the GPU, not one reading, failed: it was not read
            key = "lost" if lost is not None and isinstance(err, lost) else "unread"
            gpus.append({"index": i, key: str(err) or type(err).__name__})
    return {"captured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "gpus": gpus}


def record_gpu_state(run_dir: Path, when: str, own_pids: set[int]) -> dict[str, str]:
    """Read this host's GPUs through NVML into ``gpu_state.json`` under ``when`` (before,
    after); returns, per GPU that another process uses, what it runs in words, and says
    so in the run's header notes before the run. Nothing without NVML or GPUs; a failure
    to read is written down, never a reason to stop the run."""
    try:
        raw = capture()
    except Exception as err:
        raw = {"gpus": [], "error": f"NVML: {err}"}
    path = run_dir / GPU_STATE_FILE
    try:
        saved = json.loads(path.read_text()) if path.exists() else {}
    except ValueError:
        saved = {}
    states = gpu_states(raw, own_pids)
    saved[when] = {"own_pids": sorted(own_pids), "raw": raw, "gpus": [s.to_json() for s in states]}
    path.write_text(json.dumps(saved, indent=1, default=str))
    busy = {s.name: s.words() for s in states if s.foreign}
    if when == "before":
        for words in busy.values():
            write_note(run_dir, f"another process uses a GPU of this run: {words}")
        for s in states:
            if s.lost:
                write_note(run_dir, f"{s.words()}: what else ran on the GPUs is not known")
    return busy


def foreign_on_gpus(run_dir: Path) -> dict[str, str] | None:
    """What ``gpu_state.json`` found before the run: GPU -> its foreign processes in words
    ({} when NVML read the GPUs and found none; None when they were not read)."""
    try:
        gpus = json.loads((run_dir / GPU_STATE_FILE).read_text())["before"]["gpus"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not gpus or any(g.get("lost") for g in gpus):
        return None  # a GPU that stopped answering was not read: not "nothing else ran"
    return {g["name"]: g["words"] for g in gpus if g.get("foreign")}


def own_pids_of(facts: list[dict[str, Any]]) -> set[int]:
    """The ranks' pids from the pre-flight facts (the run's own processes)."""
    return {int(f["pid"]) for f in facts if f.get("pid")}
