"""Facts of a run stored once: what every row of an imported run shares (its run id,
source, versions, env, and the nested facts in ``extra``, such as an nccl-tests log's
header and rank list) goes to ``facts.jsonl`` beside ``rows.jsonl``, once each time it
changes, and each row line holds only what is its own and the number of its facts.
:func:`join` puts them together again when rows are read, so readers see whole rows.

A facts line is ``{"facts": N, "row": {...}}``: every field of the first row with these
facts, its ``extra`` holding only the shared (dict and list) values. A row line is
``{"@facts": N, ...}``: the fields whose value differs from that first row's (a None
included), and ``extra`` with the row's own (scalar) keys. Rows written without facts
(a sweep's ranks) have no ``@facts`` and are read as they are.

Only for a single writer of a run directory's facts whose rows' shared dicts are not
changed once a row holding them was written: an importer's rows, and the leading rank of
gpulane's own runs (``append``: a resumed run numbers on after the facts it wrote before;
an error row the session adds beside it is written whole, without ``@facts``).
"""

from __future__ import annotations

import json
import operator
import os
from collections.abc import Callable, Iterable, Sequence
from itertools import compress
from pathlib import Path
from typing import IO, Any

FACTS_JSONL = "facts.jsonl"
FACTS_KEY = "@facts"  # a row line's facts number (the parquet column too)
# Values of ``extra`` that are facts of the run rather than of a row: nested ones.
_SHARED = (dict, list)
# Bases a reader keeps at hand (they are met in the order written; a few for jumps back).
_KEPT = 8
# Facts a writer keeps to name again when rows come back to them (op by op, run by run).
_REUSED = 64


class SharedText:
    """JSON text of dicts whose nested dicts (one or two levels down) are often the very
    same objects from one row to the next, such as an importer's facts of a run in every
    row's ``extra``: such a dict is encoded once and its text spliced into each row.

    Only for writers that do not change a nested dict once a row holding it was encoded.
    The text is what ``encode`` gives for the whole dict."""

    def __init__(self, encode: Callable[[Any], str], keys: Iterable[str] | None = None) -> None:
        self._encode = encode
        self._keys = None if keys is None else tuple(keys)  # the top keys that hold dicts
        # (keys down to it) -> (the dict last seen there, its text once seen twice in a row)
        self._last: dict[tuple[str, ...], tuple[Any, str | None]] = {}

    def __call__(self, data: dict[str, Any]) -> str:
        marks: list[tuple[str, str]] = []
        text = self._encode(self._swap(data, (), marks))
        for mark, shared in marks:
            text = text.replace(mark, shared, 1)
        return text

    def _swap(
        self, data: dict[str, Any], path: tuple[str, ...], marks: list[tuple[str, str]]
    ) -> dict[str, Any]:
        """``data`` with each nested dict seen again in place replaced by a mark."""
        out = data
        keys = data if path or self._keys is None else self._keys
        for key in keys:
            value = data.get(key)
            if type(value) is not dict:
                continue
            where = (*path, key)
            last = self._last.get(where)
            if last is not None and last[0] is value:
                shared = last[1]
                if shared is None:
                    shared = self._encode(value)
                    self._last[where] = (value, shared)
                mark = f"\x00gpulane-shared-{len(marks)}\x00"
                marks.append((f'"\\u0000gpulane-shared-{len(marks)}\\u0000"', shared))
                new: Any = mark
            else:
                self._last[where] = (value, None)
                new = self._swap(value, where, marks) if not path else value
            if new is not value:
                if out is data:
                    out = dict(data)
                out[key] = new
        return out


class RunFacts:
    """Splits each row (its values in ``fields`` order) into the run's facts, written to
    ``facts.jsonl`` when they change, and the row's own values."""

    def __init__(
        self,
        run_dir: str | os.PathLike[str],
        fields: Sequence[str],
        run_fields: Sequence[str],
        encode: Callable[[Any], str],
        *,
        append: bool = False,
        shared_keys: Iterable[str] | None = None,
    ) -> None:
        self.path = Path(run_dir) / FACTS_JSONL
        self._append = append
        # The keys of ``extra`` that hold the run's facts; None: every dict and list (an
        # import's nested facts). A key not named stays on its row, whatever its type.
        self._shared_keys = None if shared_keys is None else frozenset(shared_keys)
        self._fields = tuple(fields)
        self._extra = self._fields.index("extra")
        self._run = [self._fields.index(name) for name in run_fields]
        self._run_values = operator.itemgetter(*self._run)
        self._indexes = range(len(self._fields))
        self._encode = encode
        self._fh: IO[str] | None = None
        self.count = 0  # facts written
        # The last row's run part: its objects are held, so their ids stay theirs.
        self._key: tuple[Any, ...] = ()
        self._text = ""
        self.number = -1
        self.base: list[Any] = []  # values of the first row with the current facts
        self._known: dict[str, tuple[int, list[Any]]] = {}  # facts text -> (number, base)

    def line(self, values: list[Any]) -> tuple[list[Any], dict[str, Any]]:
        """A row (its values in ``fields`` order) as its line in rows.jsonl: the number
        of its facts (``@facts``), the fields whose value differs from the first row with
        these facts (by value and type), and ``extra`` with its own (scalar) keys; with
        that first row (its values, ``extra`` holding the shared values only)."""
        extra = values[self._extra]
        shared: dict[str, Any] = {}
        own: dict[str, Any] = {}
        if extra:
            keys = self._shared_keys
            for k, v in extra.items():
                t = type(v)
                if (t is dict or t is list) and (keys is None or k in keys):
                    shared[k] = v
                else:
                    own[k] = v
        key = (*self._run_values(values), *shared.keys(), *shared.values())
        last = self._key
        # The same objects as the last row's (a run's rows share them): the same facts.
        if len(key) != len(last) or not all(map(operator.is_, key, last)):
            self._change(values, key, shared)
        base = self.base
        line: dict[str, Any] = {FACTS_KEY: self.number}
        fields, skip = self._fields, self._extra
        # Most values are the very objects of the first row (None, a run's strings): only
        # the others are compared.
        for i in compress(self._indexes, map(operator.is_not, values, base)):
            v = values[i]
            b = base[i]
            if i != skip and (v != b or type(v) is not type(b)):
                line[fields[i]] = v
        if own:
            line["extra"] = own
        return base, line

    def _change(self, values: list[Any], key: tuple[Any, ...], shared: dict[str, Any]) -> None:
        """The row's run part is not the last row's objects: its facts, maybe new ones."""
        self._key = key
        run_part = {self._fields[i]: values[i] for i in self._run}
        run_part["extra"] = shared
        text = self._encode(run_part)
        if text != self._text:
            self._text = text
            known = self._known.get(text)
            if known is not None:  # facts met before (a tokens run's decode, prefill)
                self.number, self.base = known
            else:
                self._new_base(values, shared)
                if len(self._known) < _REUSED:
                    self._known[text] = (self.number, self.base)

    def _new_base(self, values: list[Any], shared: dict[str, Any]) -> None:
        if self._fh is None:
            if self._append:
                # A resumed run: its earlier rows name the facts written before.
                self.count = _next_number(self.path)
                self._fh = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - kept open
            else:
                # A new import: facts left by an earlier, unfinished writer are not its own.
                self._fh = open(self.path, "w", encoding="utf-8")  # noqa: SIM115 - kept open
        self.number = self.count
        self.count += 1
        self.base = list(values)
        self.base[self._extra] = shared
        row = dict(zip(self._fields, self.base, strict=True))
        # Flushed at once: a row line must never reach the disk before its facts.
        self._fh.write(self._encode({"facts": self.number, "row": row}) + "\n")
        self._fh.flush()

    def close(self) -> None:
        if self._fh is not None and not self._fh.closed:
            try:
                self._fh.flush()
                os.fsync(self._fh.fileno())
            finally:
                self._fh.close()


def _next_number(path: Path) -> int:
    """One past the highest facts number in ``path`` (0 for none, or no file)."""
    highest = -1
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            for raw in fh:
                try:
                    highest = max(highest, int(json.loads(raw)["facts"]))
                except (ValueError, KeyError, TypeError):
                    continue
    except OSError:
        return 0
    return highest + 1


class FactsReader:
    """The facts of one run directory, read as row lines ask for them (in the order they
    were written, so only a few are held at a time)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fh: IO[str] | None = None
        self._kept: dict[int, dict[str, Any]] = {}

    def get(self, number: int) -> dict[str, Any] | None:
        found = self._kept.get(number)
        if found is not None:
            return found
        if self._kept and number < min(self._kept) and self._fh is not None:
            self._fh.close()  # asked for one read before: from the start again
            self._fh = None
        if self._fh is None:
            try:
                self._fh = open(self.path, encoding="utf-8", errors="replace")  # noqa: SIM115
            except OSError:
                return None
        for raw in self._fh:
            try:
                data = json.loads(raw)
                n, row = int(data["facts"]), data["row"]
            except (ValueError, KeyError, TypeError):
                continue
            if not isinstance(row, dict):
                continue
            self._kept[n] = row
            while len(self._kept) > _KEPT:
                del self._kept[next(iter(self._kept))]
            if n == number:
                return row
        return None

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def __enter__(self) -> FactsReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def join(line: dict[str, Any], base: dict[str, Any]) -> dict[str, Any]:
    """A whole row from a row line and its facts."""
    row = dict(base)
    own_extra = line.get("extra") or {}
    for key, value in line.items():
        if key != FACTS_KEY and key != "extra":
            row[key] = value
    row["extra"] = {**(base.get("extra") or {}), **own_extra}
    return row


def join_frame(frame: Any, path: Path) -> Any:
    """A rows frame read from Parquet, its ``extra`` joined with the facts its ``@facts``
    column names (facts.jsonl at ``path``); the column dropped."""
    import pandas as pd

    with FactsReader(path) as facts:
        joined = [
            _joined_extra(facts, number, extra)
            for number, extra in zip(frame[FACTS_KEY], frame["extra"], strict=True)
        ]
    frame["extra"] = pd.Series(joined, index=frame.index, dtype=object)
    return frame.drop(columns=[FACTS_KEY])


def _joined_extra(facts: FactsReader, number: Any, extra: Any) -> dict[str, Any]:
    own = extra if isinstance(extra, dict) else {}
    if number is None or number != number:  # a row written without facts (NaN)
        return own
    base = facts.get(int(number))
    return {**((base or {}).get("extra") or {}), **own}
