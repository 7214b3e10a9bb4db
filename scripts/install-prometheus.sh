#!/usr/bin/env bash
# Install Prometheus and promtool for the metrics tests (tests/e2e/metrics.rs): the Debian package
# `prometheus` (2.42 on Debian 12).
#
#   scripts/install-prometheus.sh
#
# Idempotent and quick when both are on PATH already (nothing is asked of apt then). Otherwise it
# needs root and apt-get (the CI machine runs as root); anywhere else it fails saying what to
# install. The system service is never started: the tests run their own instance with a config
# file and a storage folder of its own on a free port (a policy-rc.d refuses every start while
# dpkg configures the package, and is removed afterwards).
set -euo pipefail

log() { printf '[install-prometheus] %s\n' "$*" >&2; }
die() { printf '[install-prometheus] ERROR: %s\n' "$*" >&2; exit 1; }

export PATH="$PATH:/usr/sbin:/sbin"

if command -v prometheus >/dev/null && command -v promtool >/dev/null; then
    exit 0
fi

[ "$(id -u)" = 0 ] || die "prometheus and promtool are needed and this is not root: install them \
(Debian/Ubuntu: sudo apt-get install prometheus) or run the tests as root"
command -v apt-get >/dev/null || die "prometheus is needed and apt-get is not here: \
install it with this system's package manager"

POLICY=/usr/sbin/policy-rc.d
ours=0
if [ ! -e "$POLICY" ]; then
    printf '#!/bin/sh\n# mcpmux tests: do not start services while installing\nexit 101\n' > "$POLICY"
    chmod 755 "$POLICY"
    ours=1
fi
cleanup() { if [ "$ours" = 1 ]; then rm -f "$POLICY"; fi; }
trap cleanup EXIT

install() {
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
        -o DPkg::Lock::Timeout=300 prometheus >&2
}
log "apt-get: installing prometheus"
if ! install; then
    log "apt-get: updating the package lists and trying again"
    DEBIAN_FRONTEND=noninteractive apt-get update -q -o DPkg::Lock::Timeout=300 >&2 \
        || die "apt-get update failed"
    install || die "apt-get install prometheus failed"
fi

# Should the service have been started anyway (a system without policy-rc.d support), stop it:
# the tests run their own, and the system one would hold port 9090.
if command -v systemctl >/dev/null && systemctl is-active --quiet prometheus 2>/dev/null; then
    systemctl stop prometheus >/dev/null 2>&1 || true
fi

prometheus --version >/dev/null 2>&1 || die "prometheus does not run"
promtool --version >/dev/null 2>&1 || die "promtool does not run"
log "prometheus installed: $(prometheus --version 2>&1 | head -n 1)"
