#!/usr/bin/env bash
# Runs fuzz campaigns on strata's readers: each target of tests/fuzz under
# libFuzzer (clang, ASan+UBSan: the `fuzz` preset, built here first), until
# it has run N inputs or M minutes, whichever comes first.
#
# Usage: scripts/fuzz.sh [--runs N] [--minutes M] [--jobs J] [TARGET...]
#   --runs N     inputs per target (default 1000000)
#   --minutes M  time per target (default 30)
#   --jobs J     targets run at once (default: the cores)
#   TARGET...    default: every target (tests/fuzz/*_fuzzer.cc)
#
# Each campaign starts from the checked-in seeds (tests/fuzz/corpus/T) and
# grows its corpus in build/fuzz/campaign/T. Limits: -rss_limit_mb=2048,
# -timeout=10 s per input, and no single allocation over 256 MB
# (-malloc_limit_mb: inputs are a few KB, so a larger one is a size field
# believed). A finding (crash, leak, timeout, out of memory) is written to
# build/fuzz/findings/T/; fix it, then copy the input to
# tests/fuzz/regressions/T/, where the replay test runs it in CI.
#
# A target's campaign stops at its first finding (libFuzzer's way); run it
# again once fixed. Ends with one line per target: executions, edges
# covered (cov), features (ft), corpus size, findings, seconds; and a JSON
# copy in build/fuzz/summary.json. Exit 1 when any target had a finding
# (or failed to build or run); exit 2 for a bad command line. A target's
# earlier findings are removed when it runs again: copy them first.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=1000000 minutes=30 jobs=$(nproc) targets=()
while (($#)); do
  case "$1" in
    --runs|--minutes|--jobs)
      (($# >= 2)) || { echo "fuzz.sh: $1 needs a value" >&2; exit 2; }
      case "$1" in --runs) runs=$2 ;; --minutes) minutes=$2 ;; *) jobs=$2 ;; esac
      shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "fuzz.sh: unknown option $1 (--help)" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
for n in "$runs" "$minutes" "$jobs"; do
  [[ "$n" =~ ^[1-9][0-9]{0,8}$ ]] ||
    { echo "fuzz.sh: '$n' is not a whole number in [1, 999999999]" >&2; exit 2; }
done
if ((${#targets[@]} == 0)); then
  for f in tests/fuzz/*_fuzzer.cc; do
    f=${f##*/}; targets+=("${f%_fuzzer.cc}")
  done
fi
for t in "${targets[@]}"; do
  [[ "$t" =~ ^[a-z0-9_]+$ && -f "tests/fuzz/${t}_fuzzer.cc" ]] ||
    { echo "fuzz.sh: no target '$t' (tests/fuzz/${t}_fuzzer.cc)" >&2; exit 2; }
done

scripts/setup.sh fuzz
out=build/fuzz
mkdir -p "$out/logs"
campaign() {
  local t=$1
  rm -rf "$out/findings/$t"  # this campaign's findings only
  mkdir -p "$out/campaign/$t" "$out/findings/$t"
  local start=$SECONDS status=0
  "$out/tests/fuzz/fuzz_$t" -runs="$runs" -max_total_time=$((minutes * 60)) \
    -rss_limit_mb=2048 -malloc_limit_mb=256 -timeout=10 \
    -print_final_stats=1 -artifact_prefix="$out/findings/$t/" \
    "$out/campaign/$t" "tests/fuzz/corpus/$t" >"$out/logs/$t.log" 2>&1 ||
    status=$?
  echo "$((SECONDS - start)) $status" >"$out/logs/$t.done"
}
export -f campaign
export out runs minutes
echo "fuzz.sh: ${#targets[@]} targets, $jobs at a time, each to $runs inputs" \
  "or $minutes min; logs in $out/logs"
printf '%s\n' "${targets[@]}" | sort -u | xargs -P "$jobs" -I{} bash -c 'campaign "$1"' _ {}

found=0
printf '%-20s %10s %7s %7s %7s %8s %6s\n' target executions cov ft corpus \
  findings s
echo "[" >"$out/summary.json"
sep=""
for t in "${targets[@]}"; do
  log="$out/logs/$t.log"
  read -r secs status <"$out/logs/$t.done"
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  # The last status line: "#N  DONE  cov: C ft: F corp: K/..." (or pulse).
  line=$(grep -aE '^#[0-9]+' "$log" | tail -1)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$line")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$line")
  corp=$(sed -n 's/.* corp: \([0-9]*\).*/\1/p' <<<"$line")
  # slow-unit-* is an input that took >= 10 s once (-report_slow_units)
  # without passing -timeout: told as a warning, not counted a finding.
  slow=$(find "$out/findings/$t" -name 'slow-unit-*' | wc -l)
  ((slow == 0)) || echo "fuzz.sh: $t: $slow slow input(s) in $out/findings/$t" >&2
  findings=$(find "$out/findings/$t" -type f ! -name 'slow-unit-*' | wc -l)
  ((findings == 0 && status == 0)) || found=1
  printf '%-20s %10s %7s %7s %7s %8s %6s\n' "$t" "${execs:-?}" "${cov:-?}" \
    "${ft:-?}" "${corp:-?}" "$findings" "$secs"
  printf '%s{"target":"%s","executions":%s,"cov":%s,"ft":%s,"corpus":%s,"findings":%s,"seconds":%s,"exit":%s}\n' \
    "$sep" "$t" "${execs:-null}" "${cov:-null}" "${ft:-null}" \
    "${corp:-null}" "$findings" "$secs" "$status" >>"$out/summary.json"
  sep=","
done
echo "]" >>"$out/summary.json"
exit "$found"
