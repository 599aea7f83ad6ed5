#!/bin/bash
# The trailers-turn probe across two processes (docs/contributing/cpu-profile.md): a node:http2
# server answering in one of several patterns (server.mjs: trailers, hack, hack2, endstream,
# trailersonly) pinned on CPU 0, one client doing N sequential calls on CPU 1. Prints the
# client's p50/p90 and the server's CPU µs per call (/proc, 10 ms ticks: use N ≥ 8000).
#   bash bench/trailers-turn/pair.sh MODE N        (from the repository root, node 24 on PATH)
set -eu
mode=$1; n=$2
dir=$(mktemp -d)
taskset -c 0 node --expose-internals bench/trailers-turn/server.mjs "$mode" > "$dir/srv.out" 2>&1 &
spid=$!
trap 'kill $spid 2>/dev/null || true; rm -rf "$dir"' EXIT
port=""
for _ in $(seq 50); do port=$(grep -o '[0-9]\+' "$dir/srv.out" | head -1 || true); [ -n "$port" ] && break; sleep 0.1; done
s0=$(awk '{print $14+$15}' /proc/$spid/stat)
r=$(taskset -c 1 node bench/trailers-turn/client.mjs "$port" "$n")
s1=$(awk '{print $14+$15}' /proc/$spid/stat)
echo "$mode $r srv_cpu_us_per_call=$(( (s1-s0)*10000/n ))"
