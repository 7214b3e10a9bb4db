#!/bin/sh
# Run a Python MCP server from PyPI over stdio, like `uvx`, with nothing installed globally:
#   sh scripts/pypi-run.sh PACKAGE==VERSION MODULE [ARGS...]
# The package goes into a cached venv (~/.cache/mcpmux/venvs/PACKAGE==VERSION) on first use.
# Everything the installer prints goes to stderr: stdout belongs to the MCP protocol.
set -eu
spec="$1"; module="$2"; shift 2
cache="${XDG_CACHE_HOME:-$HOME/.cache}/mcpmux/venvs/$spec"
if [ ! -x "$cache/bin/python" ] || [ ! -f "$cache/.ready" ]; then
  echo "pypi-run: installing $spec into $cache" >&2
  rm -rf "$cache"
  python3 -m venv "$cache" >&2
  "$cache/bin/pip" install --quiet --disable-pip-version-check "$spec" >&2
  touch "$cache/.ready"
fi
exec "$cache/bin/python" -m "$module" "$@"
