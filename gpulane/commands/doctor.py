"""``gpulane doctor``: why is this path slow? Ranked findings with their evidence and fix.

gpulane doctor                           # live: lspci -vvv, nvidia-smi -q / nvlink -e, NVML,
                                         # /proc/cmdline, iommu_groups, modules, dmesg, NCCL_*
gpulane doctor --run runs/20261122-...   # also that run's rows, ranks' CPUs, NCCL's lines
gpulane doctor --lspci-file lspci-vvv.txt --smi-q-file q.txt ...   # files from elsewhere
gpulane doctor --json                    # the same findings for machines

Exit status: 0 no finding of severity error, 1 at least one, 2 bad input (a capture
file of the wrong kind, say) or nothing that could be checked.
"""

from __future__ import annotations

import json
import sys

from gpulane.commands.args import ArgumentParser
from gpulane.errors import InputError, ParseError
from gpulane.textio import clean_lines, guess_kind, read_text

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


# What each capture option's file must be, as textio.guess_kind names kinds of output
# (nvlink -e prints the same "GPU n: ... (UUID" and "Link n:" lines as nvlink -s). An option
# with no kind here takes no capture of nvidia-smi, lspci or nccl-tests at all.
EXPECTED_KIND = {
    "--lspci-file": ("lspci", "lspci -vvv"),
    "--smi-q-file": ("nvidia-smi -q", "nvidia-smi -q"),
    "--nvlink-e-file": ("nvidia-smi nvlink -s", "nvidia-smi nvlink -e"),
    "--topo-file": ("nvidia-smi topo -m", "nvidia-smi topo -m"),
    "--p2p-file": ("nvidia-smi topo -p2p", "nvidia-smi topo -p2p"),
}


def _p2p_path(value: str) -> str:
    """FILE of ``[MODE=]FILE``."""
    mode, sep, rest = value.partition("=")
    return rest if sep and mode and "/" not in mode else value


def check_capture_kinds(given: list[tuple[str, str]]) -> None:
    """A capture file that is plainly another command's output (a topo -m file given as
    --lspci-file) is bad input: one line naming the file and what it looks like."""
    for option, path in given:
        try:
            lines = clean_lines(read_text(path), path)
        except (ParseError, OSError):
            continue  # unreadable: the reader of that option says so in its own words
        kind = guess_kind(lines)
        expected, what = EXPECTED_KIND.get(option, (None, FILE_OPTIONS.get(option, "")))
        if kind is None or kind == expected:
            continue
        what = what if option in EXPECTED_KIND else what.split(" (")[0]
        suffix = " output" if option in EXPECTED_KIND else ""
        raise InputError(f"{option} {path}: this looks like {kind} output, not {what}{suffix}")


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
    p.add_argument(
        "--p2p-trust",
        action="store_true",
        help="live: run a small all_reduce on every GPU pair (and with NCCL_P2P_DISABLE=1); "
        "a pair that hangs or is slower than host staging is an error, with its likely cause",
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
    given = [(o, getattr(args, o[2:].replace("-", "_"))) for o in FILE_OPTIONS]
    given += [("--p2p-file", _p2p_path(v)) for v in args.p2p_file]
    check_capture_kinds([(o, p) for o, p in given if p])
    if files.any():
        if args.no_load:
            raise InputError("--no-load is for the live machine; it cannot be used with files")
        if args.p2p_trust:
            raise InputError("--p2p-trust runs collectives on this machine; not with files")
        evidence = gather_files(files)
    else:
        evidence = gather_live(under_load=not args.no_load)
    if args.nccl_log:
        add_nccl_logs(evidence, list(args.nccl_log))
    if args.run:
        add_run(evidence, args.run)
    report = run_doctor(evidence)
    if args.p2p_trust:
        from gpulane.campaigns.accept.p2p_trust import doctor_p2p_trust
        from gpulane.campaigns.accept.suite import gpu_count

        doctor_p2p_trust(report, evidence, gpu_count())
    if args.json:
        json.dump(report.to_dict(), sys.stdout, indent=1, default=str)
        sys.stdout.write("\n")
    else:
        print("\n".join(render_text(report)))
    if report.nothing_checked():
        why = report.no_gpu or "no source of evidence could be read"
        raise InputError(
            f"doctor: nothing could be checked ({why}); run it on the GPU machine, or give "
            "files captured there (--lspci-file, --smi-q-file, --topo-file, ...) or --run DIR"
        )
    return report.exit_status()
