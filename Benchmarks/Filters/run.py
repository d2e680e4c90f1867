#!/usr/bin/env python3
"""Queries of many conditions: time against their number, answered by `coaty record`.

  Benchmarks/run filters [--sizes 1000,3000,10000,30000,100000] [--passes P (default 2)] [--no-postgres]

One mosquitto (its defaults, on a free loopback port) and `coaty record` (release build, its defaults) on SQLite, then
on PostgreSQL (initdb in a temporary directory, its defaults; skipped when PostgreSQL is not installed or with
--no-postgres), holding 20 objects of one object type (`value` 0…19, `name` "Object i"). For each n, a Query of the
object type with n and-ed conditions on one property, as `coaty query --filter -` sends it (read from stdin), in three
shapes:

- `numbers`: `value > -k` for k = 1…n (a numeric comparison: pushed into SQL as a necessary condition);
- `strings`: `name != "other k"` (a string comparison: exact in SQL);
- `mixed`: the two alternating, half each.

Every object matches, so each answer must hold all 20 (checked: a wrong answer fails the run). Reported per backend,
shape and n: the median round trip of the passes (from starting `coaty query` until it printed the Retrieve, so it
includes the CLI's start, about 0.1 s: the `1 condition` row shows it), and the round trip of a one-condition Query
started 0.2 s after the large one while that one is still running (one expensive Query must not hold the others up).
Not a test: no assertion on time.
"""
import argparse, importlib.util, json, os, shutil, subprocess, sys, tempfile, threading, time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "Python"))
from benchsupport import free_port  # noqa: E402
COATY = os.environ.get("COATY", os.path.join(ROOT, ".build", "release", "coaty"))
OBJECT_TYPE = "com.example.bench.Reading"


def load_postgres():
    """The throwaway-PostgreSQL helper of the group benchmark."""
    spec = importlib.util.spec_from_file_location("group_run", os.path.join(ROOT, "Benchmarks", "Group", "run.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.Postgres


def filter_json(shape, n):
    conditions = []
    for k in range(1, n + 1):
        if shape == "numbers" or (shape == "mixed" and k % 2):
            conditions.append(["value", [2, -k]])
        else:
            conditions.append(["name", [8, f"other {k}"]])
    if n == 1:
        return json.dumps({"conditions": conditions[0]})
    return json.dumps({"conditions": {"and": conditions}})


def query(broker, text, timeout=60):
    """Runs `coaty query` with `text` as its filter; returns (seconds, number of objects or None)."""
    start = time.monotonic()
    out = subprocess.run(
        [COATY, "query", "--broker", broker, "--object-types", OBJECT_TYPE, "--filter", "-", "--count", "1",
         "--timeout", str(timeout)], input=text, capture_output=True, text=True)
    seconds = time.monotonic() - start
    lines = [line for line in out.stdout.splitlines() if line.strip()]
    if out.returncode != 0 or len(lines) != 1:
        return seconds, None
    return seconds, len(json.loads(lines[0])["data"]["objects"])


def measure(broker, shape, n, passes):
    big = filter_json(shape, n)
    small = filter_json("numbers", 1)
    rounds, concurrent = [], []
    for _ in range(passes):
        result = {}
        worker = threading.Thread(target=lambda: result.update(big=query(broker, big)))
        worker.start()
        time.sleep(0.2)
        side = query(broker, small, timeout=30) if worker.is_alive() else None
        worker.join()
        seconds, count = result["big"]
        if count != 20:
            sys.exit(f"{shape} n={n}: answered with {count} objects instead of 20 (in {seconds:.2f} s)")
        rounds.append(seconds)
        if side is not None:
            if side[1] != 20:
                sys.exit(f"the Query beside {shape} n={n} was answered with {side[1]} objects instead of 20")
            concurrent.append(side[0])
    rounds.sort()
    concurrent.sort()
    return rounds[len(rounds) // 2], (concurrent[len(concurrent) // 2] if concurrent else None)


def run_backend(name, db, broker, sizes, passes, work):
    log = open(os.path.join(work, f"record-{name}.log"), "w")
    recorder = subprocess.Popen([COATY, "record", "--db", db, "--broker", broker], stdout=subprocess.DEVNULL,
                                stderr=log)
    try:
        objects = [{"objectType": OBJECT_TYPE, "coreType": "CoatyObject", "name": f"Object {i}", "value": i,
                    "objectId": f"00000000-0000-4000-8000-{i:012x}"} for i in range(20)]
        deadline = time.monotonic() + 60
        while True:  # until the recorder is subscribed and has stored them (advertised again: same objectIds)
            subprocess.run([COATY, "advertise", "--broker", broker, "-"], input=json.dumps(objects), check=True,
                           capture_output=True, text=True)
            _, count = query(broker, json.dumps({}), timeout=5)
            if count == 20:
                break
            if time.monotonic() > deadline:
                sys.exit(f"{name}: the recorder did not store the 20 objects (log: {log.name})")
        rows = []
        for shape in ("numbers", "strings", "mixed"):
            for n in [1] + sizes:
                median, beside = measure(broker, shape, n, passes)
                rows.append((name, shape, n, median, beside))
                side = f", one-condition Query beside it {beside:.2f} s" if beside is not None else ""
                print(f"{name} {shape} n={n:,}: {median:.2f} s{side}", flush=True)
        return rows
    finally:
        recorder.terminate()
        recorder.wait(timeout=30)
        log.close()


def main():
    parser = argparse.ArgumentParser(description="CoatyKit Query-size benchmark")
    parser.add_argument("--sizes", default="1000,3000,10000,30000,100000")
    parser.add_argument("--passes", type=int, default=2)
    parser.add_argument("--no-postgres", action="store_true")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    if not os.access(COATY, os.X_OK):
        sys.exit(f"{COATY} missing: swift build -c release --product coaty")
    work = tempfile.mkdtemp(prefix="coaty-filter-bench-")
    port = free_port()
    conf = os.path.join(work, "mosquitto.conf")
    with open(conf, "w") as f:
        f.write(f"listener {port} 127.0.0.1\nallow_anonymous true\n")
    broker = subprocess.Popen(["mosquitto", "-c", conf], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"mqtt://127.0.0.1:{port}"
    pg = None
    try:
        time.sleep(0.3)
        rows = run_backend("SQLite", os.path.join(work, "filters.sqlite"), url, sizes, args.passes, work)
        if not args.no_postgres and os.path.isdir("/usr/lib/postgresql"):
            pg = load_postgres()(work)
            rows += run_backend("PostgreSQL", pg.create("filters"), url, sizes, args.passes, work)
        print()
        print(f"A Query of n and-ed conditions answered by `coaty record` from 20 objects, {os.cpu_count()} cores, "
              f"load average {os.getloadavg()[0]:.2f} (median of {args.passes}; `coaty query`'s start included)")
        print("| backend | conditions | " + " | ".join(f"{n:,}" for n in [1] + sizes) + " |")
        print("|---|---|" + "---:|" * (len(sizes) + 1))
        for backend in dict.fromkeys(r[0] for r in rows):
            for shape in ("numbers", "strings", "mixed"):
                cells = [f"{r[3]:.2f} s" for r in rows if r[0] == backend and r[1] == shape]
                print(f"| {backend} | {shape} | " + " | ".join(cells) + " |")
        beside = [r[4] for r in rows if r[4] is not None]
        if beside:
            print(f"\nA one-condition Query started 0.2 s after a large one: at most {max(beside):.2f} s "
                  f"(median {sorted(beside)[len(beside) // 2]:.2f} s over {len(beside)} large Queries)")
    finally:
        broker.terminate()
        if pg:
            pg.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
