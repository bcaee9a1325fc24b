"""A topology from files captured on another machine: `nvidia-smi topo -m` (perhaps with
`topo -p2p` matrices pasted below it), `topo -p2p`, `nvidia-smi -q`, `nvlink -s`, `lspci`
and a sysfs listing, each read by its own parser and joined by :func:`build`."""

from __future__ import annotations

from dataclasses import dataclass, field

from gpulane.errors import InputError
from gpulane.textio import clean_lines, guess_kind, read_text
from gpulane.topology.build import Inputs, build
from gpulane.topology.captures import TOPO_P2P, Capture, split_captures
from gpulane.topology.lspci import parse_lspci_tree, parse_lspci_verbose
from gpulane.topology.model import Topology
from gpulane.topology.nvlink import parse_nvlink_status
from gpulane.topology.p2p import MODES, mode_from_filename, mode_name, parse_p2p
from gpulane.topology.smi_query import parse_smi_query
from gpulane.topology.sysfs import parse_sysfs_listing
from gpulane.topology.topo_matrix import parse_topo_matrix


@dataclass
class CaptureFiles:
    """The files `gpulane topo` was given (each optional)."""

    topo_file: str | None = None
    p2p_file: list[str] = field(default_factory=list)
    smi_q_file: str | None = None
    nvlink_file: str | None = None
    lspci_file: list[str] = field(default_factory=list)
    sysfs_file: str | None = None

    def any(self) -> bool:
        return bool(
            self.topo_file or self.smi_q_file or self.nvlink_file or self.sysfs_file
            or self.p2p_file or self.lspci_file
        )  # fmt: skip


def _split_mode(arg: str) -> tuple[str | None, str]:
    head, sep, tail = arg.partition("=")
    if sep and (head.lower() in MODES or head.lower() in MODES.values()):
        return mode_name(head), tail
    return mode_from_filename(arg), arg


def _p2p_mode(capture: Capture, given: str | None, path: str, alone: bool) -> str:
    """The mode of a topo -p2p capture: its command line, else ``MODE=`` or the file name
    (when it is the file's only P2P matrix); a file that says none is refused, since a
    status under an unknown mode is one no acceptance rule can check."""
    if capture.mode:
        return capture.mode
    if given and alone:
        return given
    raise InputError(
        f"{path}: line {capture.line}: cannot tell which nvidia-smi topo -p2p mode this "
        "matrix is: pass the file as --p2p-file MODE=FILE (MODE r, w, n, a or p), name it "
        "after its mode (topo-p2p-r.txt), or keep the command line (nvidia-smi topo -p2p r) "
        "above each matrix"
    )


def _read_topo_file(path: str, inp: Inputs) -> None:
    """``--topo-file``: a topo -m matrix, perhaps followed by pasted topo -p2p matrices."""
    text = read_text(path)
    captures = split_captures(text, path)
    matrices = [c for c in captures if c.kind != TOPO_P2P]
    if len(matrices) > 1:
        lines = " and ".join(str(c.line) for c in matrices)
        raise InputError(f"{path}: two nvidia-smi topo -m matrices (lines {lines}); give one")
    inp.matrix = parse_topo_matrix(matrices[0].text if matrices else text, path)
    inp.sources["topo"] = path
    p2ps = [c for c in captures if c.kind == TOPO_P2P]
    for c in p2ps:
        mode = _p2p_mode(c, mode_from_filename(path), path, len(p2ps) == 1)
        inp.p2p.append(parse_p2p(c.text, path, mode))


def _read_p2p_file(arg: str, inp: Inputs) -> None:
    """``--p2p-file [MODE=]FILE``: one or more topo -p2p matrices."""
    given, path = _split_mode(arg)
    text = read_text(path)
    captures = split_captures(text, path)
    p2ps = [c for c in captures if c.kind == TOPO_P2P]
    if not p2ps or len(p2ps) < len(captures):
        # Not (only) P2P matrices: the parser says what the file is instead.
        other = next((c for c in captures if c.kind != TOPO_P2P), captures[0])
        parse_p2p(other.text, path, given)
    for c in p2ps:
        inp.p2p.append(parse_p2p(c.text, path, _p2p_mode(c, given, path, len(p2ps) == 1)))


def from_files(args: CaptureFiles) -> Topology:
    """The topology of files captured on some machine (nvidia-smi, lspci, sysfs)."""
    inp = Inputs()
    if args.topo_file:
        _read_topo_file(args.topo_file, inp)
    else:
        inp.missing.append("topology matrix: no --topo-file; path labels and NICs unknown")
    for arg in args.p2p_file:
        _read_p2p_file(arg, inp)
    if args.p2p_file:
        inp.sources["p2p"] = ", ".join(args.p2p_file)
    elif inp.p2p and args.topo_file:
        inp.sources["p2p"] = args.topo_file
    else:
        inp.missing.append("P2P status: no --p2p-file; P2P support per mode unknown")
    if args.smi_q_file:
        inp.smi = parse_smi_query(read_text(args.smi_q_file), args.smi_q_file)
        inp.sources["gpus"] = args.smi_q_file
    if args.nvlink_file:
        inp.nvlink = parse_nvlink_status(read_text(args.nvlink_file), args.nvlink_file)
        inp.sources["nvlink"] = args.nvlink_file
    for path in args.lspci_file:
        text = read_text(path)
        kind = guess_kind(clean_lines(text, path))
        if kind == "lspci -tv":
            inp.trees.append(parse_lspci_tree(text, path))
            inp.sources["lspci_tree"] = path
        else:
            inp.lspci.extend(parse_lspci_verbose(text, path))
            inp.sources["lspci"] = path
    if args.sysfs_file:
        inp.sysfs = parse_sysfs_listing(read_text(args.sysfs_file), args.sysfs_file)
        inp.sources["sysfs"] = args.sysfs_file
    if not (args.smi_q_file or args.lspci_file or args.sysfs_file):
        inp.missing.append(
            "PCIe links: no --smi-q-file, --lspci-file or --sysfs-file; bus ids, link "
            "speeds and widths unknown"
        )
    elif not inp.trees and not args.sysfs_file:
        inp.missing.append(
            "PCIe tree: no `lspci -tv` or sysfs listing; links above the GPUs unknown"
        )
    topo = build(inp)
    if not topo.gpus:
        raise InputError("no GPUs in the given files")
    return topo
