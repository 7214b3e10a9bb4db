#!/usr/bin/env bash
# The whole benchmark comparison in one command: build the release binaries, then bench/run.py
# (installs the pinned peers under target/bench-peers, runs every scenario, writes docs/benchmarks.md).
# bench/run.sh --quick for a short check; --only/--skip SCENARIO,... (see bench/run.sh --help).
set -euo pipefail
cd "$(dirname "$0")/.."
case " $* " in *" -h "*|*" --help "*) exec python3 bench/run.py --help ;; esac
cargo build --release --locked --bins
exec python3 bench/run.py "$@"
