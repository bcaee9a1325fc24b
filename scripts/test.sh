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

# torch==2.13.0 is the CPU build on these machines; a bare `torch` would pull CUDA.
python3 -m pip install -q --disable-pip-version-check torch==2.13.0 -e ".[test,mpi]"

# the single-node cluster, the 2-node one, and the 8-node one of tests/launch/test_slurm_cluster.py
bash scripts/slurm-up.sh 8

ruff check gpulane tests benchmarks
ruff format --check gpulane tests benchmarks
mypy
# Every figure of every benchmarks README, recomputed from the committed data (~20 s).
python3 -m benchmarks.check
# Mutation score of the fast core targets (spec, pattern+values, paths: ~3 min on a 2-core
# VM) against benchmarks/tests/mutation.json; the whole gate (every target, ~25 min) is
# `python3 -m benchmarks.tests.gate`, run by hand when the core changes.
python3 -m benchmarks.tests.gate --fast
set +e
python3 -m pytest -q -p no:cacheprovider "$@"
status=$?
# pytest's 5 means no test ran: that is a failure too.
[ "$status" -eq 5 ] && echo "no tests ran" && status=1
exit "$status"
