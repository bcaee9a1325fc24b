"""How far to trust a predicted figure: its basis (calibrated on token runs, one factor,
or the roofline only; collectives measured or projected) and the error the project's own
validation tables found for that basis (``expected_error:`` in conf/advise.yaml, read from
benchmarks/advise/README.md). A figure is printed with as many digits as that error
allows: four digits of a roofline-only figure that ran up to +107 % over the measured one
would claim a precision nobody has."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from gpulane.errors import InputError
from gpulane.planning.compute import Compute

BASES = ("calibrated", "calibrated_one_factor", "roofline")
BASIS_TEXT = {
    "calibrated": "calibrated",
    "calibrated_one_factor": "calibrated, one factor",
    "roofline": "roofline only",
}


# expected_error keys that start so are validations of a calibration on one model's
# token rows predicting another model (calibrated_on, predicts, device, gpus)
CROSS_MODEL = "cross_model"
NO_CROSS_VALIDATION = "cross-model: no validation, expect a wide error"


@dataclass(frozen=True)
class ExpectedError:
    """(predicted - measured) / measured over a validation table: its range, and how many
    of its figures were within 15 %. A cross-model entry also names the pair it
    validated: rows of ``calibrated_on`` on ``device`` predicting ``predicts`` split over
    ``gpus``."""

    low: float
    high: float
    within_15: int
    of: int
    calibrated_on: str | None = None
    predicts: str | None = None
    device: str | None = None
    gpus: int | None = None

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
    # calibrated on another model's token rows: on what, and the validation of that pair
    # (or NO_CROSS_VALIDATION); None when calibrated on the model's own rows
    cross_model: str | None = None

    @property
    def unvalidated(self) -> bool:
        """Calibrated on another model with no validation of that pair: no band to give."""
        return self.cross_model is not None and self.error is None

    def rounding(self) -> ExpectedError | None:
        """The error a figure's digits follow: an unvalidated cross-model one is wide."""
        return WIDE if self.unvalidated else self.error

    def _head(self) -> str:
        return BASIS_TEXT[self.compute] + (f" ({self.cross_model})" if self.cross_model else "")

    def text(self) -> str:
        parts = [self._head()]
        if self.collectives == "projected":
            parts.append("collectives projected, not validated")
        if self.error is not None:
            parts.append(f"{self.error.text('tok/s')} on tok/s, {self.error.text('ms')} on ms")
        return "; ".join(parts)

    def cell(self) -> str:
        """The table's column: "roofline only, colls projected; tok/s -52..-2 %, ms +2..+107 %"."""
        head = self._head() + (", colls projected" if self.collectives == "projected" else "")
        if self.error is None:
            return head
        low, high = self.error.rate_range()
        return (
            f"{head}; tok/s {100 * low:+.0f}..{_signed(high)}, "
            f"ms {100 * self.error.low:+.0f}..{_signed(self.error.high)}"
        )

    def short(self, unit: str = "tok/s") -> str:
        """e.g. "roofline only; expect -52 %..-2 %" for one figure of ``unit``."""
        parts = [self._head()]
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
            "cross_model": self.cross_model,
            "expected_error": None
            if err is None
            else {"low": err.low, "high": err.high, "within_15": err.within_15, "of": err.of},
            "text": self.text(),
        }


# the digits of a figure with no band (2: as for an error over 30 %)
WIDE = ExpectedError(-1.0, 1.0, 0, 0)


def expected_errors(conf: Mapping[str, Any] | None) -> dict[str, ExpectedError]:
    """The ``expected_error:`` block of conf/advise.yaml, checked: one entry per basis,
    and ``cross_model...`` entries with the pair each validated."""
    out = {}
    for key, value in dict(conf or {}).items():
        cross = str(key).startswith(CROSS_MODEL)
        if key not in BASES and not cross:
            raise InputError(
                f"expected_error.{key}: not a basis; expected one of {BASES} or {CROSS_MODEL}_*"
            )
        need = "low, high, within_15, of" + (
            ", calibrated_on, predicts, device, gpus" if cross else ""
        )
        try:
            band = ExpectedError(
                float(value["low"]), float(value["high"]), int(value["within_15"]),
                int(value["of"]),
            )  # fmt: skip
            if cross:
                band = replace(
                    band, calibrated_on=str(value["calibrated_on"]),
                    predicts=str(value["predicts"]), device=str(value["device"]),
                    gpus=int(value["gpus"]),
                )  # fmt: skip
            out[key] = band
        except (KeyError, TypeError, ValueError):
            raise InputError(f"expected_error.{key}: expected {{{need}}}, got {value!r}") from None
    return out


def compute_basis(compute: Compute) -> str:
    """calibrated (a factor and a fixed time, fitted over TP degrees), calibrated with one
    factor (one TP degree), or the roofline alone."""
    if not compute.source.startswith("roofline calibrated"):
        return "roofline"
    if compute.decode_unit_ms or compute.prefill_unit_ms or compute.prefill_kernel_ms:
        return "calibrated"
    return "calibrated_one_factor"


def basis_of(
    compute: Compute,
    collectives: str,
    errors: Mapping[str, ExpectedError],
    model: str | None = None,
    gpus: int | None = None,
) -> Basis:
    """The basis of a prediction of ``model`` on ``gpus``. Calibrated on another model's
    rows, the band is that of a validation of the same pair (calibration model and
    device, model predicted, GPUs, the two-term fit) where the project has one; else
    none, said in words: the same-model tables say nothing of how a fit carries to
    another model."""
    kind = compute_basis(compute)
    others = sorted({m for m, _ in compute.calibrated_on if m != model})
    if kind == "roofline" or model is None or not others:
        return Basis(kind, collectives, errors.get(kind))
    devices = sorted({d for _, d in compute.calibrated_on})
    on = f"on {', '.join(others)}, {', '.join(devices)}"
    found = next(
        (
            e
            for e in errors.values()
            if kind == "calibrated"
            and e.predicts == model
            and [e.calibrated_on] == others
            and [e.device] == devices
            and e.gpus == gpus
        ),
        None,
    )
    if found is None:
        return Basis(kind, collectives, None, f"{on}; {NO_CROSS_VALIDATION}")
    validated = f"cross-model, validated {others[0]} -> {model} on {gpus} GPUs"
    return Basis(kind, collectives, found, f"{on}; {validated}")


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
