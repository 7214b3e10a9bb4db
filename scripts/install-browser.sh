#!/usr/bin/env bash
# Install the browser of the admin page test (tests/e2e/admin_page.rs): Debian's `chromium`,
# driven by npm `playwright-core` (installed with the other peers; Playwright's own browser
# download is not used).
#
#   scripts/install-browser.sh
#
# Idempotent and quick when chromium is on PATH already (nothing is asked of apt then). Otherwise
# it needs root and apt-get (the CI machine runs as root); anywhere else it fails saying what to
# install.
set -euo pipefail

log() { printf '[install-browser] %s\n' "$*" >&2; }
die() { printf '[install-browser] ERROR: %s\n' "$*" >&2; exit 1; }

if command -v chromium >/dev/null; then
    exit 0
fi
[ "$(id -u)" = 0 ] || die "chromium is needed and this is not root: install it \
(Debian/Ubuntu: sudo apt-get install chromium) or run the tests as root"
command -v apt-get >/dev/null || die "chromium is needed and apt-get is not here: \
install it with this system's package manager"

install() {
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
        -o DPkg::Lock::Timeout=300 chromium >&2
}
log "apt-get: installing chromium"
if ! install; then
    log "apt-get: updating the package lists and trying again"
    DEBIAN_FRONTEND=noninteractive apt-get update -q -o DPkg::Lock::Timeout=300 >&2 \
        || die "apt-get update failed"
    install || die "apt-get install chromium failed"
fi
chromium --version >/dev/null 2>&1 || die "chromium does not run"
log "chromium installed: $(chromium --version 2>/dev/null)"
