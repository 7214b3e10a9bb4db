#!/bin/sh
# Run a Python MCP server from PyPI over stdio, like `uvx`, with nothing installed globally:
#   sh scripts/pypi-run.sh PACKAGE==VERSION MODULE [ARGS...]
# The package goes into a cached venv (~/.cache/mcpmux/venvs/PACKAGE==VERSION) on first use.
# Everything the installer prints goes to stderr: stdout belongs to the MCP protocol.
#
# An install is made in PACKAGE==VERSION.partial beside the venv and renamed into place only once
# complete, so the venv a server runs from is never half-made and never deleted. An install that
# was killed midway (a timeout, a restart, a pod stopped) is resumed by the next start, not thrown
# away; only if resuming it fails is it made afresh. Starts that find no venv install one at a
# time (flock on PACKAGE==VERSION.lock): the others wait for it and then run the venv it made.
set -eu
spec="$1"; module="$2"; shift 2
root="${XDG_CACHE_HOME:-$HOME/.cache}/mcpmux/venvs"
cache="$root/$spec"

ready() { [ -x "$cache/bin/python" ] && [ -f "$cache/.ready" ]; }

# Make a venv in $1, or complete the one there (`venv` keeps what it finds; pip installs what is
# missing), with $spec installed.
install_into() {
  if [ ! -x "$1/bin/python" ] || ! "$1/bin/python" -m pip --version >/dev/null 2>&1; then
    python3 -m venv "$1" >&2
  fi
  "$1/bin/python" -m pip install --quiet --disable-pip-version-check "$spec" >&2
}

if ! ready; then
  mkdir -p "$root"
  if command -v flock >/dev/null 2>&1; then
    exec 9>"$cache.lock"
    if ! flock -n 9; then
      echo "pypi-run: another start is installing $spec; waiting for it" >&2
      flock 9
    fi
    partial="$cache.partial"
  else
    # No flock: each start installs on its own; the first to finish is kept.
    partial="$cache.partial.$$"
  fi
  if ! ready; then
    if [ -d "$cache" ] && [ ! -d "$partial" ]; then
      # Left by an older pypi-run that installed in place: resume it.
      mv "$cache" "$partial"
    fi
    if [ -d "$partial" ]; then
      echo "pypi-run: resuming the unfinished install of $spec in $partial" >&2
    else
      echo "pypi-run: installing $spec into $cache" >&2
    fi
    if ! install_into "$partial"; then
      echo "pypi-run: the unfinished install of $spec did not complete; installing it afresh" >&2
      rm -rf "$partial"
      install_into "$partial"
    fi
    touch "$partial/.ready"
    if [ -d "$cache" ] && ! ready; then
      # A half-made venv of an older pypi-run, while this install was resumed from $partial.
      rm -rf "$cache"
    fi
    # A rename: the venv appears whole. (Its own scripts name the folder it was made in; the
    # server runs as `bin/python -m MODULE`, which finds its venv wherever that is.)
    if ready; then rm -rf "$partial"; else mv "$partial" "$cache"; fi
  fi
  exec 9>&-
fi
exec "$cache/bin/python" -m "$module" "$@"
