#!/usr/bin/env python3
"""Instructions per Query (or Discover, `--kind discover`) answered by the recorder `coaty record` runs, for one or more builds, counted by callgrind.

The recorder (`agent-benchmark recorder`: `coaty record`'s CoatyRecorder on a SQLite file and a manager on Coaty's
defaults, in a process callgrind can run — valgrind 3.19 dies in the CLI's async main) holds the 1000 objects of
`Benchmarks/run coatyjs`'s query scenario and answers the same Query (a property condition, orderBy, take 10) from a
Coaty JS requester (`agent.js query-loop`). Each build's recorder runs under `valgrind --tool=callgrind` twice, for R1
and R2 round trips; instructions per request are (I(R2) - I(R1)) / (R2 - R1), so start-up and shut-down cancel out.
Counts repeat to about 1 % for one binary, where timings on this VM move ±15 %.

  python3 Benchmarks/CoatyJS/query_instructions.py NAME=PATH/TO/agent-benchmark [NAME=PATH ...] [--rounds 20,120]
      [--kind query|discover] [--keep DIR]

`--kind discover`: the Discover by objectId of the coatyjs discover scenario instead of the Query; `--keep DIR` keeps
the callgrind files there (for `callgrind_annotate`).
"""
import argparse, json, os, re, shutil, signal, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run  # noqa: E402  (the coatyjs driver: objects, filter, broker)


def totals(path):
    with open(path) as f:
        for line in f:
            if line.startswith("totals:") or line.startswith("summary:"):
                return int(line.split()[1])
    raise RuntimeError(f"no totals in {path}")


def start_recorder(bench, db, broker, work, name, prefix=(), answers=None):
    command = list(prefix) + [bench, "recorder", "127.0.0.1", str(broker.port), db]
    if answers:
        command += ["--answers", str(answers)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE,
                               stderr=open(os.path.join(work, f"record.{name}.log"), "a"))
    line = process.stdout.readline()
    if b"ready" not in line:
        raise RuntimeError(f"recorder {name} not ready: {line!r}")
    return process


def recorder_instructions(bench, db, broker, rounds, work, name, kind="query", object_id=None):
    out = os.path.join(work, f"callgrind.{name}.{rounds}")
    process = start_recorder(bench, db, broker, work, name,
                             prefix=("valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"), answers=rounds)
    if kind == "discover":
        result = run.js_loop(broker, "discover", rounds, 0, object_id=object_id)
    else:
        result = run.js_loop(broker, "query", rounds, 0, query_filter=run.QUERY_FILTER)
    process.wait(timeout=300)
    return totals(out), result


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("builds", nargs="+", help="NAME=PATH of a coaty binary")
    parser.add_argument("--rounds", default="20,120")
    parser.add_argument("--kind", choices=["query", "discover"], default="query")
    parser.add_argument("--keep", help="a directory to copy the callgrind files to")
    args = parser.parse_args()
    r1, r2 = (int(x) for x in args.rounds.split(","))
    work = tempfile.mkdtemp(prefix="coaty-query-instr-")
    broker = run.Broker(work)
    try:
        objects = os.path.join(work, "objects.json")
        with open(objects, "w") as f:
            made = run.make_objects(1000)
            json.dump(made, f)
        object_id = made[-1]["objectId"]
        # Valgrind 3.19 cannot read the DWARF 5 of Swift 6.3's release builds ("possibly corrupted debuginfo"):
        # count on copies without debug information (the code is the same).
        builds = []
        for name, path in (b.split("=", 1) for b in args.builds):
            stripped = os.path.join(work, f"agent-benchmark-{name}")
            subprocess.run(["objcopy", "--strip-debug", path, stripped], check=True)
            builds.append((name, stripped))
        # Fill one database with the first build, as the benchmark does (a Coaty JS agent advertises).
        base = os.path.join(work, "base.sqlite")
        fill = start_recorder(builds[0][1], base, broker, work, "fill")
        subprocess.run(["node", run.AGENT_JS, "advertise", "--objects", "@" + objects, "--timeout", "600",
                        "--broker", broker.url], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(2)
        fill.send_signal(signal.SIGTERM)
        fill.wait(timeout=60)
        what = "Discover" if args.kind == "discover" else "Query"
        print(f"| build | instructions per {what} answered | I({r1}) | I({r2}) |")
        print("|---|---:|---:|---:|")
        for name, coaty in builds:
            counts = []
            for rounds in (r1, r2):
                db = os.path.join(work, f"{name}-{rounds}.sqlite")
                for suffix in ("", "-wal", "-shm"):
                    if os.path.exists(base + suffix):
                        shutil.copy(base + suffix, db + suffix)
                counts.append(recorder_instructions(coaty, db, broker, rounds, work, name, args.kind, object_id)[0])
                if args.keep:
                    os.makedirs(args.keep, exist_ok=True)
                    shutil.copy(os.path.join(work, f"callgrind.{name}.{rounds}"), args.keep)
            per = (counts[1] - counts[0]) / (r2 - r1)
            print(f"| {name} | {per:,.0f} | {counts[0]:,} | {counts[1]:,} |", flush=True)
    finally:
        broker.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
