"""How far to trust a predicted figure: its basis (calibrated on token runs, one factor,
or the roofline only; collectives measured or projected) and the error the project's own
validation tables found for that basis (``expected_error:`` in conf/advise.yaml, read from
benchmarks/advise/README.md). A figure is printed with as many digits as that error
allows: four digits of a roofline-only figure that ran up to +107 % over the measured one
would claim a precision nobody has."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gpulane.errors import InputError
from gpulane.planning.compute import Compute

BASES = ("calibrated", "calibrated_one_factor", "roofline")
BASIS_TEXT = {
    "calibrated": "calibrated",
    "calibrated_one_factor": "calibrated, one factor",
    "roofline": "roofline only",
}


@dataclass(frozen=True)
class ExpectedError:
    """(predicted - measured) / measured over a validation table: its range, and how many
    of its figures were within 15 %."""

    low: float
    high: float
    within_15: int
    of: int

    def rate_range(self) -> tuple[float, float]:
        """Where a measured rate (tok/s) fell against the predicted one: measured /
        predicted - 1 = 1 / (1 + error) - 1 (a prediction +107 % too fast: -52 %)."""
        return 1 / (1 + self.high) - 1, 1 / (1 + self.low) - 1

    def text(self, unit: str = "tok/s") -> str:
        """The range to expect the measured figure in, relative to the printed one: for a
        rate (tok/s) the inverse of the error, for a time (ms) the error itself."""
        low, high = self.rate_range() if unit == "tok/s" else (self.low, self.high)
        return f"expect {_signed(low)}..{_signed(high)}"


def _signed(x: float) -> str:
    return f"{100 * x:+.0f} %"


@dataclass(frozen=True)
class Basis:
    """What one prediction rests on, and the error its validation table found."""

    compute: str  # a key of BASES
    collectives: str  # measured, projected, or none (one GPU)
    error: ExpectedError | None

    def text(self) -> str:
        parts = [BASIS_TEXT[self.compute]]
        if self.collectives == "projected":
            parts.append("collectives projected, not validated")
        if self.error is not None:
            parts.append(f"{self.error.text('tok/s')} on tok/s, {self.error.text('ms')} on ms")
        return "; ".join(parts)

    def cell(self) -> str:
        """The table's column: "roofline only, colls projected; tok/s -52..-2 %, ms +2..+107 %"."""
        head = BASIS_TEXT[self.compute] + (
            ", colls projected" if self.collectives == "projected" else ""
        )
        if self.error is None:
            return head
        low, high = self.error.rate_range()
        return (
            f"{head}; tok/s {100 * low:+.0f}..{_signed(high)}, "
            f"ms {100 * self.error.low:+.0f}..{_signed(self.error.high)}"
        )

    def short(self, unit: str = "tok/s") -> str:
        """e.g. "roofline only; expect -52 %..-2 %" for one figure of ``unit``."""
        parts = [BASIS_TEXT[self.compute]]
        if self.collectives == "projected":
            parts.append("collectives projected")
        if self.error is not None:
            parts.append(f"{self.error.text(unit)} on {unit}")
        return "; ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        err = self.error
        return {
            "compute": self.compute,
            "collectives": self.collectives,
            "expected_error": None
            if err is None
            else {"low": err.low, "high": err.high, "within_15": err.within_15, "of": err.of},
            "text": self.text(),
        }


def expected_errors(conf: Mapping[str, Any] | None) -> dict[str, ExpectedError]:
    """The ``expected_error:`` block of conf/advise.yaml, checked."""
    out = {}
    for key, value in dict(conf or {}).items():
        if key not in BASES:
            raise InputError(f"expected_error.{key}: not a basis; expected one of {BASES}")
        try:
            out[key] = ExpectedError(
                float(value["low"]), float(value["high"]), int(value["within_15"]),
                int(value["of"]),
            )  # fmt: skip
        except (KeyError, TypeError, ValueError):
            raise InputError(
                f"expected_error.{key}: expected {{low, high, within_15, of}}, got {value!r}"
            ) from None
    return out


def compute_basis(compute: Compute) -> str:
    """calibrated (a factor and a fixed time, fitted over TP degrees), calibrated with one
    factor (one TP degree), or the roofline alone."""
    if not compute.source.startswith("roofline calibrated"):
        return "roofline"
    if compute.decode_unit_ms or compute.prefill_unit_ms or compute.prefill_kernel_ms:
        return "calibrated"
    return "calibrated_one_factor"


def basis_of(compute: Compute, collectives: str, errors: Mapping[str, ExpectedError]) -> Basis:
    kind = compute_basis(compute)
    return Basis(kind, collectives, errors.get(kind))


def too_close_to_call(margin: float, error: ExpectedError) -> bool:
    """A ratio of two predictions within what two figures of this basis can differ by:
    one low by ``error.low`` and the other high by ``error.high``."""
    return margin <= (1 + error.high) / (1 + error.low)


def digits_for(error: ExpectedError | None) -> int:
    """Significant digits a figure of this error deserves: 2 when the error spans more
    than 30 %, 3 when more than 3 %, else 4."""
    if error is None:
        return 4
    span = max(abs(error.low), abs(error.high))
    return 2 if span > 0.30 else 3 if span > 0.03 else 4


def rounded(value: float, error: ExpectedError | None) -> str:
    """``value`` to the digits its error allows, with "~" where digits were dropped:
    2522.5 at the roofline's +2..+107 % -> "~2500"."""
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    digits = digits_for(error)
    magnitude = math.floor(math.log10(abs(value)))
    places = digits - 1 - magnitude
    if places >= 0:
        return f"{value:.{min(places, 6)}f}"
    step = 10 ** (-places)
    return f"~{round(value / step) * step:.0f}"
