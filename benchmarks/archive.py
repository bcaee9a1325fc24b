"""Run folders packed into one zip each, read as if they were still folders.

A folder ``D`` of many small files that figures or scripts read is kept as ``D.zip`` beside
where ``D`` was (members named relative to ``D``: ``runA/rows.jsonl``), so that a topic
keeps one file per run group instead of one per file (issue 45: benchmarks/ as a curated
record). Readers keep naming the old paths: ``real(D / "runA/rows.jsonl")`` is that member,
unpacked once per process into a temporary folder, and ``glob(base, "D/*/rows.jsonl")``
matches inside the archive when nothing on disk does. The paths handed back keep the old
names (``virtual``), so that a figure's ``_file`` and a script's output do not change.

    python -m benchmarks.archive pack benchmarks/inference/h200-round10   # D -> D.zip
    python -m benchmarks.archive pack benchmarks/collectives/h200x2-issue20 runs  # runs/ stays
    python -m benchmarks.archive unpack benchmarks/inference/h200-round10.zip

Packing is deterministic (sorted members, fixed times), so repacking the same files gives
the same bytes and git sees no change.
"""

from __future__ import annotations

import atexit
import glob as _glob
import os
import shutil
import sys
import tempfile
import zipfile
from pathlib import Path

SUFFIX = ".zip"
_FIXED_TIME = (2026, 1, 1, 0, 0, 0)  # every member's time: the bytes depend on content only
_unpacked: dict[Path, Path] = {}  # archive -> the folder it was unpacked into (this process)


def locate(path: Path) -> tuple[Path, Path] | None:
    """``(archive, folder)`` where ``path`` lies under a folder packed as ``folder.zip``."""
    path = Path(path).absolute()
    for folder in (path, *path.parents):
        if not folder.name:
            break
        candidate = folder.with_name(folder.name + SUFFIX)
        if candidate.is_file():
            return candidate, folder
    return None


def unpacked(archive: Path) -> Path:
    """The folder ``archive`` was unpacked into (once per process; removed at exit)."""
    archive = archive.absolute()
    if archive not in _unpacked:
        where = Path(tempfile.mkdtemp(prefix=f"bench-{archive.stem}-"))
        atexit.register(_remove_if_mine, where, os.getpid())
        with zipfile.ZipFile(archive) as zf:
            zf.extractall(where)
        _unpacked[archive] = where
    return _unpacked[archive]


def _remove_if_mine(where: Path, owner: int) -> None:
    """At exit, the folder this process unpacked; not in a child forked from it (a test
    worker's CLI fork server, a multiprocessing child), whose exit ran the handlers it
    inherited and removed its parent's folders while the parent still read them."""
    if os.getpid() == owner:
        shutil.rmtree(where, ignore_errors=True)


def cleanup(keep: set[Path] | frozenset[Path] = frozenset()) -> None:
    """Remove the folders unpacked here but for the archives in ``keep`` (a fork that ends
    with ``os._exit`` runs no atexit: ``forked_run`` calls this instead)."""
    for archive in [a for a in _unpacked if a not in keep]:
        shutil.rmtree(_unpacked.pop(archive), ignore_errors=True)


def unpacked_now() -> set[Path]:
    """The archives unpacked in this process so far."""
    return set(_unpacked)


def real(path: Path) -> Path:
    """A path that can be opened: ``path`` itself where it exists, else its unpacked member
    (a folder too), else ``path`` unchanged (so that the caller's own error names it)."""
    path = Path(path)
    found = locate(path)
    if path.exists():
        if found is not None and path.is_dir() and found[1] == path.absolute():
            return _merged(found[0], path)  # a folder packed but for a few files kept out
        return path
    if found is None:
        return path
    archive, folder = found
    return unpacked(archive) / path.absolute().relative_to(folder)


def _merged(archive: Path, folder: Path) -> Path:
    """The unpacked ``archive`` with what ``folder`` still holds on disk linked in (a
    README, or runs that tests and the command line read where they are)."""
    where = unpacked(archive)
    for child in folder.iterdir():
        if not (where / child.name).exists():
            (where / child.name).symlink_to(child.absolute())
    return where


def virtual(path: Path) -> Path:
    """The name under the packed folder of a path ``real`` handed out (else ``path``)."""
    path = Path(path)
    for archive, where in _unpacked.items():
        if path.is_relative_to(where):
            return archive.with_suffix("") / path.relative_to(where)
    return path


def glob(base: Path, pattern: str) -> list[Path]:
    """``glob.glob(base / pattern)`` (recursive), or where nothing on disk matches, the
    members of the archive of the pattern's literal leading folders that match, by their
    old names."""
    found = sorted(Path(p) for p in _glob.glob(str(base / pattern), recursive=True))
    if found:
        return found
    parts = Path(pattern).parts
    for i in range(len(parts) - 1, -1, -1):  # down to base itself: a README beside its zip
        head = Path(base, *parts[:i])
        if _glob.has_magic(str(head)):
            continue
        found_at = locate(head)
        if found_at is None:
            continue
        # the unpacked copy, even where the folder is still there (it keeps a README)
        archive, folder = found_at
        inner = unpacked(archive) / head.absolute().relative_to(folder)
        hits = _glob.glob(str(inner / Path(*parts[i:])), recursive=True)
        return sorted(virtual(Path(h)) for h in hits)
    return []


def archive_of(path: Path) -> Path:
    """The file git tracks for ``path``: its archive where it is packed, else itself."""
    path = Path(path)
    if path.exists():
        return path
    found = locate(path)
    return found[0] if found else path


def pack(folder: Path, keep: tuple[str, ...] = ()) -> Path:
    """Write ``folder.zip`` from every file under ``folder`` but the entries named in
    ``keep`` (files or folders directly under it, which stay out, on disk, for the readers
    that need them there); the folder itself is left as is."""
    folder = Path(folder)
    out = folder.with_name(folder.name + SUFFIX)
    files = sorted(
        p for p in folder.rglob("*") if p.is_file() and p.relative_to(folder).parts[0] not in keep
    )
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
        for p in files:
            info = zipfile.ZipInfo(p.relative_to(folder).as_posix(), _FIXED_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            zf.writestr(info, p.read_bytes(), compresslevel=9)
    return out


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if (
        len(args) < 2
        or args[0] not in ("pack", "unpack")
        or (args[0] == "unpack" and len(args) > 2)
    ):
        print(
            "usage: python -m benchmarks.archive pack FOLDER [KEEP ...] | unpack FOLDER.zip",
            file=sys.stderr,
        )
        return 2
    target = Path(args[1])
    if args[0] == "pack":
        if not target.is_dir():
            print(f"benchmarks.archive: error: {target}: not a folder", file=sys.stderr)
            return 2
        print(pack(target, tuple(args[2:])))
        return 0
    if not target.is_file() or target.suffix != SUFFIX:
        print(f"benchmarks.archive: error: {target}: not a .zip file", file=sys.stderr)
        return 2
    with zipfile.ZipFile(target) as zf:
        zf.extractall(target.with_suffix(""))
    print(target.with_suffix(""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
