#!/usr/bin/env bash
# Worker credentials over their life (kfarm worker add / --rotate / revoke),
# through the concurrent coordinator: an enrolled credential registers; after
# --rotate the old secret is refused and the new one accepted; after revoke
# the worker is refused with a message that says so, and nothing of the
# refused requests is stored.
source "$(dirname "$0")/../lib.sh"

kf db migrate
start_coordinator
P="$KFARM_BIN/kf_probe"
kf worker add alice --out "$T_DIR/alice.cred" >/dev/null
sleep 1
"$P" "$T_DIR/alice.cred" "$T_ADDR" register >"$T_DIR/r1.txt" 2>&1 || true
check "an enrolled credential registers" grep -q "register OK" "$T_DIR/r1.txt"


kf worker add alice --rotate --out "$T_DIR/alice-new.cred" >/dev/null
"$P" "$T_DIR/alice.cred" "$T_ADDR" register >"$T_DIR/r2.txt" 2>&1 || true
check "after --rotate the old secret is refused" bash -c "! grep -q 'register OK' '$T_DIR/r2.txt'"
check "... by authentication (the coordinator logs the refusal)" \
  grep -q "claims worker alice): authentication failed" "$T_DIR/coordinator.log"
"$P" "$T_DIR/alice-new.cred" "$T_ADDR" register >"$T_DIR/r3.txt" 2>&1 || true
check "after --rotate the new secret is accepted" grep -q "register OK" "$T_DIR/r3.txt"

kf worker revoke alice >/dev/null
"$P" "$T_DIR/alice-new.cred" "$T_ADDR" register >"$T_DIR/r4.txt" 2>&1 || true
check "a revoked credential is refused" bash -c "! grep -q 'register OK' '$T_DIR/r4.txt'"
check "... and the coordinator says why" grep -q "claims worker alice): this worker's credential has been revoked" "$T_DIR/coordinator.log"
finish
