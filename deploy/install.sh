#!/usr/bin/env bash
# deploy/install.sh -- install kernelfarm binaries and systemd units on this host.
#
#   deploy/install.sh worker [GPU...]   worker units (default: one per visible GPU, else cpu)
#   deploy/install.sh coordinator       coordinator unit (PostgreSQL is yours to provide)
#
# Builds with tools/install-deps + cmake if build/ has no binaries, copies them
# to /usr/local/bin, creates the kfarm user, /etc/kfarm and /var/lib/kfarm,
# and installs (but does not overwrite) the example env files. Run as root.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
role=${1:?usage: deploy/install.sh worker [GPU...] | coordinator}
shift || true
[ "$(id -u)" = 0 ] || { echo "install.sh: run as root" >&2; exit 1; }
if [ ! -x "$root/build/kfarm-worker" ]; then
  "$root/tools/install-deps"
  cmake -S "$root" -B "$root/build" -DCMAKE_BUILD_TYPE=Release
  cmake --build "$root/build" -j"$(nproc)"
fi
install -m 0755 "$root/build/kfarm" "$root/build/kfarm-coordinator" "$root/build/kfarm-worker" \
  "$root/build/kfarm-runner" /usr/local/bin/
# the runner that loads candidates on GPUs (built when the CUDA Toolkit is present)
[ -x "$root/build/kfarm-runner-cuda" ] && install -m 0755 "$root/build/kfarm-runner-cuda" /usr/local/bin/
install -d -m 0755 /usr/local/bin/include
install -m 0644 "$root/abi/kf_abi.h" /usr/local/bin/include/kf_abi.h
id kfarm >/dev/null 2>&1 || useradd --system --home /var/lib/kfarm --shell /usr/sbin/nologin kfarm
install -d -o kfarm -m 0750 /var/lib/kfarm
install -d -m 0755 /etc/kfarm
case "$role" in
  coordinator)
    [ -f /etc/kfarm/coordinator.env ] || install -m 0640 "$root/deploy/coordinator.env.example" /etc/kfarm/coordinator.env
    install -m 0644 "$root/deploy/kfarm-coordinator.service" /etc/systemd/system/
    systemctl daemon-reload
    echo "edit /etc/kfarm/coordinator.env, then: systemctl enable --now kfarm-coordinator; issue each worker its credential with: kfarm worker add NAME --out NAME.cred" ;;
  worker)
    [ -f /etc/kfarm/worker.env ] || install -m 0640 "$root/deploy/worker.env.example" /etc/kfarm/worker.env
    install -m 0644 "$root/deploy/kfarm-worker@.service" /etc/systemd/system/
    systemctl daemon-reload
    units=("$@")
    if [ ${#units[@]} -eq 0 ]; then
      n=$(nvidia-smi -L 2>/dev/null | wc -l || echo 0)
      if [ "$n" -gt 0 ]; then units=($(seq 0 $((n - 1)))); else units=(cpu); fi
    fi
    install -d -o kfarm -m 0700 /etc/kfarm/credentials
    echo "edit /etc/kfarm/worker.env, put each unit's credential (kfarm worker add \$(hostname)-N --out N.cred, run where the database is) in /etc/kfarm/credentials/N.cred (owner kfarm, mode 0600), then: systemctl enable --now$(printf ' kfarm-worker@%s' "${units[@]}")" ;;
  *) echo "install.sh: unknown role '$role'" >&2; exit 2 ;;
esac
