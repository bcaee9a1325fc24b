"""``gpulane topo``: the topology of this machine, or of files captured elsewhere.

gpulane topo                      # live: NVML, nvidia-smi, lspci, sysfs
gpulane topo --under-load         # also read the PCIe links during a copy burst
gpulane topo --topo-file topo-m.txt [--p2p-file r=topo-p2p-r.txt ...]
gpulane topo --topo-file pasted.txt   # topo -m, then `nvidia-smi topo -p2p r` and its matrix
             [--lspci-file lspci-vvv.txt] [--lspci-file lspci-tv.txt]
             [--smi-q-file nvidia-smi-q.txt] [--nvlink-file nvlink-s.txt]
             [--sysfs-file sysfs.txt] [--json]
"""

from __future__ import annotations

import json
import sys

from gpulane.commands.args import ArgumentParser
from gpulane.errors import InputError
from gpulane.topology.files import CaptureFiles, from_files


def _parser() -> ArgumentParser:
    p = ArgumentParser(
        prog="gpulane topo",
        description="GPU/NIC topology: path labels, PCIe links (up to the root port), P2P "
        "status, expected bandwidth per pair. Live by default; from captured files with "
        "--topo-file and friends.",
    )
    p.add_argument(
        "--topo-file",
        help="`nvidia-smi topo -m` output, optionally followed by pasted `topo -p2p MODE` "
        "outputs (each below its command line, or one in a file named after its mode)",
    )
    p.add_argument(
        "--p2p-file",
        action="append",
        default=[],
        metavar="[MODE=]FILE",
        help="`nvidia-smi topo -p2p MODE` output; MODE is r, w, n, a or p (read, write, "
        "nvlink, atomics, pcie), else taken from the file name (topo-p2p-r.txt) or from "
        "the command line pasted above each matrix; a file whose mode cannot be told is "
        "refused; repeatable",
    )
    p.add_argument(
        "--lspci-file",
        action="append",
        default=[],
        help="`lspci -vvv` or `lspci -tv` output (told apart by content); repeatable",
    )
    p.add_argument("--smi-q-file", help="`nvidia-smi -q` output (bus ids, models, PCIe links)")
    p.add_argument("--nvlink-file", help="`nvidia-smi nvlink -s` output (per-link speeds)")
    p.add_argument("--sysfs-file", help="a listing of /sys/bus/pci/devices link speeds")
    p.add_argument("--json", action="store_true", help="print the topology as JSON")
    p.add_argument(
        "--under-load",
        action="store_true",
        help="live only: read each GPU's PCIe link during a short host-to-device copy burst",
    )
    return p


def _check_p2p_args(values: list[str]) -> None:
    """``--p2p-file MODE=FILE`` with a MODE nvidia-smi has; a word before ``=`` that is no
    mode is a mistake, not part of a file name (unless that file exists)."""
    from pathlib import Path

    from gpulane.topology.p2p import MODES

    for value in values:
        mode, sep, path = value.partition("=")
        if sep and mode not in MODES and not Path(value).exists():
            modes = ", ".join(f"{m} ({name})" for m, name in MODES.items())
            raise InputError(
                f"--p2p-file {value}: {mode!r} is not a topo -p2p mode; write "
                f"--p2p-file MODE={path} with MODE one of {modes}, or --p2p-file {path} "
                "to take the mode from the file"
            )


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    _check_p2p_args(args.p2p_file)
    files = CaptureFiles(
        args.topo_file, args.p2p_file, args.smi_q_file, args.nvlink_file, args.lspci_file,
        args.sysfs_file,
    )  # fmt: skip
    if files.any():
        if args.under_load:
            raise InputError("--under-load reads the live machine; it cannot be used with files")
        topo = from_files(files)
    else:
        from gpulane.topology.live import probe_topology

        topo = probe_topology(under_load=args.under_load)
    if args.json:
        json.dump(topo.to_json(), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        from gpulane.topology.render import render

        render(topo)
    return 0
