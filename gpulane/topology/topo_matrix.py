"""``nvidia-smi topo -m`` (``topo --matrix``) output.

Reads every form seen in the wild: tab-separated (as printed) or with tabs turned into
spaces, CRLF line ends, ANSI underline codes in the header, NIC columns named ``NIC#``
with a ``NIC Legend`` or named after the device (``mlx5_0``) as older drivers print them,
``CPU Affinity`` / ``NUMA Affinity`` / ``GPU NUMA ID`` columns present or not, and the
old ``SOC`` label (read as ``SYS``, the original kept). A matrix that is cut short,
asymmetric, or holds anything but path labels is an error: it is never guessed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gpulane.errors import ParseError
from gpulane.textio import clean_lines, first_content_line, wrong_kind
from gpulane.topology import paths

WHAT = "nvidia-smi topo -m"
_EXTRA_COLUMNS = (("CPU", "Affinity"), ("NUMA", "Affinity"), ("GPU", "NUMA", "ID"))
_DEVICE_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_.:-]{0,40}$")
_GPU_RE = re.compile(r"^GPU(\d{1,4})$")
_NIC_RE = re.compile(r"^NIC(\d{1,4})$")
_NIC_LEGEND_RE = re.compile(r"^\s*(NIC\d{1,4})\s*:\s*(\S+)\s*$")
_AFFINITY_RE = re.compile(r"^(?:\d+(?:-\d+)?)(?:,\d+(?:-\d+)?)*$")
_P2P_CODES = {"OK", "CNS", "GNS", "TNS", "NS", "U"}


@dataclass
class TopoMatrix:
    """A parsed topology matrix.

    ``devices`` are the column names as printed; ``names`` the names gpulane uses
    (``GPU0``.., ``NIC0``..: a NIC column printed as ``mlx5_0`` becomes ``NIC0`` with
    device ``mlx5_0``). ``labels[(a, b)]`` is the normalised label (``SOC`` -> ``SYS``)
    and ``original[(a, b)]`` what was printed.
    """

    source: str
    devices: list[str]
    names: list[str]
    gpus: list[str]
    nics: list[str]
    labels: dict[tuple[str, str], str]
    original: dict[tuple[str, str], str]
    nic_devices: dict[str, str | None] = field(default_factory=dict)
    cpu_affinity: dict[str, str | None] = field(default_factory=dict)
    numa_affinity: dict[str, str | None] = field(default_factory=dict)
    gpu_numa_id: dict[str, int | None] = field(default_factory=dict)
    columns: list[str] = field(default_factory=list)  # affinity columns present
    legend: dict[str, str] = field(default_factory=dict)

    def label(self, a: str, b: str) -> str:
        return self.labels[(a, b)]


def _extra_columns(tokens: list[str], source: str, line: int) -> list[str]:
    """Match the words after the device columns against the known affinity columns."""
    out: list[str] = []
    i = 0
    while i < len(tokens):
        for words in _EXTRA_COLUMNS:
            if tuple(tokens[i : i + len(words)]) == words:
                out.append(" ".join(words))
                i += len(words)
                break
        else:
            raise ParseError(
                f"unexpected column header {tokens[i]!r} (known: CPU Affinity, NUMA Affinity, "
                "GPU NUMA ID)",
                source,
                line,
            )
    if len(set(out)) != len(out):
        raise ParseError("a column header appears twice", source, line)
    return out


def _parse_header(line_text: str, source: str, line: int) -> tuple[list[str], list[str]]:
    tokens = line_text.split()
    devices: list[str] = []
    i = 0
    while i < len(tokens) and not any(tokens[i] == words[0] for words in _EXTRA_COLUMNS[:2]):
        if tokens[i] == "GPU" and tokens[i + 1 : i + 3] == ["NUMA", "ID"]:
            break
        devices.append(tokens[i])
        i += 1
    extras = _extra_columns(tokens[i:], source, line)
    if not devices:
        raise ParseError("no device columns in the header (expected GPU0 GPU1 ...)", source, line)
    for d in devices:
        if not _DEVICE_RE.match(d):
            raise ParseError(f"{d!r} is not a device column name", source, line)
    if not any(_GPU_RE.match(d) for d in devices):
        raise ParseError("the header names no GPU (expected GPU0 GPU1 ...)", source, line)
    if len(set(devices)) != len(devices):
        raise ParseError("a device column appears twice in the header", source, line)
    return devices, extras


def _names(devices: list[str]) -> tuple[list[str], list[str], list[str], dict[str, str | None]]:
    names: list[str] = []
    gpus: list[str] = []
    nics: list[str] = []
    nic_devices: dict[str, str | None] = {}
    legacy_nic = 0
    used = {d for d in devices if _NIC_RE.match(d)}
    for d in devices:
        if _GPU_RE.match(d):
            names.append(d)
            gpus.append(d)
        elif _NIC_RE.match(d):
            names.append(d)
            nics.append(d)
            nic_devices[d] = None
        else:
            # Older drivers name NIC columns after the device (mlx5_0).
            while f"NIC{legacy_nic}" in used:
                legacy_nic += 1
            name = f"NIC{legacy_nic}"
            used.add(name)
            names.append(name)
            nics.append(name)
            nic_devices[name] = d
    return names, gpus, nics, nic_devices


def parse_topo_matrix(text: str, source: str = "<text>") -> TopoMatrix:
    """Parse ``nvidia-smi topo -m`` output; :class:`ParseError` names the file and line."""
    lines = clean_lines(text, source)
    start = first_content_line(lines)
    if start == len(lines):
        raise ParseError(f"empty: no {WHAT} matrix", source, 1)
    header_line = start + 1
    other = wrong_kind(WHAT, lines, source)
    if other is not None:
        raise other
    devices, extras = _parse_header(lines[start], source, header_line)
    names, gpus, nics, nic_devices = _names(devices)
    n = len(devices)
    labels: dict[tuple[str, str], str] = {}
    original: dict[tuple[str, str], str] = {}
    cpu_aff: dict[str, str | None] = {}
    numa_aff: dict[str, str | None] = {}
    gpu_numa: dict[str, int | None] = {}

    i = start + 1
    for row in range(n):
        if i >= len(lines) or not lines[i].strip() or lines[i].strip().startswith("Legend"):
            missing = ", ".join(devices[row:])
            raise ParseError(
                f"truncated matrix: no row for {missing} (the header has {n} devices)",
                source,
                i + 1,
            )
        number = i + 1
        tokens = lines[i].split()
        if tokens[0] != devices[row]:
            raise ParseError(
                f"expected the row of {devices[row]}, found {tokens[0]!r}", source, number
            )
        cells = tokens[1:]
        if len(cells) < n:
            raise ParseError(
                f"row {devices[row]} has {len(cells)} cells, the header has {n} devices "
                "(truncated or damaged line)",
                source,
                number,
            )
        me = names[row]
        for col in range(n):
            cell = cells[col]
            if col == row:
                if cell != paths.SELF:
                    raise ParseError(
                        f"{devices[row]} against itself should be X, found {cell!r}",
                        source,
                        number,
                    )
                continue
            if cell in _P2P_CODES:
                raise ParseError(
                    f"{cell!r} is a P2P status, not a path label: this looks like "
                    "nvidia-smi topo -p2p output (pass it with --p2p-file)",
                    source,
                    number,
                )
            if not paths.is_label(cell):
                raise ParseError(
                    f"{cell!r} between {devices[row]} and {devices[col]} is not a path label "
                    "(expected X, NV#, PIX, PXB, PHB, NODE, SYS or SOC)",
                    source,
                    number,
                )
            labels[(me, names[col])] = paths.normalize_label(cell)
            original[(me, names[col])] = cell
        rest = cells[n:]
        if len(rest) > len(extras):
            raise ParseError(
                f"row {devices[row]} has {len(rest)} cells after the matrix, the header names "
                f"{len(extras)} ({', '.join(extras) or 'none'})",
                source,
                number,
            )
        values: dict[str, str | None] = {c: None for c in extras}
        for c, v in zip(extras, rest, strict=False):
            values[c] = None if v in ("N/A", "") else v
        if me in gpus:
            cpu = values.get("CPU Affinity")
            if cpu is not None and not _AFFINITY_RE.match(cpu):
                raise ParseError(f"CPU Affinity {cpu!r} is not a CPU list", source, number)
            numa = values.get("NUMA Affinity")
            if numa is not None and not _AFFINITY_RE.match(numa):
                raise ParseError(f"NUMA Affinity {numa!r} is not a node list", source, number)
            gid = values.get("GPU NUMA ID")
            if gid is not None and not gid.isdigit():
                raise ParseError(f"GPU NUMA ID {gid!r} is not a number", source, number)
            cpu_aff[me] = cpu
            numa_aff[me] = numa
            gpu_numa[me] = int(gid) if gid is not None else None
        elif rest:
            raise ParseError(f"NIC row {devices[row]} has cells after the matrix", source, number)
        i += 1

    for (a, b), lab in labels.items():
        if labels[(b, a)] != lab:
            raise ParseError(
                f"matrix is not symmetric: {a}->{b} is {original[(a, b)]} but {b}->{a} is "
                f"{original[(b, a)]}",
                source,
                header_line,
            )

    # After the rows: blank lines, then the legends. Anything else before them is an error.
    legend: dict[str, str] = {}
    in_legend = False
    in_nic_legend = False
    for j in range(i, len(lines)):
        s = lines[j].strip()
        if not s:
            continue
        if s in ("Legend:", "Legend"):
            in_legend, in_nic_legend = True, False
            continue
        if s in ("NIC Legend:", "NIC Legend"):
            in_legend, in_nic_legend = True, True
            continue
        if not in_legend:
            raise ParseError(
                f"unexpected line after the matrix (the header has {n} devices): {s[:40]!r}",
                source,
                j + 1,
            )
        if in_nic_legend:
            m = _NIC_LEGEND_RE.match(lines[j])
            if m:
                nic, dev = m.groups()
                if nic not in nic_devices:
                    raise ParseError(
                        f"the NIC legend names {nic}, which is not in the matrix", source, j + 1
                    )
                nic_devices[nic] = dev
                continue
        if "=" in s:
            key, _, meaning = s.partition("=")
            legend[key.strip()] = meaning.strip()
        # Other text after the legend (a stray code fence, a prompt) is not part of it.

    columns = list(extras)
    return TopoMatrix(
        source=source,
        devices=devices,
        names=names,
        gpus=gpus,
        nics=nics,
        labels=labels,
        original=original,
        nic_devices=nic_devices,
        cpu_affinity=cpu_aff,
        numa_affinity=numa_aff,
        gpu_numa_id=gpu_numa,
        columns=columns,
        legend=legend,
    )
