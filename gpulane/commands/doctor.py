"""``gpulane doctor``: why is this path slow? Ranked findings with their evidence and fix.

gpulane doctor                           # live: lspci -vvv, nvidia-smi -q / nvlink -e, NVML,
                                         # /proc/cmdline, iommu_groups, modules, dmesg, NCCL_*
gpulane doctor --run runs/20261122-...   # also that run's rows, ranks' CPUs, NCCL's lines
gpulane doctor --lspci-file lspci-vvv.txt --smi-q-file q.txt ...   # files from elsewhere
gpulane doctor --json                    # the same findings for machines

Exit status: 0 no finding of severity error, 1 at least one, 2 bad input.
"""

from __future__ import annotations

import json
import sys

from gpulane.commands.args import ArgumentParser
from gpulane.errors import InputError

FILE_OPTIONS = {
    "--lspci-file": "`lspci -vvv` output, as root (ACS control, bus ranges, devices)",
    "--smi-q-file": "`nvidia-smi -q` output (persistence, clocks, ECC, PCIe links, replays)",
    "--nvlink-e-file": "`nvidia-smi nvlink -e` output (NVLink error counters)",
    "--topo-file": "`nvidia-smi topo -m` output (path labels, NICs, CPU affinity)",
    "--cmdline-file": "/proc/cmdline (IOMMU kernel parameters)",
    "--iommu-file": "`grep -H . /sys/kernel/iommu_groups/*/type; ls -d "
    "/sys/kernel/iommu_groups/*/devices/*` output (each group's DMA mode and devices)",
    "--modules-file": "/proc/modules or `lsmod` output (nvidia_peermem)",
    "--dmesg-file": "`dmesg` or `journalctl -k` output (Xid errors)",
    "--env-file": "KEY=VALUE lines (`env | grep ^NCCL_`, /etc/nccl.conf) of the machine",
}


def _parser() -> ArgumentParser:
    p = ArgumentParser(
        prog="gpulane doctor",
        description="Ranked findings on what costs this machine's GPU paths bandwidth (ACS, "
        "IOMMU, P2P, NCCL's transport, PCIe links, NVLink/Xid/ECC errors, clocks, NCCL_* "
        "variables, GPUDirect RDMA, NUMA placement, measured bandwidth). Live by default; "
        "from files captured on another machine with the --*-file options. Exit status: 0 "
        "no finding of severity error, 1 at least one, 2 bad input.",
    )
    for option, text in FILE_OPTIONS.items():
        p.add_argument(option, help=text)
    p.add_argument(
        "--p2p-file",
        action="append",
        default=[],
        metavar="[MODE=]FILE",
        help="`nvidia-smi topo -p2p MODE` output (as gpulane topo reads it); repeatable",
    )
    p.add_argument(
        "--run",
        metavar="DIR",
        help="a run directory (or a group of them): its rows (bandwidth against the line "
        "rate, the rows' NCCL_* env), preflight.json (where the ranks ran) and NCCL's lines",
    )
    p.add_argument(
        "--nccl-log",
        action="append",
        default=[],
        metavar="FILE",
        help="a file of NCCL INFO lines (NCCL_DEBUG=INFO); repeatable",
    )
    p.add_argument(
        "--no-load",
        action="store_true",
        help="live: read PCIe links idle instead of under a short copy load",
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    return p


def main(argv: list[str]) -> int:
    from gpulane.analysis.doctor import render_text, run_doctor
    from gpulane.topology.evidence import (
        DoctorFiles,
        add_nccl_logs,
        add_run,
        gather_files,
        gather_live,
    )

    args = _parser().parse_args(argv)
    files = DoctorFiles(
        lspci_file=args.lspci_file,
        smi_q_file=args.smi_q_file,
        nvlink_e_file=args.nvlink_e_file,
        topo_file=args.topo_file,
        p2p_file=list(args.p2p_file),
        cmdline_file=args.cmdline_file,
        iommu_file=args.iommu_file,
        modules_file=args.modules_file,
        dmesg_file=args.dmesg_file,
        env_file=args.env_file,
    )
    if files.any():
        if args.no_load:
            raise InputError("--no-load is for the live machine; it cannot be used with files")
        evidence = gather_files(files)
    else:
        evidence = gather_live(under_load=not args.no_load)
    if args.nccl_log:
        add_nccl_logs(evidence, list(args.nccl_log))
    if args.run:
        add_run(evidence, args.run)
    report = run_doctor(evidence)
    if args.json:
        json.dump(report.to_dict(), sys.stdout, indent=1, default=str)
        sys.stdout.write("\n")
    else:
        print("\n".join(render_text(report)))
    return report.exit_status()
