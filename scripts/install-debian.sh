#!/usr/bin/env bash
# Install the Debian packages a test suite drives for real, each given as PACKAGE=COMMAND[,COMMAND]:
#
#   scripts/install-debian.sh haproxy=haproxy nginx=nginx      # the cluster tests' balancers
#   scripts/install-debian.sh prometheus=prometheus,promtool   # the metrics tests
#   scripts/install-debian.sh chromium=chromium                # the admin page test
#
# Idempotent and quick when every command is on PATH already (nothing is asked of apt then).
# Otherwise it needs root and apt-get (the CI machine runs as root); anywhere else it fails saying
# what to install. A package's system service is never started: the tests run their own
# instances with configs of their own on free ports (a policy-rc.d refuses every start while dpkg
# configures the packages, and is removed afterwards).
set -euo pipefail

log() { printf '[install-debian] %s\n' "$*" >&2; }
die() { printf '[install-debian] ERROR: %s\n' "$*" >&2; exit 1; }

[ "$#" -gt 0 ] || die "usage: scripts/install-debian.sh PACKAGE=COMMAND[,COMMAND]..."
# Debian puts some of them in /usr/sbin, which a non-login PATH may lack.
export PATH="$PATH:/usr/sbin:/sbin"

missing=()
for spec in "$@"; do
    package="${spec%%=*}"
    commands="${spec#*=}"
    [ -n "$package" ] && [ "$commands" != "$spec" ] || die "not PACKAGE=COMMAND: $spec"
    IFS=',' read -r -a names <<< "$commands"
    for name in "${names[@]}"; do
        if ! command -v "$name" >/dev/null; then
            missing+=("$package")
            break
        fi
    done
done
[ "${#missing[@]}" -gt 0 ] || exit 0

[ "$(id -u)" = 0 ] || die "${missing[*]} needed and this is not root: install them \
(Debian/Ubuntu: sudo apt-get install ${missing[*]}) or run the tests as root"
command -v apt-get >/dev/null || die "${missing[*]} needed and apt-get is not here: \
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
        -o DPkg::Lock::Timeout=300 "${missing[@]}" >&2
}
log "apt-get: installing ${missing[*]}"
if ! install; then
    log "apt-get: updating the package lists and trying again"
    DEBIAN_FRONTEND=noninteractive apt-get update -q -o DPkg::Lock::Timeout=300 >&2 \
        || die "apt-get update failed"
    install || die "apt-get install ${missing[*]} failed"
fi

# Should a service have been started anyway (a system without policy-rc.d support), stop it: the
# tests run their own, and a system one would hold its port (nginx 80, prometheus 9090).
for package in "${missing[@]}"; do
    if command -v systemctl >/dev/null && systemctl is-active --quiet "$package" 2>/dev/null; then
        systemctl stop "$package" >/dev/null 2>&1 || true
    fi
done

for spec in "$@"; do
    IFS=',' read -r -a names <<< "${spec#*=}"
    for name in "${names[@]}"; do
        command -v "$name" >/dev/null || die "${spec%%=*} installed, but $name is not on PATH"
    done
done
log "installed: ${missing[*]}"
