#!/usr/bin/env bash
# Fleet trust over the real coordinator, PostgreSQL and nanomsg (ipc and tcp
# on loopback), with kf_probe playing the attacker (tests/tools/kf_probe.c):
#  - a second process with a live worker's identity is refused on both sides;
#  - an enrolled worker guessing lease tokens for another worker's lease gets
#    every heartbeat and result refused;
#  - a forged 1000x result from an enrolled, lying worker is disputed by the
#    second worker's evaluation and never named best; the liar's reputation
#    records it; kfarm best/leaderboard rank the confirmed result first;
#  - a captured message replayed after 20,000 newer ones and after a
#    coordinator restart is refused;
#  - unauthenticated 1-8 MiB frames are refused unparsed (their CPU cost is
#    logged; tools/bench measures it);
#  - 2,000 idle TCP connections do not stop a real worker from being served
#    (the coordinator starts with a 1024-file soft limit, as on most hosts).
source "$(dirname "$0")/../lib.sh"
probe() { "$KFARM_BIN/kf_probe" "$@"; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$T_COORD/stat"; }

kf db migrate
port=$((20000 + RANDOM % 20000))
TCP="tcp://127.0.0.1:$port"
ulimit -S -n 1024
start_coordinator --listen "$TCP" --lease-ms 3000
ulimit -S -n "$(ulimit -H -n)"
for w in honest liar mallory; do enroll $w; done

# ---- one identity, one live process ----
start_worker honest
wait_for 30 "SELECT count(*) = 1 FROM workers WHERE id = 'honest'"
rc=0
timeout 60 "$KFARM_BIN/kfarm-worker" run --coordinator "$T_ADDR" --credential "$T_DIR/honest.cred" \
  --work-dir "$T_DIR/honest-clone" --cpu --quick --poll-ms 200 >"$T_DIR/clone.log" 2>&1 || rc=$?
check "a second process with a live identity exits 3" eq "$rc" 3
check "... saying why (worker side)" grep -q "already in use by a live process" "$T_DIR/clone.log"
check "... and the coordinator logs the refusal" grep -q "register refused: worker identity honest" "$T_DIR/coordinator.log"
check "an unknown credential is refused" bash -c "! \"$KFARM_BIN/kfarm-worker\" run --coordinator $T_ADDR --credential /nonexistent --cpu 2>/dev/null"

# ---- a lying worker, guessed tokens ----
kf campaign create tr --task "$KFARM_SRC/tests/tasks/farm_axpy_f32" --strategy tune --target cpu --max-candidates 4
kf campaign start tr
probe "$T_DIR/liar.cred" "$T_ADDR" lie 1000 >"$T_DIR/lie.txt"
check "the liar leased a job and its 1000x result was stored" grep -q ": OK" "$T_DIR/lie.txt"
liar_cand=$(sed -n 's/.*candidate \([0-9]*\):.*/\1/p' "$T_DIR/lie.txt")
wait_for 60 "SELECT count(*) > 0 FROM jobs WHERE state = 'leased' AND worker_id = 'honest'" || true
read -r job lease < <(sql "SELECT id, fencing_token FROM jobs WHERE state = 'leased' AND worker_id = 'honest' LIMIT 1" | tr '|' ' ')
if [ -n "${job:-}" ]; then
  probe "$T_DIR/mallory.cred" "$T_ADDR" forge "$job" "$lease" 100 >"$T_DIR/forge.txt"
  check "100 guessed tokens for another worker's lease: no heartbeat or result accepted" grep -q "forge: OK 0 " "$T_DIR/forge.txt"
  check "... every one refused" grep -Eq "STALE ([0-9]+) REJECTED ([0-9]+)" "$T_DIR/forge.txt"
  check "nothing stored under mallory's name" eq "$(sql "SELECT count(*) FROM evaluations WHERE worker_id = 'mallory'")" 0
else
  check "honest held a lease to forge against" false
fi
kf campaign wait tr --timeout 300
check "campaign finished" eq "$(sql "SELECT state FROM campaigns WHERE name='tr'")" done
check "the forged 1000x result is disputed" eq \
  "$(sql "SELECT confirmation || ' ' || confirmed_by_worker FROM evaluations WHERE worker_id = 'liar' AND is_final")" "disputed honest"
check "the liar's reputation records the dispute" eq "$(sql "SELECT disputes FROM workers WHERE id = 'liar'")" 1
# one dispute between two workers: neither quarantined (which one lies needs
# a third opinion), and kfarm workers says so
check "one peer's dispute quarantines nobody" eq "$(sql "SELECT count(*) FROM workers WHERE quarantined")" 0
kf workers >"$T_DIR/workers.txt"
check "kfarm workers shows the dispute and with whom" grep -q \
  "^liar: 1 verification disputes, 0 agreements (disputed by honest x1)" "$T_DIR/workers.txt"
kf best tr --out "$T_DIR/best.c" 2>"$T_DIR/best.err"
check "kfarm best does not name the liar's candidate" bash -c "! grep -q \"candidate $liar_cand on\" $T_DIR/best.c"
check "kfarm best names a confirmed result and who confirmed it" grep -q "confirmed by worker honest" "$T_DIR/best.c"
kf leaderboard tr --limit 0 --wide >"$T_DIR/lb.txt"
check "leaderboard ranks a confirmed result first" bash -c "grep -E '^ *=?1 ' $T_DIR/lb.txt | head -1 | grep -q 'confirmed by honest'"
check "leaderboard shows the dispute" grep -q "disputed by honest" "$T_DIR/lb.txt"
check "the disputed result is ranked last" bash -c "tail -n +3 $T_DIR/lb.txt | grep -E '^ *=?[0-9]+ ' | tail -1 | grep -q 'disputed by honest'"
check "one final evaluation per job" eq \
  "$(sql "SELECT count(*) FROM jobs j WHERE (SELECT count(*) FROM evaluations e WHERE e.job_id=j.id AND e.is_final) <> 1")" 0

# ---- replays ----
probe "$T_DIR/mallory.cred" "$T_ADDR" capture "$T_DIR/captured.bin" >/dev/null
probe "$T_DIR/mallory.cred" "$T_ADDR" flood 20000 >"$T_DIR/flood.txt"
check "20,000 newer messages served" grep -q "flood: 20000 of 20000" "$T_DIR/flood.txt"
check "a captured message replayed after 20,000 newer ones is refused" \
  bash -c "\"$KFARM_BIN/kf_probe\" - $T_ADDR replay $T_DIR/captured.bin | grep -q 'notice: replayed'"
kill -TERM "$T_COORD"; wait "$T_COORD" 2>/dev/null || true
start_coordinator --listen "$TCP" --lease-ms 3000
sleep 1
check "... and after a coordinator restart" \
  bash -c "\"$KFARM_BIN/kf_probe\" - $T_ADDR replay $T_DIR/captured.bin | grep -q 'notice: replayed'"

# ---- unauthenticated big frames ----
t0=$(cpu_ticks)
probe - "$T_ADDR" bigframe 20 $((8 * 1024 * 1024)) >/dev/null
# Each 1 MiB refusal may wait up to 5 s: a loaded CI host once answered one
# later than 150 ms, and the REQ socket then dropped it as unanswered.
probe - "$T_ADDR" bigframe 200 $((1024 * 1024)) 5000 >"$T_DIR/big.txt"
t1=$(cpu_ticks)
us=$(( (t1 - t0) * 1000000 / $(getconf CLK_TCK) / 220 ))
# Its CPU cost is a number for tools/bench (bench_wire), not a pass/fail
# criterion here: a loaded CI host read 500 us for what costs ~100 us alone.
# What a user relies on: every frame is refused unparsed (the 1 MiB ones
# answered with a notice, none of them stored or served) and the
# coordinator goes on serving (checked below).
log "coordinator CPU per unauthenticated 1-8 MiB frame: ${us} us (not a pass/fail criterion)"
check "unauthenticated 1 MiB frames are each answered with a refusal ($(cat "$T_DIR/big.txt"))" grep -q "bigframe sent 200, answered 200" "$T_DIR/big.txt"

# ---- idle connections ----
"$KFARM_BIN/kf_probe" - "$TCP" idle 2000 60 >"$T_DIR/idle.txt" &
T_PIDS+=($!)
# the probe says how many it opened once it has tried them all: wait for
# that line (a loaded host took over 3 s to accept 2,000 connections), then
# hold them while a real worker registers
for _ in $(seq 300); do grep -q "idle connections open:" "$T_DIR/idle.txt" && break; sleep 0.2; done
check "2,000 idle connections are open ($(cat "$T_DIR/idle.txt"))" grep -q "open: 2000" "$T_DIR/idle.txt"
enroll late
start_worker late --coordinator "$TCP"
check "a real worker is still served (registers over tcp)" \
  wait_for 60 "SELECT count(*) = 1 FROM workers WHERE id = 'late'"
finish
