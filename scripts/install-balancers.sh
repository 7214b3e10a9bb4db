#!/usr/bin/env bash
# Install the load balancers of the cluster tests (tests/e2e/replicas.rs): HAProxy and nginx, the
# Debian packages `haproxy` and `nginx`.
#
#   scripts/install-balancers.sh
#
# Idempotent and quick when both are on PATH already (nothing is asked of apt then). Otherwise it
# needs root and apt-get (the CI machine runs as root); anywhere else it fails saying what to
# install. The system services are never started: the tests run their own instances, each with a
# config file of its own on free ports (a policy-rc.d refuses every start while dpkg configures
# the packages, and is removed afterwards).
set -euo pipefail

log() { printf '[install-balancers] %s\n' "$*" >&2; }
die() { printf '[install-balancers] ERROR: %s\n' "$*" >&2; exit 1; }

# Debian puts both in /usr/sbin, which a non-login PATH may lack.
export PATH="$PATH:/usr/sbin:/sbin"

if command -v haproxy >/dev/null && command -v nginx >/dev/null; then
    exit 0
fi

[ "$(id -u)" = 0 ] || die "haproxy and nginx are needed and this is not root: install them \
(Debian/Ubuntu: sudo apt-get install haproxy nginx) or run the tests as root"
command -v apt-get >/dev/null || die "haproxy and nginx are needed and apt-get is not here: \
install them with this system's package manager"

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
        -o DPkg::Lock::Timeout=300 haproxy nginx >&2
}
log "apt-get: installing haproxy nginx"
if ! install; then
    log "apt-get: updating the package lists and trying again"
    DEBIAN_FRONTEND=noninteractive apt-get update -q -o DPkg::Lock::Timeout=300 >&2 \
        || die "apt-get update failed"
    install || die "apt-get install haproxy nginx failed"
fi

# Should a service have been started anyway (a system without policy-rc.d support), stop it: the
# tests need neither, and nginx's would hold port 80.
for service in haproxy nginx; do
    if command -v systemctl >/dev/null && systemctl is-active --quiet "$service" 2>/dev/null; then
        systemctl stop "$service" >/dev/null 2>&1 || true
    fi
done

haproxy -v >/dev/null || die "haproxy does not run"
nginx -v 2>/dev/null || die "nginx does not run"
log "haproxy and nginx installed: $(haproxy -v | head -n 1); $(nginx -v 2>&1)"
