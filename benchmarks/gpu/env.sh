# Sourced by every GPU benchmark script: the environment the lent 2xH200 machine needs.
# NVLink multicast stays off in everything started there (device README): a program
# using it can take the host's shared GPUs out of service.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1
# gpulane from this checkout, and the carried wheels: hydra-core, omegaconf, antlr4, submitit,
# cloudpickle, ijson, nccl4py, and pytest with hypothesis for the tests that need a GPU
# (pytest, pluggy, iniconfig, hypothesis, sortedcontainers, attrs: `pip download --no-deps
# --python-version 3.12 --only-binary=:all: -d .whl ...`; the device reaches no registry)
if [ -d .whl ] && [ ! -d /tmp/site/hydra ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl
fi
export PYTHONPATH="$PWD:/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
export PATH="$PWD/benchmarks/gpu/bin:$PATH"

# For scripts that set $out: a logged step whose output goes to $out/NAME.txt.
log() { echo "=== $*" | tee -a "$out/steps.log"; }
step() {  # step NAME TIMEOUT CMD...: run, keep output, go on after a failure
  local name=$1 limit=$2; shift 2
  log "$name: $*"
  local t0=$SECONDS
  timeout "$limit" "$@" >"$out/$name.txt" 2>&1
  echo "=== $name: exit $? in $((SECONDS - t0)) s" | tee -a "$out/steps.log"
}

# For scripts that set $OUT and $TARDIR (one device call): both made and made absolute, and
# log()'s folder; the interpreter and gpulane's command line as the scripts call them.
one_call_dirs() {
  mkdir -p "$OUT" "$TARDIR"
  OUT=$(cd "$OUT" && pwd)
  TARDIR=$(cd "$TARDIR" && pwd)
  out=$OUT
  PY=${PYTHON:-python3}
  G=("$PY" -m gpulane.cli)
}

# $OUT/machine.txt: when, where, which commit, the GPUs and their links, the versions;
# each argument one more line. Its first lines are printed.
machine_txt() {
  {
    echo "date: $(date -u +%FT%TZ)"
    echo "host: $(hostname)"
    echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
    local line
    for line in "$@"; do echo "$line"; done
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
    nvidia-smi topo -m || true
    "$PY" -c 'import torch, triton; print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version(), "triton", triton.__version__)'
  } >"$OUT/machine.txt" 2>&1
  head -7 "$OUT/machine.txt"
}

# For scripts that set $OUT and BUDGET_S (one device call with a budget): the clock, and a
# step that is skipped when the budget cannot hold it.
stamp() { date -u +%H:%M:%S; }
left() { echo $((BUDGET_S - SECONDS)); }
# run NAME NEED_S LIMIT_S CMD...: CMD under `timeout`, output to OUT/NAME.txt; skipped
# when fewer than NEED_S seconds of the budget are left; the limit never passes the budget;
# then the script's after_step, where it defines one (rewriting its tar)
run() {
  local name=$1 need=$2 limit=$3 l; shift 3
  l=$(left)
  if [ "$l" -lt "$need" ]; then
    echo "$(stamp) +${SECONDS}s $name: SKIPPED ($l s of the budget left, needs ~$need)" \
      | tee -a "$OUT/steps.log"
    return 0
  fi
  [ "$limit" -gt "$l" ] && limit=$l
  echo "$(stamp) +${SECONDS}s $name: start (limit ${limit}s): $*" | tee -a "$OUT/steps.log"
  local t0=$SECONDS
  timeout -k 5 "$limit" "$@" >"$OUT/$name.txt" 2>&1
  local rc=$?
  echo "$(stamp) +${SECONDS}s $name: exit $rc in $((SECONDS - t0)) s" | tee -a "$OUT/steps.log"
  grep -E "^  batch|error|Error" "$OUT/$name.txt" | head -6
  if declare -F after_step >/dev/null; then after_step; fi
  return 0
}

# pack_measured NAME: TARDIR/NAME.tar of what OUT measured so far (every file at its top,
# rows.jsonl and config.yaml of each run, the profiles and kernel tables under profile*/
# and kernels/; no Parquet copies, rank logs or heartbeats), written whole then renamed,
# so a call cut mid-way still brings back the last complete tar.
pack_measured() {
  local name=$1 base list=/tmp/$1-files.$BASHPID
  base=$(basename "$OUT")
  (
    cd "$(dirname "$OUT")" || exit 1
    { find "$base" -maxdepth 1 -type f ! -name "$name.tar*"
      find "$base" -mindepth 2 -type f \( -name rows.jsonl -o -name config.yaml \
        -o -path "$base/profile*/*" -o -path "$base/kernels/*" \); } >"$list"
    tar -cf "$TARDIR/$name.tar.tmp.$BASHPID" -T "$list" \
      && mv "$TARDIR/$name.tar.tmp.$BASHPID" "$TARDIR/$name.tar"
  )
  rm -f "$list"
}
