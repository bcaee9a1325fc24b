# Sourced by every GPU benchmark script: the environment the lent 2xH200 machine needs.
# NVLink multicast stays off in everything started there (device README): a program
# using it can take the host's shared GPUs out of service.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1
# gpulane from this checkout, and the carried wheels (hydra, omegaconf, submitit, nccl4py)
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
