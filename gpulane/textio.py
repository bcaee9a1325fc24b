"""Reading captured text: encodings, line endings, ANSI codes, binary files.

Every importer reads files through :func:`iter_text_lines` (or :func:`read_text`, which
joins its lines), so UTF-16 with or without a byte-order mark, UTF-8 with or without one,
CRLF and CR line endings decode the same way everywhere.

Every parser goes through :func:`clean_lines`, so a file captured on Windows (CRLF), one
with the ANSI underline codes nvidia-smi puts in its header, or one pasted with tabs
turned into spaces reads as the original would.
"""

from __future__ import annotations

import codecs
import os
import re
from collections.abc import Iterator

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


def sniff_encoding(head: bytes) -> str:
    """The codec of captured text from its first bytes: UTF-16 with or without a byte-order
    mark (PowerShell's `>` writes it with one; some Windows tools without), else UTF-8.

    Without a mark, UTF-16 of ASCII text has a NUL in every other byte; which half holds
    them says the byte order. UTF-8 text of a tool's output has no NUL at all.
    """
    if head[:2] == b"\xff\xfe":
        return "utf-16"  # the codec reads the mark and drops it
    if head[:2] == b"\xfe\xff":
        return "utf-16"
    sample = head[:4096]
    if len(sample) >= 4:
        even, odd = sample[0::2], sample[1::2]
        if odd.count(0) >= 0.8 * len(odd) and even.count(0) <= 0.05 * len(even):
            return "utf-16-le"
        if even.count(0) >= 0.8 * len(even) and odd.count(0) <= 0.05 * len(odd):
            return "utf-16-be"
    return "utf-8-sig"


CHUNK = 1 << 20


def iter_text_lines(path: str | os.PathLike[str]) -> Iterator[tuple[int, str]]:
    """(line number, line) of a captured file, read a chunk at a time: memory does not grow
    with the file. Lines come without their line ending; CRLF and CR count as one.

    Raises :class:`ParseError` naming the line for binary data, damaged UTF-16 and text
    that is not UTF-8, and for an empty file.
    """
    for number, line, _ in iter_text_lines_ended(path):
        yield number, line


def iter_text_lines_ended(path: str | os.PathLike[str]) -> Iterator[tuple[int, str, bool]]:
    """As :func:`iter_text_lines`, with a third item: whether the line ended with a line
    break. Only the last line of a file can lack one; a number on it may have been cut
    (``4366.8`` cut to ``436``), so importers trust it only where the format says so.
    """
    name = os.fspath(path)
    try:
        fh = open(path, "rb")  # noqa: SIM115 - closed in finally
    except OSError as err:
        raise ParseError(f"cannot read: {err.strerror or err}", name) from None
    try:
        head = fh.read(CHUNK)
        encoding = sniff_encoding(head)
        decoder = codecs.getincrementaldecoder(encoding)(errors="strict")
        number = 0
        pending = ""
        seen_text = False
        newlines_before = 0  # line ends decoded before the current chunk
        newline = "\n".encode(encoding.replace("-sig", ""))
        data = head
        while True:
            final = not data
            try:
                text = decoder.decode(data, final=final)
            except UnicodeDecodeError as err:
                bad = data[err.start] if err.start < len(data) else 0
                what = (
                    "damaged UTF-16 text"
                    if encoding.startswith("utf-16")
                    else (f"not UTF-8 text (byte 0x{bad:02x}): a binary or damaged file")
                )
                where = newlines_before + data[: err.start].count(newline) + 1
                raise ParseError(what, name, where) from None
            if "\x00" in text:
                where = (
                    number + (pending + text).count("\n", 0, len(pending) + text.index("\x00")) + 1
                )
                raise ParseError("binary data (NUL bytes), not captured text output", name, where)
            newlines_before += text.count("\n")
            pending += text
            # A CR at the end of a chunk may be the first half of a CRLF: keep it back.
            cut = len(pending) if final else len(pending.rstrip("\r"))
            body, rest = pending[:cut], pending[cut:]
            parts = body.replace("\r\n", "\n").replace("\r", "\n").split("\n")
            pending = parts.pop() + rest
            for line in parts:
                number += 1
                seen_text = seen_text or bool(line.strip())
                yield number, line, True
            if final:
                break
            data = fh.read(CHUNK)
        if pending or number == 0:
            number += 1
            seen_text = seen_text or bool(pending.strip())
            if not seen_text:
                raise ParseError("the file is empty", name, 1)
            yield number, pending, False
        elif not seen_text:
            raise ParseError("the file is empty", name, 1)
    except OSError as err:
        raise ParseError(f"cannot read: {err.strerror or err}", name) from None
    finally:
        fh.close()


def split_text_lines(text: str) -> Iterator[tuple[int, str, bool]]:
    """(line number, line, ended) of text already in memory, as
    :func:`iter_text_lines_ended` gives them for a file (a leading byte-order mark
    dropped; CRLF and CR count as one line break)."""
    text = text.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n")
    lines = text.split("\n")
    last = lines.pop()
    for number, line in enumerate(lines, start=1):
        yield number, line, True
    if last:
        yield len(lines) + 1, last, False


def read_text(path: str | os.PathLike[str]) -> str:
    """The whole text of a captured file, decoded as :func:`iter_text_lines` decodes it;
    a clear :class:`ParseError` for a binary, damaged or empty one."""
    return "\n".join(line for _, line in iter_text_lines(path))


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
