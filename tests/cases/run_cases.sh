#!/usr/bin/env bash
# run_cases.sh -- the field cases (shared/cases/README.md) as hostile cpu candidates.
#
# Each tests/cases/NAME/ holds candidate.c and case.json:
#   {"task": "<dir relative to the repo root>", "verdict": "<expected>",
#    "detail_contains": "<optional substring of the detail>",
#    "timeout": <optional seconds>, "env": {<optional extra environment>},
#    "defines": {<optional tunables, passed as --define NAME=VALUE>}}
# Every case runs `kfarm-worker eval --quick --json` and must produce a
# verdict (exit 0: the worker survived the candidate) equal to the expected
# one, with the detail substring. Then B2: a build that fails because the
# compiler is missing is infra_error and is not cached; after the "fix" the
# same source is rebuilt (cache miss), and only then cached.
#
# Env: KFARM_BIN (build dir holding kfarm-worker), KFARM_SRC (repo root).
# Optional: CASES="good hang" to run a subset.
set -u
SRC=${KFARM_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
BIN=${KFARM_BIN:-$SRC/build}
WORKER=$BIN/kfarm-worker
[ -x "$WORKER" ] || { echo "run_cases: $WORKER not found (set KFARM_BIN)"; exit 2; }
command -v python3 >/dev/null || { echo "run_cases: python3 needed"; exit 2; }

TMP=$(mktemp -d "${TMPDIR:-/tmp}/kfarm-cases.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
pass=0
fail=0
failed=()

# field NAME FILE: print one field of a JSON file ("" if absent)
field() {
    python3 - "$1" "$2" <<'EOF'
import json, sys
key, path = sys.argv[1], sys.argv[2]
d = json.load(open(path))
for k in key.split("."):
    d = d.get(k) if isinstance(d, dict) else None
if d is None: d = ""
if isinstance(d, bool): d = "true" if d else "false"
print(json.dumps(d) if isinstance(d, dict) else d)
EOF
}

# check NAME OUT_JSON RC WANT_VERDICT WANT_DETAIL SECONDS
check() {
    local name=$1 out=$2 rc=$3 want=$4 sub=$5 secs=$6 got detail
    if [ "$rc" -ne 0 ]; then
        echo "FAIL $name: kfarm-worker exited $rc (it must survive every candidate)"
        sed 's/^/    /' "$out.err" | tail -5
        fail=$((fail + 1)); failed+=("$name"); return
    fi
    got=$(field verdict "$out")
    detail=$(field detail "$out")
    if [ "$got" != "$want" ]; then
        echo "FAIL $name: verdict $got, expected $want (${secs}s)"
        echo "    detail: $detail"
        fail=$((fail + 1)); failed+=("$name"); return
    fi
    if [ -n "$sub" ] && [[ "$detail" != *"$sub"* ]]; then
        echo "FAIL $name: verdict $got as expected, but the detail lacks \"$sub\""
        echo "    detail: $detail"
        fail=$((fail + 1)); failed+=("$name"); return
    fi
    echo "ok   $name: $got (${secs}s) -- $detail" | cut -c1-200
    pass=$((pass + 1))
}

start_all=$(date +%s)
for dir in "$SRC"/tests/cases/*/; do
    name=$(basename "$dir")
    [ -f "$dir/case.json" ] || continue
    if [ -n "${CASES:-}" ] && [[ " $CASES " != *" $name "* ]]; then continue; fi
    task=$(field task "$dir/case.json")
    want=$(field verdict "$dir/case.json")
    sub=$(field detail_contains "$dir/case.json")
    to=$(field timeout "$dir/case.json")
    envs=$(python3 -c 'import json,sys; [print(f"{k}={v}") for k,v in json.load(open(sys.argv[1])).get("env",{}).items()]' "$dir/case.json")
    defs=$(python3 -c 'import json,sys; [print(f"--define={k}={v}") for k,v in json.load(open(sys.argv[1])).get("defines",{}).items()]' "$dir/case.json")
    # one compile cache for all cases: the task's reference and baseline build once
    args=(eval "$SRC/$task" "$dir/candidate.c" --quick --json --seed 7 --work-dir "$TMP/work"
          --cache-dir "$TMP/cases-cache")
    for d in $defs; do args+=(--define "${d#--define=}"); done
    [ -n "$to" ] && args+=(--timeout "$to")
    out=$TMP/$name.json
    t0=$(date +%s.%N)
    # shellcheck disable=SC2086
    env $envs timeout 300 "$WORKER" "${args[@]}" >"$out" 2>"$out.err"
    rc=$?
    secs=$(python3 -c "print(f'{$(date +%s.%N) - $t0:.1f}')")
    check "$name" "$out" "$rc" "$want" "$sub" "$secs"
done

# ---- B2: worker-side build failures are infra_error and never cached ----
if [ -z "${CASES:-}" ] || [[ " $CASES " == *" b2 "* ]]; then
    cache=$TMP/cache
    good=$SRC/tests/cases/good/candidate.c
    task=$SRC/tests/tasks/softmax_rows_f32
    common=(eval "$task" "$good" --quick --json --seed 7 --work-dir "$TMP/work" --cache-dir "$cache")
    KFARM_CC=/nonexistent/bin/cc "$WORKER" "${common[@]}" >"$TMP/b2a.json" 2>"$TMP/b2a.json.err"
    check b2_compiler_missing "$TMP/b2a.json" $? infra_error "not found" -
    n_cached=$(find "$cache" -name '*.so' 2>/dev/null | wc -l)
    if [ "$n_cached" -ne 0 ]; then
        echo "FAIL b2_nothing_cached: $n_cached cache entries after a failed build"
        fail=$((fail + 1)); failed+=(b2_nothing_cached)
    else
        echo "ok   b2_nothing_cached: no cache entry after the failed build"; pass=$((pass + 1))
    fi
    # a toolchain that runs but fails for worker reasons: disk full, broken install
    mkdir -p "$TMP/fakecc"
    printf '#!/bin/sh\n[ "$1" = "--version" ] && { echo "fakecc 1.0"; exit 0; }\necho "/usr/bin/ld: final link failed: No space left on device" >&2\nexit 1\n' >"$TMP/fakecc/cc-enospc"
    printf '#!/bin/sh\n[ "$1" = "--version" ] && { echo "fakecc 1.0"; exit 0; }\necho "cc: cannot run the assembler" >&2\nexit 127\n' >"$TMP/fakecc/cc-127"
    chmod +x "$TMP/fakecc/cc-enospc" "$TMP/fakecc/cc-127"
    KFARM_CC=$TMP/fakecc/cc-enospc "$WORKER" "${common[@]}" >"$TMP/b2d.json" 2>"$TMP/b2d.json.err"
    check b2_disk_full "$TMP/b2d.json" $? infra_error "No space left on device" -
    KFARM_CC=$TMP/fakecc/cc-127 "$WORKER" "${common[@]}" >"$TMP/b2e.json" 2>"$TMP/b2e.json.err"
    check b2_status_127 "$TMP/b2e.json" $? infra_error "127" -
    # ...while the same words in the candidate's own diagnostics stay its compile_error
    printf '#include "kf_abi.h"\n#error No space left on device\n' >"$TMP/fake_enospc.c"
    "$WORKER" eval "$task" "$TMP/fake_enospc.c" --quick --json --work-dir "$TMP/work" --cache-dir "$cache" \
        >"$TMP/b2f.json" 2>"$TMP/b2f.json.err"
    check b2_error_text_in_source "$TMP/b2f.json" $? compile_error "No space left" -
    n_cached=$(find "$cache" -name '*.so' 2>/dev/null | wc -l)
    if [ "$n_cached" -ne 0 ]; then
        echo "FAIL b2_still_nothing_cached: $n_cached cache entries after failed builds"
        fail=$((fail + 1)); failed+=(b2_still_nothing_cached)
    fi
    "$WORKER" "${common[@]}" >"$TMP/b2b.json" 2>"$TMP/b2b.json.err"
    check b2_rebuilt_after_fix "$TMP/b2b.json" $? ok "" -
    c1=$(field metrics.compile.candidate.cached "$TMP/b2b.json")
    "$WORKER" "${common[@]}" >"$TMP/b2c.json" 2>"$TMP/b2c.json.err"
    c2=$(field metrics.compile.candidate.cached "$TMP/b2c.json")
    if [ "$c1" = "false" ] && [ "$c2" = "true" ]; then
        echo "ok   b2_cache: first good build was a miss, the second a hit"; pass=$((pass + 1))
    else
        echo "FAIL b2_cache: cached after fix=$c1 (want false), on repeat=$c2 (want true)"
        fail=$((fail + 1)); failed+=(b2_cache)
    fi
fi

# ---- usage errors: non-zero exit with one line, no verdict ----
if [ -z "${CASES:-}" ] || [[ " $CASES " == *" usage "* ]]; then
    for bad in "eval" "eval $SRC/tests/tasks/axpy_f32" \
               "eval $SRC/tests/tasks/axpy_f32 $SRC/tests/cases/tuned/candidate.c --define X=\$(rm)" \
               "eval $SRC/tests/tasks/axpy_f32 $SRC/tests/cases/tuned/candidate.c --bogus" \
               "eval $SRC/tests/tasks/axpy_f32 $SRC/tests/cases/no-such-candidate.c" \
               "eval $SRC/tests/tasks/axpy_f32 $SRC/tests/cases/tuned" \
               "eval $SRC/tests/tasks/no-such-task $SRC/tests/cases/tuned/candidate.c" \
               "run --coordinator ipc:///nonexistent/kfarm.ipc --max-jobs abc" \
               "run --coordinator ipc:///nonexistent/kfarm.ipc --gpu -1"; do
        # shellcheck disable=SC2086
        KFARM_FLEET_KEY=usage-test-key-0123456789abcdef timeout 10 "$WORKER" $bad >"$TMP/usage.out" 2>"$TMP/usage.err"
        rc=$?
        if [ "$rc" -ne 0 ] && [ "$(wc -l <"$TMP/usage.err")" -eq 1 ] && [ ! -s "$TMP/usage.out" ]; then
            pass=$((pass + 1))
        else
            echo "FAIL usage: '$bad' exited $rc with $(wc -l <"$TMP/usage.err") stderr lines"
            fail=$((fail + 1)); failed+=(usage)
        fi
    done
    # --gpu N on a worker with no GPU must not quietly serve the cpu backend
    if "$WORKER" devices | grep -q '"backend": "cpu"'; then
        KFARM_FLEET_KEY=usage-test-key-0123456789abcdef timeout 10 "$WORKER" run \
            --coordinator ipc:///nonexistent/kfarm.ipc --gpu 0 --work-dir "$TMP/gpu0" >"$TMP/usage.out" 2>"$TMP/usage.err"
        rc=$?
        if [ "$rc" -eq 2 ] && grep -q -- "--gpu 0" "$TMP/usage.err"; then pass=$((pass + 1)); else
            echo "FAIL usage: 'run --gpu 0' without a GPU exited $rc: $(head -c 300 "$TMP/usage.err")"
            fail=$((fail + 1)); failed+=(usage)
        fi
    fi
    echo "ok   usage: bad command lines exit non-zero with a one-line reason"
fi

echo "run_cases: $(( $(date +%s) - start_all ))s"
[ "$fail" -gt 0 ] && echo "failed: ${failed[*]}"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
