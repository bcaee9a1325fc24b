"""README.md walked top to bottom as a new user on a machine without GPUs would (issue 44,
"Done when"): every command below is quoted from the README, found there before it runs,
and run in order in a fresh directory, each on what the earlier steps made. Each step's
exit status is the one the README predicts for a CPU machine. A command the README drops
or renames fails the test until this list follows it; a command that starts failing fails
it too.

Left out, and why: `pip install` (the environment has gpulane installed), `bash
scripts/test.sh` (the whole suite, as root), Slurm and GPU-only commands, SGLang/vLLM, and
commands on files the README does not say how to make (`topo --topo-file`, `trace`,
`parse FILE`); `gpulane accept save_baseline=golden` without `device=cpu` (INCOMPLETE, 3,
after a full measurement: 74 s) and the llama3-8b token run (refused or not by the host's
free memory) are walked by hand, not here. A baseline comparison and `history` on a
loaded 2-core VM may find the noise a drop: the README predicts PASS or FAIL (0 or 1)
there, never bad input or INCOMPLETE.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.helpers import gpulane

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"


@dataclass(frozen=True)
class Step:
    quote: str  # the README's own text, found in it (whitespace joined) before it runs
    argv: str  # what runs, after `gpulane`: the quote's command, <dir> filled in
    exits: tuple[int, ...]  # what the README predicts on a CPU machine
    cwd: str = "tmp"  # "repo" for the commands on the checkout's benchmarks/ data


STEPS = [
    # the first command, less its pip install: the default job on 2 CPU processes
    Step("pip install torch==2.13.0 -e . && gpulane", "", (0,)),
    Step("`gpulane sweep --help` lists every key", "sweep --help", (0,)),
    Step("(`nranks=4`: did you mean `ranks`;", "sweep nranks=4", (2,)),
    Step(
        "`collectives=all_reduce all_gather`: join with a comma)",
        "sweep collectives=all_reduce all_gather",
        (2,),
    ),
    # presets are NCCL's: refused on gloo before anything runs
    Step(
        "gpulane sweep -m preset=nvlink,pcie-host,socket`",
        "sweep -m preset=nvlink,pcie-host,socket",
        (2,),
    ),
    Step(
        "`gpulane sweep -m build=nvlink,pcie-host,socket sizes.max=1M`",
        "sweep -m build=nvlink,pcie-host,socket sizes.max=1M",
        (0,),
    ),
    Step("gpulane topo                      #", "topo", (0,)),
    Step("gpulane topo --json               #", "topo --json", (0,)),
    Step("gpulane doctor                        #", "doctor", (0,)),
    Step("gpulane doctor --run runs/ --json     #", "doctor --run runs/ --json", (0,)),
    Step("On a machine without a GPU `gpulane copy` says so in one line (exit 2)", "copy", (2,)),
    Step(
        "gpulane tokens model=tiny tp=2 batch=1,8 output_len=32",
        "tokens model=tiny tp=2 batch=1,8 output_len=32",
        (0,),
    ),
    Step("gpulane join runs/ ", "join runs/", (0,)),
    # on CPU ranks the rows name no GPU: the README says to give gpu=H200
    Step(
        "gpulane advise model=llama3-70b gpus=2 batch=1,32 input_len=2048 output_len=256 run=runs/ build=nvlink",
        "advise model=llama3-70b gpus=2 batch=1,32 input_len=2048 output_len=256 run=runs/ "
        "build=nvlink gpu=H200",
        (0,),
    ),
    Step(
        "gpulane results runs/ --op all_reduce --build nvlink --format markdown",
        "results runs/ --op all_reduce --build nvlink --format markdown",
        (0,),
    ),
    Step(
        "gpulane compare nvlink pcie-host socket --html builds.html",
        "compare nvlink pcie-host socket --html builds.html",
        (0,),
    ),
    Step(
        "gpulane accept device=cpu save_baseline=golden",
        "accept device=cpu save_baseline=golden",
        (0,),
    ),
    Step("gpulane accept --baseline golden", "accept device=cpu --baseline golden", (0, 1)),
    # the default job's rows are CPU ranks': INCOMPLETE until device=cpu says they are meant
    Step("gpulane accept run=runs/<dir>", "accept run=runs/<dir>", (3,)),
    Step(
        "CPU ranks' rows need device=cpu",
        "accept device=cpu run=runs/<dir>",
        (0,),
    ),
    Step("gpulane accept --rules", "accept --rules", (0,)),
    # the default job's run, accepted by the step above, is CPU figures: no GPU reference
    Step("(a run on CPU ranks is refused, exit 2)", "reference add runs/<dir>", (2,)),
    Step("gpulane report runs/ ", "report runs/", (0,)),
    *[
        Step(
            "`gpulane sweep sizes.min=1M sizes.max=4M build=cpu-gloo`",
            "sweep sizes.min=1M sizes.max=4M build=cpu-gloo",
            (0,),
        )
    ]
    * 3,
    Step("`gpulane history RESULTS_DIR`", "history runs/", (0, 1)),
    Step(
        "`gpulane export RUN|RESULTS_DIR --format openmetrics`",
        "export runs/ --format openmetrics",
        (0,),
    ),
    Step(
        "`gpulane export benchmarks/collectives/h200x2-issue20/runs/20261123-053007-plain-big-9a69`",
        "export benchmarks/collectives/h200x2-issue20/runs/20261123-053007-plain-big-9a69",
        (0,),
        cwd="repo",
    ),
    Step(
        "`gpulane results benchmarks/collectives/h200x2-issue20/runs --build plain-big --op all_reduce --size-min 8G`",
        "results benchmarks/collectives/h200x2-issue20/runs --build plain-big --op all_reduce "
        "--size-min 8G",
        (0,),
        cwd="repo",
    ),
    Step("gpulane parse --help ", "parse --help", (0,)),
]


def flat(text: str) -> str:
    return " ".join(text.split())


def sample_after(readme: str, lead: str) -> str:
    """The README's sample output line that starts with ``lead``."""
    lines = [line for line in readme.splitlines() if line.startswith(lead)]
    assert len(lines) == 1, f"README.md: {len(lines)} sample lines start with {lead!r}"
    return lines[0]


def test_every_step_is_quoted_from_the_readme() -> None:
    readme = flat(README.read_text())
    missing = [s.quote for s in STEPS if flat(s.quote) not in readme]
    assert not missing, f"README.md no longer says these; update STEPS: {missing}"


def default_run(tmp: Path) -> str:
    # the default job's run: the README's `accept run=runs/<dir>`
    made = sorted(p.name for p in (tmp / "runs").iterdir() if re.match(r"\d{8}-\d{6}-", p.name))
    assert made, "the default job made no run directory under runs/"
    return made[0]


def run_step(step: Step, tmp: Path) -> subprocess.CompletedProcess[str]:
    """The first step as a new interpreter, the way a new user starts; the others as
    processes forked from a server that imported gpulane's libraries once (about 1-3 CPU-s
    less a call: tests/forked_cli.py, held to a new interpreter's stdout, stderr and exit
    status by tests/test_forked_cli.py)."""
    argv = step.argv.replace("<dir>", default_run(tmp)) if "<dir>" in step.argv else step.argv
    cwd = REPO if step.cwd == "repo" else tmp
    env = {"COLUMNS": "200"}
    if step is not STEPS[0]:
        return gpulane(*shlex.split(argv), cwd=cwd, env=env, timeout=600)
    cmd = [sys.executable, "-m", "gpulane", *shlex.split(argv)]
    return subprocess.run(
        cmd, capture_output=True, text=True, check=False, cwd=cwd, env={**os.environ, **env}
    )


def test_readme_walk_on_cpus(tmp_path: Path) -> None:
    readme = README.read_text()
    outputs: dict[str, str] = {}
    errors: dict[str, str] = {}
    for step in STEPS:
        out = run_step(step, tmp_path)
        assert out.returncode in step.exits, (
            f"README step `gpulane {step.argv}` exited {out.returncode}, the README predicts "
            f"{step.exits}:\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}"
        )
        if out.returncode == 2:  # bad input: one error line, no traceback
            assert "Traceback" not in out.stderr, out.stderr
            assert out.stderr.strip().splitlines()[-1].startswith("gpulane: error: "), out.stderr
        outputs[step.argv], errors[step.argv] = out.stdout, out.stderr
    # the outputs the README shows, as it shows them
    assert "did you mean 'ranks'" in errors["sweep nranks=4"]
    assert "joined by a comma" in errors["sweep collectives=all_reduce all_gather"]
    json.loads(outputs["topo --json"])
    assert (tmp_path / "builds.html").is_file()
    assert (tmp_path / "runs" / "baselines" / "golden").is_dir()
    assert (tmp_path / "runs" / "report.html").is_file()
    export = "export benchmarks/collectives/h200x2-issue20/runs/20261123-053007-plain-big-9a69"
    assert sample_after(readme, "gpulane_collective_busbw") in outputs[export].splitlines()
    results = next(s.argv for s in STEPS if s.argv.startswith("results benchmarks/"))
    assert sample_after(readme, "# reference: plain-big") in outputs[results].splitlines()
