#!/usr/bin/env bash
# `coaty observe` against `mosquitto_sub` on the same load, in the same run (Benchmarks/run observe).
# One publisher (mosquitto_pub -l, the same N Advertise payloads of ~300 B) sends a burst at full
# speed to a local mosquitto; each subscriber is started first and counts lines behind a fast reader
# (wc -l) and behind a slow one (a pipe drained at RATE lines/s). Reports delivered / sent, the
# throughput (N / time from the first publish to the subscriber's exit) and the ratio ours / C.
# Both subscribers run on the defaults; the broker has max_queued_messages 0 (as "Delivery
# guarantees" recommends for recorders), so neither loses at the broker.
#   Benchmarks/run observe [N] [RATE] [RUNS]
set -euo pipefail
cd "$(dirname "$0")/../.."
n="${1:-100000}"; rate="${2:-20000}"; runs="${3:-3}"
coaty="${COATY:-.build/release/coaty}"
work=$(mktemp -d); trap 'kill $(cat "$work/pid" 2>/dev/null) 2>/dev/null || true; rm -rf "$work"' EXIT
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
printf "listener %s 127.0.0.1\nallow_anonymous true\nmax_queued_messages 0\n" "$port" > "$work/m.conf"
mosquitto -c "$work/m.conf" > "$work/m.log" 2>&1 & echo $! > "$work/pid"
sleep 0.5
python3 - "$n" > "$work/burst" <<'PY'
import sys, uuid
for i in range(int(sys.argv[1])):
    print('{"object":{"objectId":"%s","objectType":"com.example.Bench","coreType":"CoatyObject","name":"n%d","seq":%d,"pad":"%s"}}' % (uuid.uuid4(), i, i, "x" * 150))
PY
cat > "$work/slow.py" <<'PY'
import sys, time
rate = float(sys.argv[1]); n = 0; start = time.time()
for line in sys.stdin:
    n += 1
    if n % 100 == 0:
        d = start + n / rate - time.time()
        if d > 0: time.sleep(d)
print(n)
PY
topic="coaty/3/-/ADV::com.example.Bench/8d3b1e43-1c2b-4bd4-9a8b-2a3c7b2d9f10"
# run NAME READER: starts the subscriber behind READER, publishes, prints "delivered seconds".
run() {
  local who=$1 reader=$2 out="$work/out"
  if [ "$who" = ours ]; then
    ( $coaty observe advertise --object-type com.example.Bench --count "$n" --timeout 300 \
        --broker "mqtt://127.0.0.1:$port" 2>/dev/null | $reader > "$out" ) &
  else
    ( mosquitto_sub -h 127.0.0.1 -p "$port" -t "coaty/3/-/ADV::com.example.Bench/+" -C "$n" -W 300 \
        2>/dev/null | $reader > "$out" ) &
  fi
  local pid=$!
  sleep 1.5  # subscribed (both subscribe within a few ms of connecting)
  local start; start=$(date +%s.%N)
  mosquitto_pub -h 127.0.0.1 -p "$port" -l -t "$topic" < "$work/burst"
  wait $pid
  local end; end=$(date +%s.%N)
  echo "$(tr -d ' ' < "$out") $(echo "$end - $start" | bc -l)"
}
printf "%-12s %-5s %10s %10s %12s\n" reader who delivered sent "msg/s"
for reader in fast slow; do
  [ $reader = fast ] && cmd="wc -l" || cmd="python3 $work/slow.py $rate"
  for i in $(seq "$runs"); do
    for who in ours c; do
      read -r delivered seconds <<< "$(run $who "$cmd")"
      perS=$(echo "$n / $seconds" | bc -l)
      printf "%-12s %-5s %10s %10s %12.0f\n" "$reader" "$who" "$delivered" "$n" "$perS"
      echo "$reader $who $delivered $perS" >> "$work/results"
    done
  done
done
python3 - "$work/results" "$n" <<'PY'
import sys, statistics
rows = [l.split() for l in open(sys.argv[1])]
n = int(sys.argv[2])
for reader in ("fast", "slow"):
    ours = [float(r[3]) for r in rows if r[0] == reader and r[1] == "ours"]
    c = [float(r[3]) for r in rows if r[0] == reader and r[1] == "c"]
    lost = [r for r in rows if r[0] == reader and int(r[2]) != n]
    print(f"{reader} reader: ours {statistics.median(ours):.0f} msg/s, mosquitto_sub {statistics.median(c):.0f} msg/s, "
          f"ratio {statistics.median(ours) / statistics.median(c):.2f} (median of {len(ours)}); "
          f"{'LOST in ' + str(len(lost)) + ' runs' if lost else 'nothing lost'}")
if any(int(r[2]) != n for r in rows): sys.exit(1)
PY
