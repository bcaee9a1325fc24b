#!/usr/bin/env bash
# Install what the tests need (Debian packages, Python packages), start the real Slurm
# the Slurm tests use, then lint, type-check and run the tests. Run as root on Debian.
set -euo pipefail
cd "$(dirname "$0")/.."

apt_packages=(openmpi-bin libopenmpi-dev munge slurmctld slurmd slurm-client slurmdbd
              mariadb-server chromium pciutils prometheus prometheus-pushgateway)
missing=()
for p in "${apt_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# torch==2.13.0 is the CPU build on these machines; a bare `torch` would pull CUDA. pip's
# resolution takes ~10 s even when everything is there: when every requirement already is
# (scripts/deps-ok.py), only this checkout's editable install is made (~3 s).
if python3 scripts/deps-ok.py torch==2.13.0 ".[test,mpi]" 2>/dev/null; then
  python3 -m pip install -q --disable-pip-version-check --no-deps --no-build-isolation -e .
else
  python3 -m pip install -q --disable-pip-version-check torch==2.13.0 -e ".[test,mpi]"
fi
# Every rank and CLI call of the tests is a new Python process. Where PYTHONDONTWRITEBYTECODE
# is set (as on the CI machine) each one compiled gpulane's modules again: compiled once.
python3 -m compileall -q -j 0 gpulane

# Lint, types, the README figures (~20 s) and the mutation gate of the fast core targets
# (spec, pattern+values, paths: ~1 min on a 2-core VM, against
# benchmarks/tests/mutation.json; the whole gate, every target, ~25 min, is
# `python3 -m benchmarks.tests.gate`, run by hand when the core changes) run beside the
# Slurm start and the tests: they read the sources and write nothing the tests read (the
# gate mutates a scratch copy). Their output is printed after the tests', and any of them
# failing fails the run.
# They run at a lower priority (nice 5): they fill the time the tests spend waiting on
# Slurm, ranks and sleeps rather than slowing the tests that compute.
checks_log=$(mktemp)
setsid nice -n 5 bash -c '
  set -euo pipefail
  ruff check gpulane tests benchmarks
  ruff format --check gpulane tests benchmarks
  mypy
  python3 -m benchmarks.check
  python3 -m benchmarks.tests.gate --fast
' >"$checks_log" 2>&1 &
checks_pid=$!
# A failure before the end (set -e) stops the checks too: nothing is left running.
trap 'kill -- -"$checks_pid" 2>/dev/null || true; rm -f "$checks_log"' EXIT

# pytest rewrites the asserts of each test module it imports, and caches the result only
# where bytecode may be written: with PYTHONDONTWRITEBYTECODE set (as on the CI machine)
# every worker rewrote every module again (12.4 against 5.5 CPU-s a worker's collection).
# Rewritten once here, beside the Slurm start; the workers read what it wrote.
env -u PYTHONDONTWRITEBYTECODE python3 -m pytest --collect-only -q -p no:cacheprovider \
  -p no:benchmark >/dev/null 2>&1 &
collect_pid=$!
# the single-node cluster, the 2-node one, and the 8-node one of tests/launch/test_slurm_cluster.py
bash scripts/slurm-up.sh 8
wait "$collect_pid" || true # a module that does not import fails in the run itself

# The tests on several workers (pytest-xdist). Tests that share a cluster stay on one
# worker, one after another (tests/conftest.py): the single-node and 2-node Slurm, the
# 8-node Slurm, mpirun. Those three groups start first and hold a worker each while they
# mostly wait (on Slurm jobs, on ranks), as do the localization tests (planted sleeps): on 2
# cores, cores + 2 workers keep both busy (cores + 3 gained 2-7 % and more load-sensitive
# failures; a timeline of a run: GPULANE_TEST_CPU=FILE, benchmarks/ci/README.md).
# GPULANE_TEST_WORKERS=0: no workers.
workers=${GPULANE_TEST_WORKERS:-$(( $(nproc) + 2 ))}
set +e
# pytest-benchmark, where installed, is no test extra and no test uses it (it only warned
# on every worker that xdist disables it).
python3 -m pytest -q -p no:cacheprovider -p no:benchmark -n "$workers" --dist loadgroup "$@"
status=$?
# pytest's 5 means no test ran: that is a failure too.
[ "$status" -eq 5 ] && echo "no tests ran" && status=1
wait "$checks_pid"
checks=$?
cat "$checks_log"
if [ "$checks" -ne 0 ]; then
  echo "lint, types, README figures or the mutation gate failed (exit $checks): see above"
  [ "$status" -eq 0 ] && status=1
fi
exit "$status"
