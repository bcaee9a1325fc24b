"""Dump what NVML says about every GPU, as JSON: the processes on it, utilization, clocks
event reasons, temperature, power. Run on the GPU machine, with and without foreign work,
to capture real NVML output for the parsers' fixtures (tests/fixtures/h200x4/).

    python3 benchmarks/gpu/capture_gpu_state.py OUT.json
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import pynvml as nv


def _try(fn: Any, *args: Any) -> Any:
    try:
        return fn(*args)
    except nv.NVMLError as exc:  # a field this driver or GPU does not give
        return {"nvml_error": str(exc)}


def _procs(handle: Any, getter: Any) -> Any:
    got = _try(getter, handle)
    if isinstance(got, dict):
        return got
    return [{"pid": p.pid, "usedGpuMemory": p.usedGpuMemory} for p in got]


def gpu_state(i: int) -> dict[str, Any]:
    h = nv.nvmlDeviceGetHandleByIndex(i)
    util = _try(nv.nvmlDeviceGetUtilizationRates, h)
    samples = _try(nv.nvmlDeviceGetProcessUtilization, h, 0)
    return {
        "index": i,
        "name": _try(nv.nvmlDeviceGetName, h),
        "bus_id": _try(lambda x: nv.nvmlDeviceGetPciInfo(x).busId, h),
        "compute_processes": _procs(h, nv.nvmlDeviceGetComputeRunningProcesses),
        "graphics_processes": _procs(h, nv.nvmlDeviceGetGraphicsRunningProcesses),
        "utilization": util if isinstance(util, dict) else {"gpu": util.gpu, "memory": util.memory},
        "process_utilization": samples
        if isinstance(samples, dict)
        else [
            {"pid": s.pid, "timeStamp": s.timeStamp, "smUtil": s.smUtil, "memUtil": s.memUtil}
            for s in samples
        ],
        "clocks_event_reasons": _try(nv.nvmlDeviceGetCurrentClocksEventReasons, h),
        "temperature_c": _try(nv.nvmlDeviceGetTemperature, h, nv.NVML_TEMPERATURE_GPU),
        "power_mw": _try(nv.nvmlDeviceGetPowerUsage, h),
        "power_limit_mw": _try(nv.nvmlDeviceGetEnforcedPowerLimit, h),
        "sm_clock_mhz": _try(nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_SM),
        "sm_clock_max_mhz": _try(nv.nvmlDeviceGetMaxClockInfo, h, nv.NVML_CLOCK_SM),
        "memory_used_bytes": _try(lambda x: nv.nvmlDeviceGetMemoryInfo(x).used, h),
    }


def main() -> None:
    nv.nvmlInit()
    names = {}
    out: dict[str, Any] = {
        "captured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "driver": nv.nvmlSystemGetDriverVersion(),
        "gpus": [gpu_state(i) for i in range(nv.nvmlDeviceGetCount())],
    }
    for g in out["gpus"]:
        for p in g["compute_processes"] if isinstance(g["compute_processes"], list) else []:
            names[p["pid"]] = _try(nv.nvmlSystemGetProcessName, p["pid"])
    out["process_names"] = {str(k): v for k, v in names.items()}
    nv.nvmlShutdown()
    text = json.dumps(out, indent=1, default=str)
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w") as f:
            f.write(text + "\n")
    else:
        print(text)


if __name__ == "__main__":
    main()
