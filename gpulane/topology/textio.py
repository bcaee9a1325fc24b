"""Reading captured text: line endings, ANSI codes, binary files.

Every parser goes through :func:`clean_lines`, so a file captured on Windows (CRLF), one
with the ANSI underline codes nvidia-smi puts in its header, or one pasted with tabs
turned into spaces reads as the original would.
"""

from __future__ import annotations

import os
import re

from gpulane.errors import ParseError

# ESC [ ... m (SGR) and other CSI sequences; also "[4m"/"[0m" whose ESC was lost in a paste.
_ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][A-Za-z0-9]|\[[0-9;]{1,5}m")
# Control characters other than tab; carriage returns are handled before this is used.
_CONTROL_RE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def strip_ansi(text: str) -> str:
    return _ANSI_RE.sub("", text)


def clean_lines(text: str, source: str) -> list[str]:
    """The lines of ``text`` with CR/LF normalised, ANSI codes removed, right-trimmed.

    Raises :class:`ParseError` naming the line when the text holds other control
    characters (a binary file, or one damaged in transit).
    """
    if "\x00" in text:
        where = text.count("\n", 0, text.index("\x00")) + 1
        raise ParseError("binary data (NUL bytes), not captured text output", source, where)
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = text.lstrip("\ufeff")
    lines = []
    for number, raw in enumerate(text.split("\n"), start=1):
        line = strip_ansi(raw)
        bad = _CONTROL_RE.search(line)
        if bad:
            raise ParseError(
                f"control character {bad.group()!r} in the text: a binary or damaged file",
                source,
                number,
            )
        lines.append(line.rstrip())
    return lines


def read_text(path: str | os.PathLike[str]) -> str:
    """The text of a captured file; a clear :class:`ParseError` for a binary or empty one."""
    name = os.fspath(path)
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as err:
        raise ParseError(f"cannot read: {err.strerror or err}", name) from None
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        # PowerShell's `>` writes UTF-16 with a byte-order mark.
        try:
            data = data.decode("utf-16").encode("utf-8")
        except UnicodeDecodeError:
            raise ParseError("damaged UTF-16 text", name, 1) from None
    if not data.strip():
        raise ParseError("the file is empty", name, 1)
    if b"\x00" in data:
        line = data.count(b"\n", 0, data.index(b"\x00")) + 1
        raise ParseError("binary data (NUL bytes), not captured text output", name, line)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        raise ParseError(
            f"not UTF-8 text (byte 0x{data[err.start]:02x}): a binary or damaged file",
            name,
            line,
        ) from None


def first_content_line(lines: list[str]) -> int:
    """Index of the first non-blank line (len(lines) when there is none)."""
    for i, line in enumerate(lines):
        if line.strip():
            return i
    return len(lines)


def guess_kind(lines: list[str]) -> str | None:
    """What kind of captured output this looks like, for 'wrong kind of file' errors."""
    head = "\n".join(line for line in lines[:60])
    if "NVSMI LOG" in head or re.search(r"^\s*Attached GPUs\s*:", head, re.M):
        return "nvidia-smi -q"
    if re.search(r"^GPU \d+: .*\(UUID:", head, re.M) and re.search(r"Link \d+:", head):
        return "nvidia-smi nvlink -s"
    if re.search(r"^[-+\\| ]*[-+\\]-\[[0-9a-f]{4}:[0-9a-f]{2}\]", head, re.M):
        return "lspci -tv"
    if re.search(r"^(?:[0-9a-f]{4}:)?[0-9a-f]{2}:[0-9a-f]{2}\.[0-7] \S", head, re.M):
        return "lspci"
    if re.search(r"^/sys/bus/pci/devices/", head, re.M):
        return "a sysfs listing"
    if re.search(r"=\s*Status Ok", head) or re.search(
        r"^\s*GPU\d+\s+X\s+(OK|NS|CNS|GNS|TNS|U)\b", head, re.M
    ):
        return "nvidia-smi topo -p2p"
    if re.search(r"CPU Affinity|^\s*GPU\d+\s+X\s+(NV\d+|PIX|PXB|PHB|NODE|SYS|SOC)\b", head, re.M):
        return "nvidia-smi topo -m"
    if "nccl-tests" in head or re.search(r"#\s+size\s+count", head):
        return "nccl-tests"
    return None


def wrong_kind(expected: str, lines: list[str], source: str) -> ParseError | None:
    """A ParseError saying the file is another kind of output, or None."""
    kind = guess_kind(lines)
    if kind is None or kind == expected:
        return None
    line = first_content_line(lines) + 1
    return ParseError(f"this looks like {kind} output, not {expected}", source, line)
