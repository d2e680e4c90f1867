#!/usr/bin/env python3
"""What tracing costs, counted: `agent-benchmark --instructions` (instructions and allocations per event and per
request of each side, callgrind) three times in one run —

  off       MQTT 3.1.1, no tracer (what a user gets by default)
  mqtt5     MQTT 5, no tracer (the protocol tracing needs, alone)
  otel      MQTT 5 and swift-otel bootstrapped in every role as `coaty` does it: OTLP/HTTP export to a local sink,
            `parentbased_traceidratio` sampling at RATIO (default 0.01)

and prints the ratios otel/off and otel/mqtt5 per row. The sink is a small HTTP server on loopback that answers every
POST and counts the spans' bytes it received (so the export's work is real and nothing waits on a dead endpoint).

  python3 Benchmarks/Tracing/instructions.py PATH/TO/agent-benchmark [--ratio 0.01] [--events 2000] [--round-trips 100]
"""
import argparse, http.server, json, os, subprocess, sys, threading


class Sink(http.server.BaseHTTPRequestHandler):
    posts = 0
    received = 0

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        Sink.posts += 1
        Sink.received += len(body)
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


def run(bench, events, round_trips, environment):
    command = [bench, "--instructions", "--json", "--instruction-events", str(events),
               "--instruction-round-trips", str(round_trips), "--instruction-baseline", "0"]
    done = subprocess.run(command, env={**os.environ, **environment}, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"agent-benchmark --instructions failed ({done.returncode}):\n{done.stderr[-4000:]}")
    report = json.loads(done.stdout)
    return {row["scenario"]: row["ours"] for row in report["results"]}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("bench")
    parser.add_argument("--ratio", default="0.01")
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--round-trips", type=int, default=100)
    args = parser.parse_args()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Sink)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    endpoint = f"http://127.0.0.1:{server.server_address[1]}/v1/traces"
    configurations = {
        "off": {},
        "mqtt5": {"COATY_MQTT_VERSION": "5"},
        "otel": {
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": endpoint,
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
            "OTEL_TRACES_SAMPLER": "parentbased_traceidratio",
            "OTEL_TRACES_SAMPLER_ARG": args.ratio,
            # Export at the role's end only: a timed export would make the count depend on the run's duration (under
            # callgrind tens of times longer), not on its events; the export itself (n × ratio spans) is counted.
            "OTEL_BSP_SCHEDULE_DELAY": "600000",
            "OTEL_LOG_LEVEL": "error",
        },
    }
    results = {}
    for name, environment in configurations.items():
        print(f"counting {name} …", file=sys.stderr, flush=True)
        results[name] = run(args.bench, args.events, args.round_trips, environment)
    print(f"| per unit (ours, callgrind) | off (3.1.1) | MQTT 5 | MQTT 5 + swift-otel {args.ratio} | otel / off | otel / MQTT 5 |")
    print("|---|---:|---:|---:|---:|---:|")
    for row, off in results["off"].items():
        v5, otel = results["mqtt5"].get(row), results["otel"].get(row)
        short = row.split(" (")[0] + (", allocations" if row.endswith("allocations") else ", instructions")
        print(f"| {short} | {off:,.1f} | {v5:,.1f} | {otel:,.1f} | {otel / off:.3f} | {otel / v5:.3f} |")
    print(f"\nsink: {Sink.posts} exports, {Sink.received:,} bytes")


if __name__ == "__main__":
    main()
