"""The bytes of a trace file that may be gzip-compressed, and may be cut off.

torch.profiler writes ``.json.gz`` when asked, and a profile copied off a machine that
ran out of disk or time is often cut: a gzip stream that ends early keeps everything
decompressed before the cut, and says so, rather than failing the whole file.
"""

from __future__ import annotations

import zlib

from gpulane.errors import ParseError


def decompress(raw: bytes, source: str) -> tuple[bytes, list[str], bool]:
    """Plain bytes of a file that may be gzip-compressed; (data, warnings, truncated).

    A gzip stream that ends early or is corrupt keeps everything decompressed before
    the damage.
    """
    if raw[:2] != b"\x1f\x8b":
        return raw, [], False
    out: list[bytes] = []
    warnings: list[str] = []
    truncated = False
    rest = raw
    consumed = 0
    while rest:
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        chunk = 1 << 16
        pos = 0
        try:
            while pos < len(rest) and not d.eof:
                out.append(d.decompress(rest[pos : pos + chunk]))
                pos += chunk
            out.append(d.flush())
        except zlib.error as err:
            warnings.append(
                f"gzip data is corrupt after about {consumed + pos} of {len(raw)} compressed "
                f"bytes ({err}); kept what decompressed before it"
            )
            truncated = True
            break
        if not d.eof:
            warnings.append(
                f"gzip stream ends early (file cut off at {len(raw)} compressed bytes); "
                f"kept what decompressed"
            )
            truncated = True
            break
        consumed += len(rest) - len(d.unused_data)
        rest = d.unused_data
        if rest and rest[:2] != b"\x1f\x8b":
            break  # trailing garbage after the last member
    if not out or not any(out):
        if truncated:
            return b"", warnings, True
        raise ParseError("gzip file holds no data", source)
    return b"".join(out), warnings, truncated
