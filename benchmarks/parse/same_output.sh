#!/bin/bash
# Did a change to the parser leave its output as it was? Runs
# `python3 -m gpulane parse nccl-tests LOG --out DIR` with the code in BEFORE and in AFTER
# (checkouts, e.g. from `git archive`) and compares what each wrote: the printed table
# and rows.jsonl byte for byte; facts.jsonl byte for byte but for run_id and started_at
# (a new id and clock every run); rows.parquet as arrow tables (schema with its metadata,
# every column but those two). Prints one line per check and the CPU time of each run.
#
#   benchmarks/parse/same_output.sh /tmp/base /tmp/after LOG...
# Exit 1 when any output differs.
set -u
before=$1 after=$2
shift 2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
status=0
for log in "$@"; do
  for side in before after; do
    code=${!side}
    (cd "$code" && /usr/bin/time -f "$side $(basename "$log"): %U s user %S s system" \
      python3 -m gpulane parse nccl-tests "$log" --out "$work/$side" >"$work/$side.txt")
    sed -i "s#$work/$side#OUT#" "$work/$side.txt"
  done
  check() { if "$@" >/dev/null; then echo "  same: $what"; else echo "  DIFFERS: $what"; status=1; fi; }
  echo "$log"
  what="printed table" check cmp "$work/before.txt" "$work/after.txt"
  what="rows.jsonl" check cmp "$work/before/rows.jsonl" "$work/after/rows.jsonl"
  norm='s/"run_id":"[^"]*"/RUN_ID/g; s/"started_at":"[^"]*"/STARTED_AT/g'
  what="facts.jsonl (run_id, started_at aside)" check \
    cmp <(sed -E "$norm" "$work/before/facts.jsonl") <(sed -E "$norm" "$work/after/facts.jsonl")
  what="rows.parquet (run_id, started_at aside)" check python3 -c "
import sys, pyarrow.parquet as pq
a, b = (pq.read_table(p) for p in sys.argv[1:])
same = a.schema.equals(b.schema, check_metadata=True)
a, b = (t.drop(['run_id', 'started_at']) for t in (a, b))
sys.exit(0 if same and a.equals(b) else 1)" "$work/before/rows.parquet" "$work/after/rows.parquet"
  rm -rf "$work/before" "$work/after"
done
exit $status
