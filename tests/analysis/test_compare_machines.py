"""`compare` never pools machines: a build label whose rows of one kind come from several
machines (GPU model, host, backend) is refused in one line naming them, and ratios and
geomeans use only sizes both sides measured above zero. Rows of 1, 2, 3, 4 and 8 ranks,
gloo rows beside an H200's nccl-tests rows."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from gpulane.analysis.compare import compare, print_terminal, summary_display
from gpulane.analysis.compare.machines import mixed_machines, row_machine, series_labels
from gpulane.analysis.store import frame_from_rows
from gpulane.errors import InputError
from gpulane.record import Row, row_of
from tests.analysis.fixture_rows import nccl_rows, write_run
from tests.commands.test_errors import one_error
from tests.conftest import fixture_path
from tests.helpers import gpulane

SIZES = [8, 64, 1 << 10, 1 << 16, 1 << 20]
WORLDS = [1, 2, 3, 4, 8]


def gloo_rows(build: str, run_id: str, host: str = "vm", gbps: float = 0.5) -> list[Row]:
    """all_reduce rows shaped as a CPU gloo sweep writes them, for 1, 2, 3, 4, 8 ranks."""
    rows = []
    for world in WORLDS:
        for size in SIZES:
            time_us = 20.0 + size / (gbps * 1e3)
            alg = size / time_us / 1e3
            rows.append(
                Row(
                    run_id=f"{run_id}-{world}", kind="collective", backend="torch-gloo",
                    op="all_reduce", build=build, host=host, world_size=world, dtype="float",
                    redop="sum", root=-1, in_place=False, graph=False, size_bytes=size,
                    count=size // 4, time_us=time_us, algbw_gbps=alg,
                    busbw_gbps=alg * (2 * (world - 1) / world), path="CPU",
                )
            )  # fmt: skip
    return rows


def h200_rows(build: str, run_id: str = "r-h200") -> list[Row]:
    rows = nccl_rows("h200x2/nccl-tests-all_reduce.txt", build=build, run_id=run_id, host="h200-a")
    for r in rows:
        r.versions = {"gpu": "NVIDIA H200", "nccl": "2.27.3"}
        r.graph = False
    return rows


def test_a_row_names_its_machine() -> None:
    assert row_machine(row_of({"backend": "torch-gloo", "host": "vm", "versions": {}})) == {
        "gpu": "cpu", "host": "vm", "backend": "torch-gloo"
    }  # fmt: skip
    assert row_machine(row_of({"backend": "nccl-tests", "versions": {"gpu": "NVIDIA H200"}})) == {
        "gpu": "NVIDIA H200", "host": "host not named", "backend": "nccl-tests"
    }  # fmt: skip
    assert (
        row_machine(row_of({"backend": "mpi", "versions": {"mpi_buffers": "host"}}))["gpu"] == "cpu"
    )


def test_one_machine_of_every_world_size_is_one_side() -> None:
    frame = frame_from_rows(gloo_rows("cpu-a", "g"))
    assert mixed_machines("cpu-a", frame) is None
    cmp = compare([("cpu-a", frame), ("cpu-b", frame_from_rows(gloo_rows("cpu-b", "h", gbps=1.0)))])
    t = cmp.table[cmp.table["metric"] == "busbw_gbps"]
    # world sizes are never pooled: one figure per (world size, size), told apart by name;
    # 1 rank moves nothing (busbw 0): its rows are left out, and a note says so
    many = [w for w in WORLDS if w > 1]
    assert len(t) == len(many) * len(SIZES)
    worlds = t["figure"].str.extract(r"\(world_size (\d+)\)")[0].astype(int)
    assert sorted(set(worlds)) == many
    assert any(n.startswith("collectives need 2+ ranks") for n in cmp.notes)
    others = t["ratio:cpu-b"]
    assert others.notna().all() and (others > 1).all()
    (entry,) = cmp.summary[cmp.summary["metric"] == "busbw_gbps"].to_dict("records")
    assert entry["used:cpu-b"] == (len(WORLDS) - 1) * len(SIZES)


def test_h200_and_gloo_under_one_label_are_refused() -> None:
    mixed = frame_from_rows(h200_rows("nvlink") + gloo_rows("nvlink", "g"))
    other = frame_from_rows(gloo_rows("pcie-host", "p"))
    with pytest.raises(InputError) as err:
        compare([("nvlink", mixed), ("pcie-host", other)])
    text = str(err.value)
    assert text.startswith("nvlink holds collective rows of 2 machines (")
    assert "gpu: NVIDIA H200, cpu" in text and "host: h200-a, vm" in text
    assert "backend: nccl-tests, torch-gloo" in text
    assert "[NVIDIA H200, h200-a, nccl-tests] in run r-h200" in text
    assert "[cpu, vm, torch-gloo] in run g-1, g-2, g-3 (+2)" in text
    assert "\n" not in text


@pytest.mark.parametrize(
    ("rows_b", "differ"),
    [
        (lambda: gloo_rows("x", "b", host="vm2"), "host: vm, vm2"),
        (
            lambda: [
                Row(**{**r.to_dict(), "backend": "mpi", "versions": {"mpi_buffers": "host"}})
                for r in gloo_rows("x", "b")
            ],
            "backend: torch-gloo, mpi",
        ),
    ],
    ids=["two-hosts", "two-backends"],
)
def test_any_one_part_that_differs_is_named(rows_b: object, differ: str) -> None:
    frame = frame_from_rows(gloo_rows("x", "a") + rows_b())  # type: ignore[operator]
    text = mixed_machines("x", frame)
    assert text is not None and f"({differ}" in text


def test_copies_and_collectives_of_one_machine_by_different_tools_are_one_side() -> None:
    copies = [
        Row(run_id="c", kind="copy", backend="torch-cuda", op="h2d", build="nvlink",
            host="h200-a", memory="pinned", size_bytes=1 << 30, algbw_gbps=55.0, src="host",
            dst=f"GPU{g}")
        for g in range(4)
    ]  # fmt: skip
    frame = frame_from_rows(h200_rows("nvlink") + copies)
    assert mixed_machines("nvlink", frame) is None


def test_zero_busbw_sizes_are_left_out_of_the_geomean_and_named() -> None:
    h200 = frame_from_rows(h200_rows("nvlink"))
    assert (h200[h200["size_bytes"] <= 64]["busbw_gbps"] == 0).any()  # nccl-tests' 0.00
    ref = frame_from_rows(h200_rows("other", "r2"))
    ref.loc[:, "busbw_gbps"] = ref["busbw_gbps"] * 2
    cmp = compare([("nvlink", h200), ("other", ref)], metrics=("busbw_gbps",))
    (entry,) = cmp.summary.to_dict("records")
    assert entry["geomean:other"] == pytest.approx(2.0)
    assert math.isfinite(entry["geomean:other"])
    zero_sizes = sorted(set(h200[h200["busbw_gbps"] == 0]["size_bytes"]))
    assert entry["used:other"] == entry["figures"] - 2 * len(zero_sizes)
    assert entry["left_out:other"].startswith("8 B")
    over = summary_display(cmp).iloc[0]["other/nvlink over"]
    assert over.startswith(f"{entry['used:other']} of {entry['figures']} (left out, a side at 0: ")
    t = cmp.table
    assert t[t["size_bytes"].isin(zero_sizes)]["ratio:other"].isna().all()


def test_a_zero_on_the_reference_side_is_no_inf() -> None:
    a = frame_from_rows(gloo_rows("a", "a"))
    b = frame_from_rows(gloo_rows("b", "b"))
    a.loc[a["size_bytes"] == 8, "busbw_gbps"] = 0.0
    cmp = compare([("a", a), ("b", b)], metrics=("busbw_gbps",))
    for g in cmp.summary["geomean:b"]:
        assert g is None or math.isfinite(g)


def test_report_draws_one_series_per_machine() -> None:
    frame = frame_from_rows(h200_rows("nvlink") + gloo_rows("nvlink", "g") + gloo_rows("pcie", "p"))
    labels = series_labels(frame)
    # backends are a report's panels of their own: the series split by GPU model and host
    assert set(labels) == {"nvlink [NVIDIA H200, h200-a]", "nvlink [cpu, vm]", "pcie"}


def test_compare_command_refuses_mixed_machines_in_one_line(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    log = fixture_path("h200x2/nccl-tests-all_reduce.txt")
    out = gpulane("parse", "nccl-tests", str(log), "--build", "nvlink", "--out",
                  str(runs / "h200"), cwd=tmp_path)  # fmt: skip
    assert out.returncode == 0, out.stderr
    write_run(runs, gloo_rows("nvlink", "cpu"))
    write_run(runs, gloo_rows("socket", "sock"))
    bad = gpulane("compare", "nvlink", "socket", "--results-dir", str(runs), cwd=tmp_path)
    line = one_error(bad)
    assert line.startswith("gpulane: error: nvlink holds collective rows of 2 machines (gpu: ")
    assert "NVIDIA H200" in line and "cpu" in line and "--where" in line
    # one machine picked: compared, with a finite geomean
    ok = gpulane("compare", "nvlink", "socket", "--results-dir", str(runs), "--where",
                 "backend == 'torch-gloo'", "--format", "json", cwd=tmp_path)  # fmt: skip
    assert ok.returncode == 0, ok.stderr
    data = json.loads(ok.stdout)
    assert data["sides"] == ["nvlink", "socket"] and "inf" not in ok.stdout


def test_terminal_summary_says_what_the_geomean_is_over() -> None:
    import io

    h200 = frame_from_rows(h200_rows("nvlink"))
    cmp = compare([("nvlink", h200), ("b", frame_from_rows(h200_rows("b", "r3")))],
                  metrics=("busbw_gbps",))  # fmt: skip
    buf = io.StringIO()
    print_terminal(cmp, file=buf)
    assert "left out, a side at 0: 8 B" in buf.getvalue()
    assert "inf" not in buf.getvalue()


def test_report_page_keeps_the_machines_apart() -> None:
    from gpulane.analysis.report.page import render_report

    # same backend, same world size: only the GPU model and host tell the rows apart
    h100 = h200_rows("nvlink", "r-h100")
    for r in h100:
        r.versions = {"gpu": "NVIDIA H100 80GB HBM3"}
        r.host = "h100-b"
    frame = frame_from_rows(h200_rows("nvlink") + h100)
    html = render_report(frame)
    assert "nvlink [NVIDIA H100 80GB HBM3, h100-b]" in html
    assert "nvlink [NVIDIA H200, h200-a]" in html


def test_a_part_a_row_does_not_name_is_no_difference() -> None:
    named = h200_rows("nvlink")
    unnamed = h200_rows("nvlink", "r-old")
    for r in unnamed:
        r.host = None
        r.versions = {}
    frame = frame_from_rows(named + unnamed)
    assert mixed_machines("nvlink", frame) is None
    # but two named GPU models are two machines, whatever else the rows leave out
    other = h200_rows("nvlink", "r-h100")
    for r in other:
        r.host, r.versions = None, {"gpu": "NVIDIA H100"}
    text = mixed_machines("nvlink", frame_from_rows(named + other))
    assert text is not None and "(gpu: NVIDIA H200, NVIDIA H100)" in text


def test_two_tools_on_one_machine_only_where_they_measured_the_same_figure() -> None:
    nccl_tests = h200_rows("nvlink")
    torch_bf16 = []
    for r in h200_rows("nvlink", "r-torch"):
        if r.in_place:  # torch.distributed's all_reduce is in-place only
            torch_bf16.append(Row(**{**r.to_dict(), "backend": "torch-nccl", "dtype": "bfloat16"}))
    assert mixed_machines("nvlink", frame_from_rows(nccl_tests + torch_bf16)) is None
    torch_float = [Row(**{**r.to_dict(), "dtype": "float"}) for r in torch_bf16]
    text = mixed_machines("nvlink", frame_from_rows(nccl_tests + torch_float))
    assert text is not None
    assert text.startswith(
        "nvlink holds collective rows of 2 tools (backend: nccl-tests, torch-nccl, both measured all_reduce float 8 B in-place)"
    )
