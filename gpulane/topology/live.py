"""The live probe: NVML, nvidia-smi, lspci and sysfs on this machine.

Every source is optional. What is missing is said in ``Topology.missing`` together with
what that leaves unknown; nothing here raises because a GPU, a driver or a tool is absent.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from gpulane.errors import GpulaneError
from gpulane.topology import paths
from gpulane.topology.build import Inputs, build
from gpulane.topology.lspci import parse_lspci_tree, parse_lspci_verbose
from gpulane.topology.model import Pair, Topology
from gpulane.topology.nvlink import NvlinkGpu, parse_nvlink_status
from gpulane.topology.nvml_probe import GpuUnread, NvmlProbe, _cpu_list, mark_unread
from gpulane.topology.nvml_probe import open_nvml as _open_nvml
from gpulane.topology.p2p import MODES, parse_p2p
from gpulane.topology.smi_query import SmiGpu, SmiQuery
from gpulane.topology.sysfs import SysfsDevice, make_link, read_device, upstream_links
from gpulane.topology.topo_matrix import TopoMatrix, parse_topo_matrix

TIMEOUT_S = 60


# --- commands -----------------------------------------------------------------------------


def _run(argv: list[str]) -> tuple[str | None, str | None]:
    """(stdout, None) or (None, why it failed)."""
    try:
        proc = subprocess.run(
            argv, capture_output=True, text=True, timeout=TIMEOUT_S, errors="replace"
        )
    except FileNotFoundError:
        return None, f"{argv[0]} not found"
    except subprocess.TimeoutExpired:
        return None, f"`{' '.join(argv)}` did not finish in {TIMEOUT_S} s"
    except OSError as err:
        return None, f"`{' '.join(argv)}`: {err}"
    if proc.returncode != 0:
        msg = (proc.stderr or proc.stdout).strip().splitlines()
        return None, f"`{' '.join(argv)}` exited {proc.returncode}: {msg[-1] if msg else ''}"
    return proc.stdout, None


def _nvml_matrix(probe: NvmlProbe, sysfs: dict[str, SysfsDevice]) -> TopoMatrix:
    names = [f"GPU{i}" for i in range(probe.count)]
    labels: dict[tuple[str, str], str] = {}
    for a in range(probe.count):
        for b in range(probe.count):
            if a != b:
                lab = probe.label(min(a, b), max(a, b))
                if lab is not None:
                    labels[(names[a], names[b])] = lab
    numa = {}
    for i, n in enumerate(names):
        dev = sysfs.get(probe.bus_ids[i] or "")
        numa[n] = str(dev.numa) if dev is not None and dev.numa is not None else None
    return TopoMatrix(
        source="NVML",
        devices=names,
        names=names,
        gpus=names,
        nics=[],
        labels=labels,
        original=dict(labels),
        cpu_affinity={n: probe.cpu_affinity(i) for i, n in enumerate(names)},
        numa_affinity=numa,
        gpu_numa_id={n: probe.gpu_numa_id(i) for i, n in enumerate(names)},
        columns=["CPU Affinity", "NUMA Affinity", "GPU NUMA ID"],
    )


def run_all(commands: list[list[str]]) -> dict[tuple[str, ...], tuple[str | None, str | None]]:
    """Each command's :func:`_run` result, the commands run at once: each nvidia-smi call
    opens the driver for every GPU by itself (about half a second each on 4x H200, nine of
    them in a probe), so in turn they took seconds and at once they take the slowest one."""
    if not commands:
        return {}
    with ThreadPoolExecutor(max_workers=len(commands)) as pool:
        futures = {tuple(c): pool.submit(_run, c) for c in commands}
        return {key: f.result() for key, f in futures.items()}


Ran = dict[tuple[str, ...], tuple[str | None, str | None]]


def probe_topology(under_load: bool = False, sys_root: str = "/sys") -> Topology:
    """Probe this machine. Never raises for a missing GPU, driver or tool."""
    inp = Inputs()
    smi = shutil.which("nvidia-smi")
    lspci = shutil.which("lspci")
    commands = []
    if smi:
        commands += [[smi, "topo", "-m"], *([smi, "topo", "-p2p", m] for m in MODES)]
        commands.append([smi, "nvlink", "-s"])
    if lspci:
        commands += [[lspci, "-D", "-vvv"], [lspci, "-tv"]]
    with ThreadPoolExecutor(max_workers=1) as pool:  # NVML opened while the tools run
        ran_future = pool.submit(run_all, commands)
        probe, why = _open_nvml()
        ran = ran_future.result()
    try:
        if smi:
            _read_smi(inp, smi, ran)
        else:
            inp.missing.append(
                "nvidia-smi: not found; GPU-NIC paths and the P2P status matrix unknown"
            )
        sysfs = _read_nvml(inp, probe, why, sys_root)
        if lspci:
            _read_lspci(inp, lspci, ran)
        else:
            inp.missing.append(
                "lspci: not found (install pciutils); the PCIe tree from lspci unknown"
            )
        _read_sysfs(inp, probe, sysfs, sys_root)
        topo = build(inp)
        mark_unread(topo, probe, under_load)  # one GPU NVML cannot open: named
        _judge_links(topo, probe, under_load, why)
        return topo
    finally:
        if probe is not None:
            probe.close()


def _read_smi(inp: Inputs, smi: str, ran: Ran) -> None:
    """nvidia-smi: the labels exactly as it prints them, NICs included."""
    text, err = ran[(smi, "topo", "-m")]
    if text is not None:
        try:
            inp.matrix = parse_topo_matrix(text, "nvidia-smi topo -m")
            inp.sources["topo"] = "nvidia-smi topo -m"
        except GpulaneError as e:
            inp.notes.append(f"could not read `nvidia-smi topo -m`: {e}")
    else:
        inp.missing.append(f"nvidia-smi topo -m: {err}; NIC paths unknown")
    for letter, mode in MODES.items():
        text, _ = ran[(smi, "topo", "-p2p", letter)]
        if text is None:
            continue
        try:
            inp.p2p.append(parse_p2p(text, f"nvidia-smi topo -p2p {letter}", mode))
        except GpulaneError as e:
            inp.notes.append(f"could not read `nvidia-smi topo -p2p {letter}`: {e}")
    if inp.p2p:
        inp.sources["p2p"] = "nvidia-smi topo -p2p " + ",".join(MODES)
    text, _ = ran[(smi, "nvlink", "-s")]
    if text is not None and text.strip():
        try:
            inp.nvlink = parse_nvlink_status(text, "nvidia-smi nvlink -s")
            inp.sources["nvlink"] = "nvidia-smi nvlink -s"
        except GpulaneError:
            pass


def _read_nvml(
    inp: Inputs, probe: NvmlProbe | None, why: str | None, sys_root: str
) -> dict[str, SysfsDevice]:
    """NVML's GPUs, links and pair labels into ``inp``; the GPUs' sysfs entries read."""
    sysfs: dict[str, SysfsDevice] = {}
    if probe is None:
        inp.missing.append(
            f"NVML: {why}; GPU bus ids, PCIe links and NVLink state from NVML unknown"
        )
        return sysfs
    inp.sources["gpus"] = "NVML"
    for bus in probe.bus_ids:
        dev = read_device(bus, sys_root) if bus is not None else None
        if dev is not None:
            sysfs[dev.bus_id] = dev
    nvml_matrix = _nvml_matrix(probe, sysfs)
    if inp.matrix is None:
        inp.matrix = nvml_matrix
        inp.sources["topo"] = "NVML"
        inp.missing.append("GPU-NIC paths: nvidia-smi topo -m not available")
    else:
        for (a, b), lab in sorted(nvml_matrix.labels.items()):
            smi_lab = inp.matrix.labels.get((a, b))
            if a < b and smi_lab is not None and smi_lab != lab:
                inp.notes.append(
                    f"{a}-{b}: nvidia-smi says {smi_lab}, NVML says {lab} "
                    "(nvidia-smi's label is used)"
                )
    inp.smi = SmiQuery(
        source="NVML",
        driver=None,
        cuda=None,
        gpus=[
            SmiGpu(index=i, bus_id=bus, model=probe.name(i), pcie=probe.pcie(i))
            for i, bus in enumerate(probe.bus_ids)
            if bus is not None
        ],
    )
    _nvml_nvlinks(inp, probe)
    return sysfs


def _nvml_nvlinks(inp: Inputs, probe: NvmlProbe) -> None:
    nvl = [NvlinkGpu(i, probe.name(i) or "", probe.nvlink_speeds(i)) for i in range(probe.count)]
    if not any(g.links for g in nvl):
        return
    if inp.nvlink is None:
        inp.nvlink = nvl
        inp.sources["nvlink"] = "NVML"
        return
    # Keep nvidia-smi's per-link speeds but fill gaps from NVML.
    for g in inp.nvlink:
        if g.index < len(nvl):
            for k, v in nvl[g.index].links.items():
                g.links.setdefault(k, v)


def _read_lspci(inp: Inputs, lspci: str, ran: Ran) -> None:
    text, _ = ran[(lspci, "-D", "-vvv")]
    if text is not None:
        try:
            inp.lspci = parse_lspci_verbose(text, "lspci -D -vvv")
            inp.sources["lspci"] = "lspci -D -vvv"
            if not any(d.cap_width for d in inp.lspci):
                inp.missing.append(
                    f"lspci link capabilities: not readable ({not_readable_why()}); "
                    "bridge link widths from sysfs only"
                )
        except GpulaneError as e:
            inp.notes.append(f"could not read `lspci -vvv`: {e}")
    text, _ = ran[(lspci, "-tv")]
    if text is not None:
        try:
            inp.trees.append(parse_lspci_tree(text, "lspci -tv"))
            inp.sources["lspci_tree"] = "lspci -tv"
        except GpulaneError as e:
            inp.notes.append(f"could not read `lspci -tv`: {e}")


def _with_upstream(found: dict[str, SysfsDevice], bus_id: str, sys_root: str) -> None:
    """The bridges above ``bus_id`` into ``found`` (what is there already kept)."""
    for link in upstream_links(bus_id, sys_root):
        if link.bus_id is not None and link.bus_id not in found:
            found[link.bus_id] = SysfsDevice(bus_id=link.bus_id, link=link)


def _read_sysfs(
    inp: Inputs, probe: NvmlProbe | None, sysfs: dict[str, SysfsDevice], sys_root: str
) -> None:
    """sysfs: every GPU's link and the bridges above it (the GPUs from sysfs itself when
    NVML gave none)."""
    if not os.path.isdir(os.path.join(sys_root, "bus", "pci", "devices")):
        inp.missing.append("sysfs: /sys/bus/pci not present; links above the GPUs unknown")
        return
    inp.sources["sysfs"] = f"{sys_root}/bus/pci/devices"
    sysfs_all = dict(sysfs)
    for b in [b for b in probe.bus_ids if b] if probe is not None else []:
        dev = sysfs_all.get(b) or read_device(b, sys_root)
        if dev is None:
            continue
        sysfs_all[dev.bus_id] = dev
        _with_upstream(sysfs_all, b, sys_root)
    if probe is None:
        from gpulane.topology.sysfs import list_devices

        for b in list_devices(sys_root):
            dev = read_device(b, sys_root)
            if dev is not None and dev.is_nvidia_gpu:
                sysfs_all[dev.bus_id] = dev
                _with_upstream(sysfs_all, b, sys_root)
    inp.sysfs = sysfs_all


MIG_WORDS = (
    "MIG mode on: collectives, peer copies and NVLink figures of this GPU are not measured "
    "(no P2P or NVLink between MIG devices); copies and tokens measure one MIG slice"
)


def _judge_links(
    topo: Topology, probe: NvmlProbe | None, under_load: bool, why: str | None = None
) -> None:
    """No GPU said first; links read under load, or a note that idle links run slow."""
    if not topo.gpus and why is not None and GpuUnread.SAYS in why:
        topo.missing.insert(0, f"NVML counts GPUs but could not read them all: {why}")
    elif not topo.gpus:
        topo.missing.insert(0, "no NVIDIA GPU found on this machine")
    for i in range(probe.count if probe is not None else 0):
        if probe is not None and probe.mig_on(i):
            topo.warnings.append(f"GPU{i}: {MIG_WORDS}")
    if under_load and probe is not None and topo.gpus and not probe.unread:
        _load_check(probe, topo)
    elif topo.gpus and any(
        g.pcie is not None
        and g.pcie.gen is not None
        and g.pcie.gen_max is not None
        and g.pcie.gen < g.pcie.gen_max
        for g in topo.gpus
    ):
        topo.warnings.append(
            "some GPU links run below their top speed at idle; `gpulane topo --under-load` "
            "reads them during a short copy burst"
        )


# --- under load ---------------------------------------------------------------------------


def _copy_burst(indices: list[int], seconds: float, stop: threading.Event) -> str | None:
    """Host->device copies on each GPU (CUDA device numbers) until ``stop``; None, or why
    it could not run."""
    try:
        import torch

        if not torch.cuda.is_available():
            return "torch sees no CUDA device"
        bufs = []
        for i in indices:
            host = torch.empty(256 << 20, dtype=torch.uint8).pin_memory()
            dev = torch.empty(256 << 20, dtype=torch.uint8, device=f"cuda:{i}")
            bufs.append((host, dev))
        deadline = time.monotonic() + seconds
        while not stop.is_set() and time.monotonic() < deadline:
            for host, dev in bufs:
                dev.copy_(host, non_blocking=True)
            torch.cuda.synchronize()
        return None
    except ImportError:
        return "torch is not installed"
    except Exception as err:
        return f"copy burst failed: {err}"


def cuda_ordinals(nvml_indices: list[int]) -> dict[int, int] | None:
    """NVML index -> CUDA device number, for the GPUs CUDA_VISIBLE_DEVICES lets CUDA see
    (all of them, in NVML's bus order, when it is unset). None when it names GPUs by UUID
    or MIG id, which cannot be matched to NVML indices here."""
    vis = os.environ.get("CUDA_VISIBLE_DEVICES")
    if vis is None:
        return {i: i for i in nvml_indices}
    out: dict[int, int] = {}
    for part in (p.strip() for p in vis.split(",")):
        if not part.isdigit():
            return None if part and not out else out
        if int(part) not in nvml_indices or int(part) in out:
            break  # CUDA stops at the first entry that names no GPU (or one twice)
        out[int(part)] = len(out)
    return out


def _load_check(probe: NvmlProbe, topo: Topology, seconds: float = 3.0) -> None:
    """Read each GPU's link while host->device copies run on it."""
    ordinals = cuda_ordinals([g.index for g in topo.gpus if g.index < probe.count])
    vis = os.environ.get("CUDA_VISIBLE_DEVICES")
    if ordinals is None:
        topo.warnings.append(
            f"load check not run: CUDA_VISIBLE_DEVICES={vis} names GPUs by UUID, which "
            "gpulane does not match to NVML's indices; unset it or use indices"
        )
        return
    hidden = [g.name for g in topo.gpus if g.index not in ordinals]
    if hidden:
        topo.warnings.append(
            f"load check: {', '.join(hidden)} not visible to CUDA (CUDA_VISIBLE_DEVICES="
            f"{vis}): their links are read at idle only"
        )
    indices = list(ordinals)
    seen: dict[int, tuple[int, int]] = {}
    stop = threading.Event()
    result: list[str | None] = []
    # CUDA numbers devices fastest-first unless told; make it match NVML's bus order.
    os.environ.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    devices = [ordinals[i] for i in indices]  # cuda:N of each NVML GPU
    t = threading.Thread(target=lambda: result.append(_copy_burst(devices, seconds, stop)))
    t.start()
    while t.is_alive():
        for i in indices:
            gen, width = probe.current_link(i)
            old = seen.get(i, (0, 0))
            seen[i] = (max(old[0], gen or 0), max(old[1], width or 0))
        time.sleep(0.05)
    t.join()
    if result and result[0]:
        topo.warnings.append(f"load check not run: {result[0]}")
        return
    # Idle notes are answered now; what the links did under load replaces them.
    topo.warnings = [w for w in topo.warnings if "idle GPU may lower" not in w]
    reached: list[str] = []
    for g in topo.gpus:
        if g.index not in seen or g.pcie is None:
            continue
        gen, width = seen[g.index]
        idle = g.pcie.describe()
        g.pcie.gen = gen or g.pcie.gen
        g.pcie.width = width or g.pcie.width
        g.pcie.downtrained = g.pcie.compute_downtrained()
        reached.append(f"{g.name} {g.pcie.describe()} (idle {idle})")
        if g.pcie.downtrained:
            topo.warnings.append(
                f"{g.name}: under load the PCIe link reached only {g.pcie.describe()}, capable "
                f"of {g.pcie.describe_max()} (downtrained)"
            )
    topo.sources["under_load"] = f"{seconds:g} s host-to-device copy burst: " + ", ".join(reached)


# --- worst path for a run's GPUs ----------------------------------------------------------


def _physical_indices(indices: list[int]) -> list[int]:
    """Map CUDA-visible indices to NVML's through CUDA_VISIBLE_DEVICES (integers only)."""
    vis = os.environ.get("CUDA_VISIBLE_DEVICES")
    if not vis:
        return list(indices)
    parts = [p.strip() for p in vis.split(",") if p.strip()]
    if not all(p.isdigit() for p in parts):
        return list(indices)
    return [int(parts[i]) if i < len(parts) else i for i in indices]


def worst_path_for_gpus(indices: list[int]) -> str | None:
    """The worst nvidia-smi label among these local GPUs (as CUDA numbers them).

    The pair labels come from NVML, or ``nvidia-smi topo -m`` when NVML cannot tell; the
    worst of them is :func:`gpulane.topology.paths.path_label`'s. None when unknown or
    when fewer than two GPUs are given. Never raises.
    """
    try:
        phys = sorted(set(_physical_indices(list(indices))))
        if len(phys) < 2:
            return None
        names = [f"GPU{i}" for i in phys]
        return paths.path_label(_nvml_pairs(phys) or _smi_pairs(names), names)
    except Exception:
        return None


def _pairs_topology(labels: dict[tuple[str, str], str]) -> Topology:
    return Topology(
        pairs=[Pair(a, b, label, paths.label_kind(label)) for (a, b), label in labels.items()]
    )


def _nvml_pairs(phys: list[int]) -> Topology | None:
    """NVML's label for every pair of these GPUs (NVML numbering), or None."""
    probe, _ = _open_nvml()
    if probe is None:
        return None
    try:
        if not all(0 <= i < probe.count for i in phys):
            return None
        labels: dict[tuple[str, str], str] = {}
        for n, a in enumerate(phys):
            for b in phys[n + 1 :]:
                label = probe.label(a, b)
                if label is None:
                    return None
                labels[(f"GPU{a}", f"GPU{b}")] = label
        return _pairs_topology(labels)
    finally:
        probe.close()


def _smi_pairs(names: list[str]) -> Topology | None:
    """The pairs of these GPUs as ``nvidia-smi topo -m`` labels them, or None."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    text, _ = _run([smi, "topo", "-m"])
    if text is None:
        return None
    m = parse_topo_matrix(text, "nvidia-smi topo -m")
    if not all(n in m.gpus for n in names):
        return None
    return _pairs_topology(
        {(a, b): m.labels[(a, b)] for k, a in enumerate(names) for b in names[k + 1 :]}
    )


__all__ = [
    "GpuUnread",
    "NvmlProbe",
    "_cpu_list",
    "make_link",
    "probe_topology",
    "worst_path_for_gpus",
]


def not_readable_why() -> str:
    """Why lspci shows no capabilities: not root, or (as root) a container or VM that
    hides the PCI config space; "run as root" only to someone who is not."""
    import os

    if hasattr(os, "geteuid") and os.geteuid() == 0:
        return "hidden even from root: a container or VM without the PCI config space"
    return "run as root"
