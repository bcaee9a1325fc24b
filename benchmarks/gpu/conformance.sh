#!/usr/bin/env bash
# The conformance run: what a user runs on a healthy machine, then faults of its own, each
# expected to FAIL with its cause named and to PASS once it is gone; one device call on
# whatever kind is lent (1, 2, 4 or 8 GPUs), recorded in benchmarks/gpu/conformance/.
#
#   device run (carry .whl, and .nccl-tests where the side-by-side step should run):
#     OUT=$OUT bash benchmarks/gpu/conformance.sh
#   here, what it would run (no GPU): DRY=1 OUT=/tmp/c bash benchmarks/gpu/conformance.sh
#
# Steps (name, expected exit):
#   default 0       `gpulane` with no arguments (the README's first command)
#   topo 0          `gpulane topo --json`
#   doctor 0        no finding of severity error on a healthy machine
#   copy 0          every GPU's host link (and peers on 2+ GPUs)
#   accept 0        PASS, stored as baseline `healthy`
#   tokens-tiny 0, tokens-8b 0    model=tiny; llama3-8b layers=2
#   advise 0        measure=true, 2+ GPUs only
#   trace 0         `gpulane trace` of a torch.profiler trace recorded here
#   export 0        OpenMetrics of the results
#   gpu-tests 0     the tests that need a GPU (CI has none, so they skip there): the live
#                   probe and copies through the real CUDA and NVML (pytest carried in .whl)
#   busy 1          another process computing on GPU0: FAIL, its pid named
#   pcie 1          another process copying over GPU0's host link: FAIL, cause named
#   hold 2          another process holding most of GPU0's memory: `tokens` refuses and
#                   names the holder
#   link 1          (2+ GPUs) GPU0<->GPU1 kept full: FAIL, the pair named
#   nogpu 1         accept gpus=N with CUDA_VISIBLE_DEVICES= : FAIL, the cause named
#   healthy-again 0 PASS against the baseline once the faults are gone
# OUT (at most 8 files come back): steps.log, expect.tsv, summary.md, conformance.tar
# (every step's output, accept.json/junit.xml, rows.jsonl of each run).
set -u -o pipefail
cd "$(dirname "$0")/../.." || exit 1
RET=${OUT:?OUT: where the results go}
source benchmarks/gpu/env.sh
WORK=${WORK:-/tmp/conformance}
rm -rf "$WORK"
OUT=$WORK TARDIR=$RET BUDGET_S=${BUDGET_S:-560}
one_call_dirs
RUNS="$OUT/runs"
[ "${DRY:-0}" = 1 ] && G=(echo gpulane) PY_LOAD=(echo python3) || PY_LOAD=("$PY")
NGPU=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
NGPU=${NGPU:-0}
machine_txt "gpus: $NGPU" "kind: ${KIND:-unknown}"
printf 'step\texit\texpected\tcause\n' >"$OUT/expect.tsv"

after_step() {  # the tar of everything so far, rewritten whole after each step
  (cd "$OUT" && find . -type f ! -name '*.parquet' ! -name '*.html' ! -path '*/.heartbeat/*' \
      ! -name 'rank-*.log' ! -name '*.tar*' -size -4M | tar -cf "$TARDIR/conformance.tar.tmp" -T -) \
    && mv "$TARDIR/conformance.tar.tmp" "$TARDIR/conformance.tar"
  cp "$OUT/steps.log" "$OUT/expect.tsv" "$TARDIR/" 2>/dev/null
}

# check NAME WANT NEED LIMIT CMD...: a step whose exit status is held to WANT
check() {
  local name=$1 want=$2 need=$3 limit=$4
  shift 4
  run "$name" "$need" "$limit" "$@"
  local rc
  rc=$(grep -E "^[0-9:]+ \+[0-9]+s $name: (exit|SKIPPED)" "$OUT/steps.log" | tail -1 \
    | sed -E 's/.*: exit ([0-9]+).*/\1/; s/.*SKIPPED.*/skipped/')
  printf '%s\t%s\t%s\t-\n' "$name" "${rc:-none}" "$want" >>"$OUT/expect.tsv"
}

# cause NAME ROW REGEX: the step's failing rows whose rule matches ROW say REGEX, the cause,
# in their own message (accept.json's checks; the error line of a step that is no accept);
# the last row of expect.tsv gets yes or no
cause() {
  local name=$1 row=$2 pattern=$3 found=no doc
  doc=$(grep -o "^# accept.json: .*" "$OUT/$name.txt" 2>/dev/null | tail -1 | sed 's/^# accept.json: //')
  if [ -n "$doc" ] && [ -f "$doc" ]; then
    "$PY" - "$doc" "$row" "$pattern" >>"$OUT/$name.causes.txt" 2>&1 <<'PY' && found=yes
import json, re, sys
doc, row, pattern = sys.argv[1], re.compile(sys.argv[2]), re.compile(sys.argv[3], re.I)
failed = [c for c in json.load(open(doc))["checks"] if c["status"] == "fail" and row.search(c["rule"])]
for c in failed:
    print(c["rule"], c.get("subject"), "|", c.get("message"))
sys.exit(0 if failed and all(pattern.search(c.get("message") or "") for c in failed) else 1)
PY
  elif grep -E "error:" "$OUT/$name.txt" 2>/dev/null | grep -E "$row" | grep -Eiq "$pattern"; then
    found=yes
  fi
  sed -i '$ s/\t-$/\t'"$found"'/' "$OUT/expect.tsv"
  log "$name: failing rows /$row/ name the cause /$pattern/: $found"
  cat "$OUT/$name.causes.txt" 2>/dev/null | head -8 | tee -a "$OUT/steps.log"
}

start_fault() {  # NAME ARGS...: foreign_load.py in the background, up to speed
  local name=$1
  shift
  "${PY_LOAD[@]}" benchmarks/gpu/foreign_load.py "$@" >"$OUT/fault-$name.log" 2>&1 &
  fault_pid=$!
  log "fault $name: pid $fault_pid: foreign_load.py $*"
  [ "${DRY:-0}" = 1 ] || sleep 8
}
stop_fault() {
  kill "$fault_pid" 2>/dev/null
  wait "$fault_pid" 2>/dev/null
  log "fault ended (pid $fault_pid)"
  [ "${DRY:-0}" = 1 ] || sleep 3
}
trap 'kill "${fault_pid:-0}" 2>/dev/null' EXIT

# accept knows how many GPUs the node should have (gpus=N) where this checkout has the key
EXPECT=()
if "${G[@]}" accept --help 2>/dev/null | grep -qE '^ +gpus +'; then EXPECT=("gpus=$NGPU"); fi
A=("${G[@]}" accept "results_dir=$RUNS" "${EXPECT[@]}")

check default 0 60 120 "${G[@]}" "results_dir=$RUNS"
run topo-json 10 60 "${G[@]}" topo --json
check topo 0 10 60 "${G[@]}" topo
check doctor 0 20 90 "${G[@]}" doctor
check copy 0 40 120 "${G[@]}" copy "results_dir=$RUNS"
check accept 0 60 150 "${A[@]}" build=healthy save_baseline=healthy
check tokens-tiny 0 30 90 "${G[@]}" tokens model=tiny "results_dir=$RUNS"
check tokens-8b 0 60 150 "${G[@]}" tokens model=llama3-8b layers=2 "results_dir=$RUNS"
if [ "$NGPU" -ge 2 ]; then
  check advise 0 90 240 "${G[@]}" advise model=qwen3-30b-a3b "gpus=$NGPU" measure=true \
    batch=1,16 input_len=1024 output_len=128 "results_dir=$RUNS" "run=$RUNS"
fi
run record-trace 20 60 "${PY_LOAD[@]}" benchmarks/gpu/record_trace.py "$OUT/serving-trace.json"
check trace 0 15 60 "${G[@]}" trace "$OUT/serving-trace.json" --out "$OUT/trace-rows"
check export 0 10 60 "${G[@]}" export "$RUNS" --format openmetrics
check gpu-tests 0 40 180 "${PY_LOAD[@]}" -m pytest -q -p no:cacheprovider -rs tests/topology/test_live.py \
  tests/transfers/test_gpu.py

start_fault busy busy 0 300
check busy 1 60 150 "${A[@]}" build=busy --baseline healthy
cause busy "no_foreign_work" "pid [0-9]+"
stop_fault

start_fault pcie pcie 0 300
check pcie 1 60 150 "${A[@]}" build=pcie --baseline healthy
cause pcie "pinned_h2d|copy_vs_baseline" "pid [0-9]+|another process|foreign"
stop_fault

if [ "$NGPU" -ge 1 ]; then
  total_gib=$(nvidia-smi -i 0 --query-gpu=memory.total --format=csv,noheader,nounits 2>/dev/null | head -1)
  hold_gib=$(( ${total_gib:-143771} / 1024 - 12 ))
  start_fault hold hold 0 "$hold_gib" 120
  [ "${DRY:-0}" = 1 ] || sleep 6
  check hold 2 30 90 "${G[@]}" tokens model=llama3-8b "results_dir=$RUNS"
  cause hold "error:" "pid [0-9]+|another process"
  stop_fault
fi

if [ "$NGPU" -ge 2 ]; then
  start_fault link link 0 1 300
  check link 1 60 200 "${A[@]}" build=link --baseline healthy
  cause link "localiz" "GPU0.{0,3}GPU1"
  stop_fault
fi

check nogpu 1 30 90 env CUDA_VISIBLE_DEVICES= "${G[@]}" accept "results_dir=$RUNS" \
  "gpus=$NGPU" build=nogpu
cause nogpu "." "CUDA_VISIBLE_DEVICES|no GPU|driver"
check healthy-again 0 60 150 "${A[@]}" build=healthy-again --baseline healthy

{
  echo "# conformance: $NGPU GPU(s), $(date -u +%FT%TZ)"
  head -7 "$OUT/machine.txt"
  echo
  echo "| step | exit | expected | cause named |"
  echo "|---|---|---|---|"
  awk -F'\t' 'NR>1 {printf "| %s | %s | %s | %s |\n", $1, $2, $3, $4}' "$OUT/expect.tsv"
  awk -F'\t' 'NR>1 && ($2!=$3 || $4=="no") {bad=bad" "$1} END {print "\n" (bad ? "NOT as expected:" bad : "every step as expected")}' "$OUT/expect.tsv"
} >"$OUT/summary.md"
cat "$OUT/summary.md" | tee -a "$OUT/steps.log"
cp "$OUT/summary.md" "$TARDIR/"
after_step
