#!/usr/bin/env bash
# run_cases.sh -- the field cases (shared/cases/README.md) as hostile cpu candidates.
#
# Each tests/cases/NAME/ holds case.json and (unless "candidate" names another
# source) candidate.c. case.json fields:
#
#   "task"            task directory, relative to the repo root (required).
#   "verdict"         the expected verdict: a name ("ok"), a list of acceptable
#                     names (["incorrect", "rejected_cheat"]), or "any" (only
#                     the other checks matter: survival, secrets, leftovers).
#   "detail_contains" optional substring the detail must hold (for every
#                     acceptable verdict; leave it out when they differ).
#   "speedup_max"     optional: when the verdict is ok, the reported speedup
#                     must be <= this (an attack that can at worst run at its
#                     true cost passes only at that cost).
#   "speedup_min"     optional: when the verdict is ok, speedup >= this.
#                     A speed bound missed on timing the judge flagged noisy
#                     (a shape's cv > 0.10) is run again, up to 3 tries.
#   "seeds"           optional list of --seed values (default [7]); the case is
#                     run once per seed and every run must meet the
#                     expectation.
#   "timeout"         optional seconds, passed as --timeout. The whole
#                     kfarm-worker run is also bounded from outside: 300 s, or
#                     3 * timeout + 60 s when a timeout is given (a worker
#                     that a candidate stopped or hung is killed and fails).
#   "env"             optional {NAME: value} added to kfarm-worker's env.
#   "defines"         optional {NAME: value} tunables, --define NAME=VALUE.
#   "candidate"       optional source path relative to the repo root, instead
#                     of this folder's candidate.c: one attack's code serving
#                     several cases through "defines".
#   "secrets"         optional, true: before the run a random fleet key is
#                     written to /tmp/kfarm-case-secrets/fleet.key (folder
#                     0700, file 0600; candidates know this fixed path) and
#                     kfarm-worker gets KFARM_FLEET_KEY_FILE=<that path> and
#                     OPENAI_API_KEY=<random> in its environment. After the
#                     run neither secret -- the random part, raw or
#                     hex-encoded -- may appear anywhere in the --json output
#                     (verdict, detail, metrics, child output, compile log)
#                     or on stderr. The key file is removed after the case.
#   "forbid_output"   optional list of strings that must not appear in the
#                     --json output or on stderr (a candidate prints a marker
#                     when an attack step worked, e.g. "I5-FOUND").
#   "verdict_if_cpu_lacks"
#                     optional {cpu flag: verdict (name or list)}: when
#                     /proc/cpuinfo lacks the flag ("avx512f"), that verdict
#                     is expected instead of "verdict" (I15).
#   "task_dir_valid"  optional, false: the *task* is broken (I11). Expected
#                     contract: `kfarm-worker eval` refuses the task before
#                     judging any candidate -- exit status 2, nothing on
#                     stdout (no verdict), exactly one line on stderr that
#                     contains "detail_contains" (the reason).
#
# Every other case runs `kfarm-worker eval TASK candidate.c --quick --json
# --seed S` and must exit 0 (the worker survived the candidate) with an
# acceptable verdict, the detail substring, and the speedup bounds. After
# every run no process named "kfcase-daemon" that started during the run may
# be left (I10's candidate names its daemon so; survivors fail the case and
# are then killed by pid).
# Then B2: a build that fails because the compiler is missing is
# infra_error and is not cached; after the "fix" the same source is rebuilt
# (cache miss), and only then cached.
#
# Env: KFARM_BIN (build dir holding kfarm-worker), KFARM_SRC (repo root).
# Optional: CASES="good hang" to run a subset (case folder names; "b2" and
# "usage" name the fixed checks at the end). CASES_TIMED=1 runs only the
# cases with a speedup bound, CASES_TIMED=0 only the others and the fixed
# checks (ctest runs them as two tests: the first alone on the machine).
set -u
SRC=${KFARM_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
BIN=${KFARM_BIN:-$SRC/build}
WORKER=$BIN/kfarm-worker
[ -x "$WORKER" ] || { echo "run_cases: $WORKER not found (set KFARM_BIN)"; exit 2; }
command -v python3 >/dev/null || { echo "run_cases: python3 needed"; exit 2; }

TMP=$(mktemp -d "${TMPDIR:-/tmp}/kfarm-cases.XXXXXX")
SECRETS_DIR=/tmp/kfarm-case-secrets
made_secrets=0
trap 'rm -rf "$TMP"; [ "$made_secrets" = 1 ] && rm -rf "$SECRETS_DIR"' EXIT
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

# check NAME OUT_JSON RC WANT_VERDICT WANT_DETAIL SECONDS (the fixed checks below)
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

# The case logic (tests/cases/cases.py): `spec CASE_JSON` prints shell
# assignments for the runner; `judge CASE_JSON OUT ERR RC LABEL SECS
# [SECRETS_FILE]` prints one ok/FAIL line and exits 0 on pass.
CASES_PY=$SRC/tests/cases/cases.py

# Processes a candidate left behind (I10): they must all be gone once
# kfarm-worker has returned. `leftovers T0` prints the pids (after a short
# grace) of live processes named kfcase-daemon that started at or after T0
# (clock ticks since boot, as in /proc/PID/stat), i.e. during this case --
# never another run's on a shared machine. Zombies do not count: they are
# dead, only not reaped (in a container whose init never reaps, they stay).
TICKS=$(getconf CLK_TCK 2>/dev/null || echo 100)
now_ticks() { awk -v t="$TICKS" '{printf "%d\n", $1 * t}' /proc/uptime; }
live_daemons() {
    local t0=$1 pid st
    for pid in $(pgrep -x kfcase-daemon 2>/dev/null); do
        st=$(awk -v t0="$t0" '$3 != "Z" && $3 != "X" && $22 + 1 >= t0 {print "live"}' "/proc/$pid/stat" 2>/dev/null)
        [ "$st" = live ] && printf '%s ' "$pid"
    done
}
leftovers() {
    local pids
    for _ in 1 2 3 4 5 6 7 8 9 10; do
        pids=$(live_daemons "$1")
        [ -z "$pids" ] && return 0
        sleep 0.2
    done
    echo "$pids"
}

# new_secrets FILE: a fresh fleet key at the fixed path, an LLM key, and the
# random parts of both written to FILE for the leak check.
new_secrets() {
    local fleet llm
    fleet=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')
    llm=$(od -An -tx1 -N20 /dev/urandom | tr -d ' \n')
    rm -rf "$SECRETS_DIR"
    made_secrets=1
    (umask 077 && mkdir -p "$SECRETS_DIR" && printf 'kfcase-fleet-%s\n' "$fleet" >"$SECRETS_DIR/fleet.key")
    chmod 0700 "$SECRETS_DIR"; chmod 0600 "$SECRETS_DIR/fleet.key"
    printf 'fleet-key %s\nllm-key %s\n' "$fleet" "$llm" >"$1"
    OPENAI_KEY_VALUE="sk-kfcase-$llm"
}

start_all=$(date +%s)
for dir in "$SRC"/tests/cases/*/; do
    name=$(basename "$dir")
    [ -f "$dir/case.json" ] || continue
    if [ -n "${CASES:-}" ] && [[ " $CASES " != *" $name "* ]]; then continue; fi
    # CASES_TIMED=1: only the cases that bound a speedup (they need a quiet
    # machine); CASES_TIMED=0: only the others (they may share it)
    if [ -n "${CASES_TIMED:-}" ]; then
        timed=0
        grep -q '"speedup_m\(in\|ax\)"' "$dir/case.json" && timed=1
        [ "$timed" = "$CASES_TIMED" ] || continue
    fi
    spec_txt=$(python3 "$CASES_PY" spec "$dir/case.json") || {
        echo "FAIL $name: unreadable case.json"; fail=$((fail + 1)); failed+=("$name"); continue; }
    # sets task, cand, to, outer, seeds, secrets, task_invalid and the arrays envs, defs
    task="" cand="" to="" outer=300 seeds=7 secrets="" envs=() defs=()
    eval "$spec_txt"
    src=$dir/candidate.c
    [ -n "$cand" ] && src=$SRC/$cand
    secfile=""
    senv=()
    if [ -n "$secrets" ]; then
        secfile=$TMP/$name.secrets
        new_secrets "$secfile"
        senv=("KFARM_FLEET_KEY_FILE=$SECRETS_DIR/fleet.key" "OPENAI_API_KEY=$OPENAI_KEY_VALUE")
    fi
    nseeds=$(wc -w <<<"$seeds")
    for seed in $seeds; do
        label=$name
        [ "$nseeds" -gt 1 ] && label="${name}[seed $seed]"
        # one compile cache for all cases: the task's reference and baseline build once
        args=(eval "$SRC/$task" "$src" --quick --json --seed "$seed" --work-dir "$TMP/work"
              --cache-dir "$TMP/cases-cache")
        for d in "${defs[@]}"; do args+=(--define "$d"); done
        [ -n "$to" ] && args+=(--timeout "$to")
        out=$TMP/$name.$seed.json
        tick0=$(now_ticks)
        # up to 3 tries while a speed bound is missed on timing the judge
        # flagged noisy (cases.py exit 3); the last such try is a failure
        for try in 1 2 3; do
            t0=$(date +%s.%N)
            env "${envs[@]}" "${senv[@]}" timeout -k 10 "$outer" "$WORKER" "${args[@]}" >"$out" 2>"$out.err"
            rc=$?
            secs=$(python3 -c "print(f'{$(date +%s.%N) - $t0:.1f}')")
            verdict=0
            python3 "$CASES_PY" judge "$dir/case.json" "$out" "$out.err" "$rc" "$label" "$secs" $secfile ||
                verdict=$?
            [ "$verdict" = 3 ] || break
        done
        if [ "$verdict" = 0 ]; then
            pass=$((pass + 1))
        else
            fail=$((fail + 1)); failed+=("$label")
        fi
        left=$(leftovers "$tick0")
        if [ -n "$left" ]; then
            echo "FAIL $label: procs_left: process(es) named kfcase-daemon outlived the evaluation (pids $left)"
            fail=$((fail + 1)); failed+=("$label:procs_left")
            # shellcheck disable=SC2086
            kill -KILL $left 2>/dev/null
        fi
    done
    [ -n "$secrets" ] && rm -rf "$SECRETS_DIR"
done

# ---- B2: worker-side build failures are infra_error and never cached ----
if [ "${CASES_TIMED:-0}" = 0 ] && { [ -z "${CASES:-}" ] || [[ " $CASES " == *" b2 "* ]]; }; then
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
if [ "${CASES_TIMED:-0}" = 0 ] && { [ -z "${CASES:-}" ] || [[ " $CASES " == *" usage "* ]]; }; then
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
        # a well-formed credential, so the device check is what refuses
        (umask 077; echo "kfarm-worker-credential v2 usage-w $(printf '0%.0s' $(seq 64))" >"$TMP/usage.cred")
        timeout 10 "$WORKER" run --credential "$TMP/usage.cred" \
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
