#!/usr/bin/env bash
# Runs every cargo-fuzz target of fuzz/ for N seconds each (default 20), starting from the
# committed seed corpus, and fails on any crash, leak, timeout or out-of-memory.
#
#   scripts/fuzz-smoke.sh            # 20 s per target
#   scripts/fuzz-smoke.sh 60         # 60 s per target
#   FUZZ_TARGETS="roundtrip" scripts/fuzz-smoke.sh 120
#   scripts/fuzz-smoke.sh long       # 10 M executions per target (FUZZ_RUNS), however long
#
# The long mode (outside CI) stops each target after FUZZ_RUNS executions instead of a
# time. Measured on a 2-core machine shared with other builds, with AddressSanitizer
# (cargo-fuzz's default), one run of `scripts/fuzz-smoke.sh long` per target, no crash:
#   parse_cqe 90 s, parse_wqe 186 s, prm_commands 157 s, roundtrip 446 s,
#   softnic 2,469 s (about 4,000 exec/s), softnic_commands 616 s (16,300 exec/s; it keeps
#   its device between refused commands).
# So the whole long run takes about an hour; FUZZ_TARGETS splits it across machines.
#
# The seed corpus (fuzz/corpus/<target>/) is only read: new inputs go to a scratch corpus
# (FUZZ_WORK, default a temporary directory) so a run leaves the repository clean. Crash
# reproducers land in fuzz/artifacts/<target>/ (git-ignored); CI should keep them.
# cargo-fuzz is installed if missing. It needs a nightly toolchain (`cargo +nightly`);
# without one, RUSTC_BOOTSTRAP=1 on stable is used instead.
set -euo pipefail

mode="${1:-20}"
if [ "$mode" = long ]; then
    limit=(-runs="${FUZZ_RUNS:-10000000}")
    echo "fuzz-smoke: long mode, ${FUZZ_RUNS:-10000000} executions per target" >&2
else
    limit=(-max_total_time="$mode")
fi
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root/fuzz"

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "fuzz-smoke: installing cargo-fuzz" >&2
    cargo install --locked cargo-fuzz
fi

if rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
    fuzz=(cargo +nightly fuzz)
else
    export RUSTC_BOOTSTRAP=1
    fuzz=(cargo fuzz)
fi

targets="${FUZZ_TARGETS:-$("${fuzz[@]}" list)}"
work="${FUZZ_WORK:-$(mktemp -d)}"

"${fuzz[@]}" build

status=0
for target in $targets; do
    mkdir -p "$work/$target"
    log="$work/$target.log"
    echo "fuzz-smoke: $target, ${limit[*]} (scratch corpus $work/$target)" >&2
    started=$SECONDS
    if ! "${fuzz[@]}" run "$target" "$work/$target" "corpus/$target" -- \
        "${limit[@]}" -timeout=10 -rss_limit_mb=2048 \
        -print_final_stats=1 >"$log" 2>&1; then
        echo "fuzz-smoke: $target FAILED" >&2
        tail -n 60 "$log" >&2
        status=1
        continue
    fi
    # The summary lines: executions, rate, coverage.
    grep -E '^#[0-9]+\s+DONE|stat::number_of_executed_units|stat::average_exec_per_sec|stat::peak_rss_mb' "$log" | sed "s/^/fuzz-smoke: $target: /" >&2 || true
    echo "fuzz-smoke: $target: $((SECONDS - started)) s" >&2
done
exit "$status"
