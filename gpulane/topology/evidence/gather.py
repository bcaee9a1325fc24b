"""The doctor's evidence: gathered live from this machine, or read from files captured on
another one. Every source that is absent is named with why (not installed, not root, no
such file), so a finding never rests on a guess and a missing one is never silent."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpulane.errors import GpulaneError, InputError, ParseError
from gpulane.preflight import PREFLIGHT_FILE
from gpulane.record import Row, read_all_rows
from gpulane.rundir import rows_files_under
from gpulane.textio import clean_lines, guess_kind, read_text
from gpulane.topology.evidence.acs import PciFunction, parse_acs
from gpulane.topology.evidence.iommu import IommuGroups, cmdline_params, parse_groups, read_groups
from gpulane.topology.evidence.kernel import Xid, parse_modules, parse_xids
from gpulane.topology.evidence.nvlink_errors import NvlinkErrors, parse_nvlink_errors
from gpulane.topology.files import CaptureFiles, from_files
from gpulane.topology.model import Topology
from gpulane.topology.nccl_logs import log_files, read_nccl_files, summary
from gpulane.topology.smi_query import SmiQuery, parse_smi_query

TIMEOUT_S = 60
NCCL_CONF = ("/etc/nccl.conf", "~/.nccl.conf")


@dataclass
class DoctorFiles:
    """Files captured on another machine (``gpulane doctor --lspci-file ...``)."""

    lspci_file: str | None = None
    smi_q_file: str | None = None
    nvlink_e_file: str | None = None
    topo_file: str | None = None
    p2p_file: list[str] = field(default_factory=list)
    cmdline_file: str | None = None
    iommu_file: str | None = None
    modules_file: str | None = None
    dmesg_file: str | None = None
    env_file: str | None = None
    nccl_log: list[str] = field(default_factory=list)

    def any(self) -> bool:
        return any(
            v for k, v in vars(self).items() if k != "nccl_log"
        )  # an INFO log alone keeps the machine live


@dataclass
class Evidence:
    """Everything the doctor's checks read; a field left None is named in ``absent``."""

    host: str
    live: bool
    sources: dict[str, str] = field(default_factory=dict)  # source -> where it was read
    absent: dict[str, str] = field(default_factory=dict)  # source -> why it is missing
    pci: list[PciFunction] | None = None
    smi: SmiQuery | None = None
    nvlink_errors: list[NvlinkErrors] | None = None
    topology: Topology | None = None
    cmdline: dict[str, str] | None = None  # IOMMU-related kernel parameters
    cmdline_text: str | None = None
    iommu: IommuGroups | None = None
    modules: set[str] | None = None
    memory_peers: list[str] | None = None
    driver_version: str | None = None  # /proc/driver/nvidia/version, first line
    xids: list[Xid] | None = None
    env: dict[str, str] = field(default_factory=dict)  # NCCL_* settings and where they came from
    env_from: dict[str, str] = field(default_factory=dict)
    rows: list[Row] | None = None
    # NCCL_* each run was asked to set (its preset, env.*): run id -> variable -> (value, how)
    run_asked: dict[str, dict[str, tuple[str, str]]] = field(default_factory=dict)
    preflight: list[dict[str, Any]] | None = None
    nccl: dict[str, Any] | None = None  # topology.nccl_logs.summary of NCCL's INFO lines
    run_dir: str | None = None
    # gpu_state.capture() of this machine's GPUs (processes, clocks event reasons, MIG)
    nvml: dict[str, Any] | None = None

    def got(self, name: str, where: str) -> None:
        self.sources[name] = where
        self.absent.pop(name, None)

    def missing(self, name: str, why: str) -> None:
        if name not in self.sources:
            self.absent[name] = why


def _run(argv: list[str]) -> tuple[str | None, str]:
    """(stdout, "") or (None, why)."""
    if shutil.which(argv[0]) is None:
        return None, f"{argv[0]} not installed"
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT_S)
    except (OSError, subprocess.SubprocessError) as err:
        return None, f"`{' '.join(argv)}` failed: {err}"
    if proc.returncode == 0 and not proc.stdout.strip():
        return None, f"`{' '.join(argv)}` printed nothing"
    if proc.returncode != 0:
        why = (proc.stderr or proc.stdout).strip().splitlines()
        return None, f"`{' '.join(argv)}` exited {proc.returncode}" + (
            f": {why[-1][:160]}" if why else ""
        )
    return proc.stdout, ""


def _read(path: str) -> tuple[str | None, str]:
    try:
        return Path(path).expanduser().read_text(errors="replace"), ""
    except OSError as err:
        return None, f"cannot read {path}: {err.strerror or err}"


# -- live ---------------------------------------------------------------------------------


def gather_live(under_load: bool = True, sys_root: str = "/sys") -> Evidence:
    """What this machine says now. Never raises for a missing tool, driver or permission."""
    ev = Evidence(host=socket.gethostname().split(".")[0], live=True)
    # The read-only tools at once (each nvidia-smi call opens the driver for every GPU by
    # itself), before the topology probe, whose load check would change what they read.
    tools = (["lspci", "-vvv"], ["nvidia-smi", "-q"], ["nvidia-smi", "nvlink", "-e"], ["dmesg"])
    with ThreadPoolExecutor(max_workers=len(tools)) as pool:
        ran = dict(zip([t[-1] for t in tools], pool.map(_run, tools), strict=True))
    text, why = ran["-vvv"]
    if text is not None:
        ev.pci = parse_acs(text)
        ev.got("lspci", "lspci -vvv")
        if "<access denied>" in text and not any(f.acs_ctl for f in ev.pci):
            ev.absent["acs"] = (
                "lspci -vvv ran without root: capabilities <access denied>; run gpulane doctor as root for ACS"
            )
    else:
        ev.missing("lspci", why)
    text, why = ran["-q"]
    _smi(ev, text, why, "nvidia-smi -q")
    text, why = ran["-e"]
    _nvlink(ev, text, why, "nvidia-smi nvlink -e")
    try:
        from gpulane.topology.live import probe_topology

        ev.topology = probe_topology(under_load=under_load, sys_root=sys_root)
        ev.got(
            "topology", "live probe (NVML, nvidia-smi topo)" + (" under load" if under_load else "")
        )
    except Exception as err:  # the probe never raises for missing parts; anything else is named
        ev.missing("topology", f"live probe failed: {err}")
    _live_nvml(ev)
    text, why = _read("/proc/cmdline")
    _cmdline(ev, text, why, "/proc/cmdline")
    groups = read_groups(sys_root)
    if groups is not None:
        ev.iommu = groups
        ev.got("iommu", f"{sys_root}/kernel/iommu_groups")
    else:
        ev.missing("iommu", f"no {sys_root}/kernel/iommu_groups: no IOMMU enabled (or exposed)")
    text, why = _read("/proc/modules")
    _modules(ev, text, why, "/proc/modules")
    peers = Path(sys_root) / "kernel" / "mm" / "memory_peers"
    try:
        ev.memory_peers = sorted(os.listdir(peers))
        ev.got("memory_peers", str(peers))
    except OSError:
        ev.memory_peers = []
        ev.missing("memory_peers", f"no {peers} (no legacy nv_peer_mem)")
    text, why = _read("/proc/driver/nvidia/version")
    if text is not None:
        ev.driver_version = text.strip().splitlines()[0] if text.strip() else None
        ev.got("driver", "/proc/driver/nvidia/version")
    else:
        ev.missing("driver", why)
    _live_kernel_log(ev, ran["dmesg"])
    _live_env(ev)
    _no_run_yet(ev)
    return ev


def _live_nvml(ev: Evidence) -> None:
    """NVML's reading of the GPUs now: other processes, clocks event reasons, MIG mode
    (what nvidia-smi -q also says, there without nvidia-smi)."""
    from gpulane.topology.gpu_state import capture

    raw = capture()
    if raw.get("gpus"):
        ev.nvml = raw
        ev.got("nvml", "NVML (nvidia-ml-py)")
    else:
        ev.missing("nvml", str(raw.get("error") or "NVML read no GPU"))


def _no_run_yet(ev: Evidence) -> None:
    """What only a run directory or NCCL's lines give, until add_run/add_nccl_logs."""
    ev.missing("rows", "no run directory given (--run DIR)")
    ev.missing("preflight", "no run directory given (--run DIR): where the ranks ran unknown")
    ev.missing("nccl", "no NCCL INFO lines given (--run DIR of a GPU run, or --nccl-log FILE)")


def _live_kernel_log(ev: Evidence, dmesg: tuple[str | None, str] | None = None) -> None:
    text, why = dmesg if dmesg is not None else _run(["dmesg"])
    where = "dmesg"
    if text is None:
        text, why2 = _run(["journalctl", "-k", "-b", "--no-pager", "-q"])
        where = "journalctl -k -b"
        why = f"{why}; {why2}" if text is None else why
    if text is not None:
        ev.xids = parse_xids(text)
        ev.got("kernel_log", where)
    else:
        ev.missing("kernel_log", f"{why} (Xid errors unknown: run as root)")


def _live_env(ev: Evidence) -> None:
    for conf in NCCL_CONF:
        text, _ = _read(conf)
        if text is not None:
            for key, value in _env_lines(text).items():
                ev.env[key] = value
                ev.env_from[key] = os.path.expanduser(conf)
    for key, value in os.environ.items():
        if key.startswith("NCCL_"):
            ev.env[key] = value
            ev.env_from[key] = "environment"
    ev.got("env", "environment and " + ", ".join(NCCL_CONF))


# -- parsed pieces shared by both ways -----------------------------------------------------


def _smi(ev: Evidence, text: str | None, why: str, where: str) -> None:
    if text is None:
        ev.missing("smi", why)
        return
    try:
        ev.smi = parse_smi_query(text, where)
        ev.got("smi", where)
    except ParseError as err:
        ev.missing("smi", f"{where}: {err}")


def _nvlink(ev: Evidence, text: str | None, why: str, where: str) -> None:
    if text is None:
        ev.missing("nvlink_errors", why)
        return
    ev.nvlink_errors = parse_nvlink_errors(text)
    if ev.nvlink_errors:
        ev.got("nvlink_errors", where)
    else:
        ev.missing("nvlink_errors", f"{where}: no GPU with NVLink counters")


def _cmdline(ev: Evidence, text: str | None, why: str, where: str) -> None:
    if text is None:
        ev.missing("cmdline", why)
        return
    ev.cmdline_text = " ".join(text.split())
    ev.cmdline = cmdline_params(text)
    ev.got("cmdline", where)


def _modules(ev: Evidence, text: str | None, why: str, where: str) -> None:
    if text is None:
        ev.missing("modules", why)
        return
    ev.modules = parse_modules(text)
    ev.got("modules", where)


def _env_lines(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        line = line.strip().removeprefix("export ").strip()
        key, sep, value = line.partition("=")
        if sep and key.startswith("NCCL_") and key.replace("_", "").isalnum():
            out[key] = value.strip().strip("'\"")
    return out


# -- files captured elsewhere -------------------------------------------------------------


def _file(path: str, option: str) -> str:
    try:
        return read_text(path)
    except ParseError as err:
        raise InputError(f"{option} {path}: {err}") from err


def gather_files(files: DoctorFiles) -> Evidence:
    """What files captured on some machine say; each source not given is named absent."""
    ev = Evidence(host="(captured files)", live=False)
    not_given = "not given (--{})"
    lspci_topo: list[str] = []  # the lspci file, when it tells the topology something
    if files.lspci_file:
        text = _file(files.lspci_file, "--lspci-file")
        pci = parse_acs(text)
        tree = _lspci_tree(text, files.lspci_file)  # no ACS, but the PCIe tree
        if pci or tree or not text.strip():
            ev.pci = pci
            ev.got("lspci", files.lspci_file)
            # Device lines give bus ids and links; a grep of ACSCtl lines gives neither.
            if tree or any(f.bus_id for f in pci):
                lspci_topo.append(files.lspci_file)
        else:
            # What the capture script got instead, e.g. "lspci: command not found": the
            # machine's lspci is absent, as the live doctor would have said there.
            first = text.strip().splitlines()[0].strip()[:120]
            ev.missing("lspci", f"{files.lspci_file}: not lspci -vvv output (line 1: {first!r})")
        if "<access denied>" in text and not any(f.acs_ctl for f in pci):
            ev.absent["acs"] = (
                f"{files.lspci_file}: lspci ran without root (<access denied>): ACS unknown"
            )
    else:
        ev.missing("lspci", not_given.format("lspci-file"))
    if files.smi_q_file:
        text = _file(files.smi_q_file, "--smi-q-file")
        try:
            ev.smi = parse_smi_query(text, files.smi_q_file)
        except ParseError as err:
            raise InputError(f"--smi-q-file {files.smi_q_file}: {err}") from err
        ev.got("smi", files.smi_q_file)
    else:
        ev.missing("smi", not_given.format("smi-q-file"))
    if files.nvlink_e_file:
        _nvlink(ev, _file(files.nvlink_e_file, "--nvlink-e-file"), "", files.nvlink_e_file)
    else:
        ev.missing("nvlink_errors", not_given.format("nvlink-e-file"))
    if files.topo_file or files.p2p_file or files.smi_q_file or lspci_topo:
        _topology_files(ev, files, lspci_topo)
    else:
        ev.missing("topology", not_given.format("topo-file"))
    for name, path, parse in (
        ("cmdline", files.cmdline_file, _cmdline),
        ("modules", files.modules_file, _modules),
    ):
        if path:
            parse(ev, _file(path, f"--{name}-file"), "", path)
        else:
            ev.missing(name, not_given.format(f"{name}-file"))
    if files.iommu_file:
        groups = parse_groups(_file(files.iommu_file, "--iommu-file"))
        if groups.types or groups.devices:
            ev.iommu = groups
            ev.got("iommu", files.iommu_file)
        else:  # the capture's grep/ls found no /sys/kernel/iommu_groups, as live would say
            ev.missing(
                "iommu", f"{files.iommu_file}: no IOMMU group (no IOMMU enabled, or exposed)"
            )
    else:
        ev.missing("iommu", not_given.format("iommu-file"))
    ev.missing("memory_peers", "only read live (/sys/kernel/mm/memory_peers)")
    ev.missing("driver", "only read live (/proc/driver/nvidia/version)")
    if files.dmesg_file:
        ev.xids = parse_xids(_file(files.dmesg_file, "--dmesg-file"))
        ev.got("kernel_log", files.dmesg_file)
    else:
        ev.missing("kernel_log", not_given.format("dmesg-file"))
    if files.env_file:
        ev.env = _env_lines(_file(files.env_file, "--env-file"))
        ev.env_from = {k: files.env_file for k in ev.env}
        ev.got("env", files.env_file)
    else:
        ev.missing("env", not_given.format("env-file"))
    _no_run_yet(ev)
    return ev


def _lspci_tree(text: str, path: str) -> bool:
    try:
        return guess_kind(clean_lines(text, path)) == "lspci -tv"
    except ParseError:
        return False


def _topology_files(ev: Evidence, files: DoctorFiles, lspci: list[str]) -> None:
    """The topology of the files; an lspci capture the topology's parser refuses (a cut
    listing) is left out of it rather than costing the topo -m matrix."""
    where = ", ".join(x for x in [files.topo_file, *files.p2p_file] if x) or "files"
    capture = CaptureFiles(
        topo_file=files.topo_file,
        p2p_file=list(files.p2p_file),
        smi_q_file=files.smi_q_file,
        lspci_file=lspci,
    )
    try:
        ev.topology = from_files(capture)
        ev.got("topology", where)
        return
    except GpulaneError as err:
        if not lspci:
            ev.missing("topology", f"topology from the files: {err}")
            return
        why = str(err)
    capture.lspci_file = []
    try:
        ev.topology = from_files(capture)
        ev.got("topology", f"{where} (lspci left out: {why[:200]})")
    except GpulaneError as err:
        ev.missing("topology", f"topology from the files: {err}")


# -- a run directory and NCCL's own lines --------------------------------------------------


def add_run(ev: Evidence, run_dir: str) -> None:
    """The rows, the pre-flight table and NCCL's lines of a run directory."""
    path = Path(run_dir)
    if not path.exists():
        raise InputError(f"--run {run_dir}: no such run directory or rows file")
    ev.run_dir = str(path)
    rows_files = rows_files_under(path)
    ev.rows = [r for f in rows_files for r in read_all_rows(f)]
    if ev.rows:
        ev.got("rows", f"{run_dir} ({len(ev.rows)} rows)")
    else:
        ev.missing("rows", f"{run_dir}: no rows.jsonl with rows")
    if path.is_dir():
        ev.run_asked = asked_env([d / "config.yaml" for d in _run_dirs(path)])
    flights = sorted(path.rglob(PREFLIGHT_FILE)) if path.is_dir() else []
    if flights:
        try:
            ev.preflight = [f for p in flights for f in json.loads(p.read_text())]
            ev.got("preflight", ", ".join(str(p) for p in flights))
        except (OSError, ValueError) as err:
            ev.missing("preflight", f"{flights[0]}: {err}")
    else:
        ev.missing("preflight", f"{run_dir}: no {PREFLIGHT_FILE} (where the ranks ran unknown)")
    if path.is_dir() and ev.nccl is None:
        run_dirs = sorted({p.parent for p in rows_files}) or [path]
        files = [f for d in run_dirs for f in log_files(d, env={})[0]]
        if files:
            add_nccl_logs(ev, [str(f) for f in files])


def _run_dirs(path: Path) -> list[Path]:
    return sorted({p.parent for p in rows_files_under(path)}) or [path]


def asked_env(configs: list[Path]) -> dict[str, dict[str, tuple[str, str]]]:
    """Per run id, the NCCL_* variables the run was asked to set, from its saved
    configuration: the preset's (``preset=pcie-host``) and the user's ``env.*``."""
    import yaml  # PyYAML comes with OmegaConf

    out: dict[str, dict[str, tuple[str, str]]] = {}
    for config in configs:
        try:
            data = yaml.safe_load(config.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, yaml.YAMLError):
            continue
        if not isinstance(data, dict):
            continue
        run = str(data.get("run_id") or config.parent.name)
        asked = out.setdefault(run, {})
        preset = data.get("preset") if isinstance(data.get("preset"), dict) else {}
        assert isinstance(preset, dict)
        for key, value in (preset.get("env") or {}).items():
            if str(key).startswith("NCCL_"):
                asked[str(key)] = (str(value), f"run {run}'s preset={preset.get('name')}")
        for key, value in (data.get("env") or {}).items():  # env.* overrides the preset's
            if str(key).startswith("NCCL_"):
                asked[str(key)] = (str(value), f"run {run}'s env.{key}")
    return out


def add_nccl_logs(ev: Evidence, paths: list[str]) -> None:
    files = [Path(p) for p in paths]
    for f in files:
        if not f.is_file():
            raise InputError(f"--nccl-log {f}: no such file")
    info = read_nccl_files(files)
    if info.empty():
        ev.missing("nccl", f"{', '.join(paths[:3])}: no NCCL INFO lines")
        return
    ev.nccl = summary(info, ", ".join(paths[:3]) + (" ..." if len(paths) > 3 else ""))
    ev.got("nccl", ev.nccl["source"])
