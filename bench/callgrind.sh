#!/usr/bin/env bash
# Instructions mcpmux executes per relayed `tools/call`, counted by callgrind: a stable figure
# (unlike wall time it does not move with the machine's load) to compare builds with.
#   bench/callgrind.sh [http|stdio] [CALLS] [SESSIONS]
#   AUTH_RULES=N bench/callgrind.sh ...   the same behind [auth] (an API key) and, for N > 0, N
#                                         [[policy]] rules (the last one applies), to see their cost
#   BENCH_RUST_LOG=info bench/callgrind.sh ...   mcpmux's RUST_LOG (default warn; info writes the
#                                         access log, one line per call, to target/callgrind/*.log)
#   TEAM=1 bench/callgrind.sh ...         what a team runs (bench/cost.py's "team" set-up): an API
#                                         key, 3 [[policy]] rules (the last one applies), the access
#                                         log at info, OTLP traces to bench/otlp_sink.py (on core 1,
#                                         accepts and drops; the spans it got are printed) and a
#                                         [cluster] key; profile in target/callgrind/<transport>-team.out
#   BIN_DIR=DIR bench/callgrind.sh ...    measure DIR/mcpmux (another build: a checkout's release
#                                         binary, to compare builds) instead of building; the driver
#                                         is still target/release/mcpmux-bench
# Builds the `profiling` binaries (the release build with line tables: Cargo.toml's
# [profile.profiling]; plain release builds carry no debug info), starts bench/rawecho.mjs (over
# HTTP on core 1, or as mcpmux's stdio child), runs mcpmux under valgrind, warms up, then counts
# only the measured calls. The profile is kept as target/callgrind/<transport>.out for
# `callgrind_annotate --inclusive=yes`.
set -euo pipefail
cd "$(dirname "$0")/.."
transport=${1:-http}
calls=${2:-500}
sessions=${3:-4}
command -v valgrind >/dev/null || { echo "valgrind is needed" >&2; exit 1; }
if [ -n "${BIN_DIR:-}" ]; then
  bin=$BIN_DIR
  driver_bin=target/release
else
  cargo build --profile profiling --locked --bins >&2
  bin=target/profiling
  driver_bin=$bin
fi
dir=target/callgrind
mkdir -p "$dir"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
port=$(free_port)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
config="$dir/$transport.toml"
printf '[gateway]\nlisten = "127.0.0.1:%s"\n\n[servers.e]\n' "$port" > "$config"
case "$transport" in
  http)
    echo_port=$(free_port)
    PORT=$echo_port taskset -c 1 node bench/rawecho.mjs http 2>/dev/null &
    pids+=($!)
    printf 'url = "http://127.0.0.1:%s/mcp"\n' "$echo_port" >> "$config" ;;
  stdio)
    printf 'command = "node"\nargs = ["%s/bench/rawecho.mjs", "stdio"]\n' "$PWD" >> "$config" ;;
  *) echo "usage: $0 [http|stdio] [CALLS] [SESSIONS]" >&2; exit 2 ;;
esac
bearer=()
if [ -n "${TEAM:-}" ]; then
  # The same configuration as bench/cost.py's mux_toml with every feature.
  otlp_port=$(free_port)
  taskset -c 1 python3 bench/otlp_sink.py "$otlp_port" 2>/dev/null &
  pids+=($!)
  printf '\n[auth]\n[[auth.api_keys]]\nname = "bench"\nkey = "bench-key-0123456789abcdef"\ngroups = ["bench"]\n' >> "$config"
  for i in 1 2; do
    printf '\n[[policy]]\ngroups = ["team-%s"]\nallow = ["e__*", "other%s__*"]\ndeny = ["e__secret-*"]\n' "$i" "$i" >> "$config"
  done
  printf '\n[[policy]]\ngroups = ["bench"]\nallow = ["e__*", "mcpmux://e/*"]\ndeny = ["e__trigger-*", "*admin*"]\n' >> "$config"
  printf '\n[telemetry]\notlp_endpoint = "http://127.0.0.1:%s"\nservice_name = "mcpmux-bench"\n' "$otlp_port" >> "$config"
  printf '\n[cluster]\nkey = "%s"\nadvertise = "http://127.0.0.1:%s"\n' "$("$bin/mcpmux" keygen)" "$port" >> "$config"
  name="$transport-team"
  mv "$config" "$dir/$name.toml"
  config="$dir/$name.toml"
  "$bin/mcpmux" check-config --config "$config" >&2
  bearer=(--bearer bench-key-0123456789abcdef)
  BENCH_RUST_LOG=${BENCH_RUST_LOG:-info}
  transport_label="$transport+team"
elif [ -n "${AUTH_RULES:-}" ]; then
  printf '\n[auth]\n[[auth.api_keys]]\nname = "bench"\nkey = "bench-key-0123456789"\ngroups = ["bench"]\n' >> "$config"
  for i in $(seq "$AUTH_RULES"); do
    if [ "$i" -lt "$AUTH_RULES" ]; then
      printf '\n[[policy]]\ngroups = ["team-%s"]\nallow = ["e__*", "other%s__*"]\ndeny = ["e__secret-*"]\n' "$i" "$i" >> "$config"
    else
      printf '\n[[policy]]\ngroups = ["bench"]\nallow = ["x__*", "e__ech?", "mcpmux://e/*"]\ndeny = ["e__trigger-*", "*admin*"]\n' >> "$config"
    fi
  done
  bearer=(--bearer bench-key-0123456789)
  transport_label="$transport+auth(${AUTH_RULES} rules)"
else
  transport_label="$transport"
fi
name=${name:-$transport}
out="$dir/$name.out"
# valgrind writes its dumps (and, at exit, the whole run) beside `raw`; only the dump of the
# measured calls becomes `out`, so the exit cannot overwrite it.
raw="$dir/$name.raw"
rm -f "$out" "$raw" "$raw".*
RUST_LOG=${BENCH_RUST_LOG:-warn} valgrind --tool=callgrind --callgrind-out-file="$raw" \
  "$bin/mcpmux" serve --config "$config" 2>"$dir/$name.log" &
vg=$!
pids+=($vg)
for _ in $(seq 240); do
  curl -sf -o /dev/null "http://127.0.0.1:$port/readyz" && break
  sleep 0.5
done
driver=(taskset -c 1 "$driver_bin/mcpmux-bench" "http://127.0.0.1:$port/mcp" --tool e__echo --json "${bearer[@]}")
"${driver[@]}" --sessions 1 --calls 50 --warmup 0 >/dev/null
callgrind_control -z "$vg" >/dev/null
result=$("${driver[@]}" --sessions "$sessions" --calls "$calls" --warmup 0 | tail -1)
callgrind_control -d "$vg" >/dev/null
sleep 1
dump=$(ls -t "$raw".* | head -1)
mv "$dump" "$out"
total=$(callgrind_annotate "$out" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
n=$((calls * sessions))
spans=""
if [ -n "${TEAM:-}" ]; then
  sleep 1.5  # spans leave in batches at least every second
  spans=$(curl -sf "http://127.0.0.1:$otlp_port/stats" || true)
fi
python3 - "$transport_label" "$total" "$n" "$result" "$spans" <<'EOF'
import json, sys
transport, total, n, result = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), json.loads(sys.argv[4])
print(f"mcpmux -> {transport}: {total / n:,.0f} instructions per call "
      f"({total:,} for {n} calls; {result['ok']} ok, {result['errors']} errors)")
if sys.argv[5]:
    s = json.loads(sys.argv[5])
    print(f"OTLP receiver: {s['requests']} requests, {s['bytes']:,} bytes, {s['spans']} spans")
EOF
