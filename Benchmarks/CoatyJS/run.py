#!/usr/bin/env python3
"""CoatyKit against Coaty JS 2.4.1 (and the C floor), side by side in one run: Benchmarks/run coatyjs.

Every scenario runs on one mosquitto started here (set_tcp_nodelay true, max_queued_messages 0),
with every program on its defaults, the sides alternating pass by pass; the tables report medians
over the passes, the ratio ours / theirs, and the load average at the start and end.

  observe   100 000 Advertise events (~300 B) published at full speed by mosquitto_pub -l; each
            subscriber prints one line per event into a fast reader (this driver, 64 KiB reads):
            `coaty observe advertise --object-type T`, Coaty JS `agent.js bench-observe` (one
            JSON.stringify per event) and `mosquitto_sub`. msg/s from the first publish to the
            subscriber's exit; CPU µs per event of the subscriber process (user + system). A live
            burst is bounded by the publisher (one mosquitto_pub); a second table stops each
            subscriber (SIGSTOP) while the burst is published and measures how fast it drains the
            backlog after SIGCONT: the subscriber's own speed.
  discover  Discover by objectId, 2000 sequential round trips by a Coaty JS requester
            (`agent.js discover-loop`), answered by `coaty record` (1000 objects stored in
            SQLite), by Coaty JS `agent.js respond` holding the same objects, and by the C floor
            (`mqtt-baseline coaty-resolver`: the objects in memory, a binary search, no JSON
            parse); the responder's CPU µs per request. Then the requester side: CoatyKit's
            requester (`agent-benchmark discover-loop`) and Coaty JS's, both against Coaty JS.
  query     Query with a property condition, orderBy and take 10 over 1000 objects, answered by
            `coaty record` and Coaty JS `respond`, 500 round trips (Coaty JS requester); then over
            100 000 stored objects; then the requester side as for discover.

  Benchmarks/run coatyjs [--passes K] [--events N] [--rounds R] [--large N] [--only observe,discover,query]

Needs node and the Coaty JS peer (`../shared/coaty-js/install` once; COATY_JS_AGENT overrides the
path of agent.js). Not a test: no assertion on time; a lost event or an unanswered request is
reported as such.
"""
import argparse, json, os, resource, shutil, signal, socket, statistics, subprocess, sys, tempfile, time, uuid

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "Python"))
from benchsupport import cpu_seconds, free_port  # noqa: E402
RELEASE = os.path.join(ROOT, ".build", "release")
COATY = os.environ.get("COATY", os.path.join(RELEASE, "coaty"))
AGENT_JS = os.environ.get("COATY_JS_AGENT", os.path.join(ROOT, "..", "shared", "coaty-js", "agent.js"))
BASELINE = os.path.join(RELEASE, "mqtt-baseline")
AGENT_BENCH = os.path.join(RELEASE, "agent-benchmark")
OBJECT_TYPE = "com.example.Bench"


def make_objects(n, seed=0):
    """n objects of OBJECT_TYPE, ~300 B each: seq counts up, value spreads over 0..1000."""
    objects = []
    for i in range(n):
        objects.append({
            "objectId": str(uuid.UUID(int=(seed << 64) + i + 1, version=4)),
            "objectType": OBJECT_TYPE, "coreType": "CoatyObject", "name": f"n{i:07d}",
            "seq": i, "value": (i * 7919) % 1000, "room": f"B{i % 50}", "pad": "x" * 150,
        })
    return objects


class Broker:
    def __init__(self, work):
        self.port = free_port()
        conf = os.path.join(work, "mosquitto.conf")
        with open(conf, "w") as f:
            f.write(f"listener {self.port} 127.0.0.1\nallow_anonymous true\nmax_queued_messages 0\n"
                    "set_tcp_nodelay true\n")
        self.log = open(os.path.join(work, "mosquitto.log"), "w")
        self.process = subprocess.Popen(["mosquitto", "-c", conf], stdout=self.log, stderr=self.log)
        deadline = time.time() + 5
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("mosquitto did not start")

    @property
    def url(self):
        return f"mqtt://127.0.0.1:{self.port}"

    def stop(self):
        self.process.terminate()
        self.process.wait()


def wait_rusage(process):
    """Waits for a child; its exit status and CPU seconds (user + system) from wait4."""
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    return process.returncode, usage.ru_utime + usage.ru_stime


# ---------------------------------------------------------------------------------------------- observe

def observe_pass(who, broker, burst, n, work, drain=False):
    topic_filter = f"coaty/3/-/ADV::{OBJECT_TYPE}/+"
    if who == "CoatyKit":
        cmd = [COATY, "observe", "advertise", "--object-type", OBJECT_TYPE, "--count", str(n), "--timeout", "300",
               "--broker", broker.url]
    elif who == "Coaty JS":
        cmd = ["node", AGENT_JS, "bench-observe", "--object-type", OBJECT_TYPE, "--count", str(n), "--timeout", "300",
               "--broker", broker.url]
    else:
        cmd = ["mosquitto_sub", "-h", "127.0.0.1", "-p", str(broker.port), "-t", topic_filter, "-C", str(n),
               "-W", "300"]
    sub = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, bufsize=0)
    lines = 0
    # Coaty JS prints a ready line once subscribed; the others subscribe within ms of starting.
    if who == "Coaty JS":
        first = b""
        while b"\n" not in first:
            chunk = sub.stdout.read(4096)
            if not chunk:
                raise RuntimeError("Coaty JS observer ended before it was ready")
            first += chunk
        lines -= 1  # the ready line
        lines += first.count(b"\n")
    else:
        time.sleep(1.5)
    if drain:
        # The subscriber is stopped while the burst is published, so the whole burst waits at the
        # broker (max_queued_messages 0) and in the socket; then it drains as fast as it can read.
        os.kill(sub.pid, signal.SIGSTOP)
    start = time.time()
    pub = subprocess.Popen(["mosquitto_pub", "-h", "127.0.0.1", "-p", str(broker.port), "-l", "-t",
                            f"coaty/3/-/ADV::{OBJECT_TYPE}/8d3b1e43-1c2b-4bd4-9a8b-2a3c7b2d9f10"],
                           stdin=open(burst, "rb"))
    if drain:
        pub.wait()
        time.sleep(0.5)
        start = time.time()
        os.kill(sub.pid, signal.SIGCONT)
    while True:
        chunk = sub.stdout.read(65536)
        if not chunk:
            break
        lines += chunk.count(b"\n")
    _, cpu = wait_rusage(sub)
    seconds = time.time() - start
    pub.wait()
    if who == "Coaty JS":
        lines -= 1  # its done line
    return {"delivered": lines, "perSecond": n / seconds, "cpuPerEvent": cpu * 1e6 / n}


def scenario_observe(args, broker, work, report):
    n = args.events
    burst = os.path.join(work, "burst")
    with open(burst, "w") as f:
        for o in make_objects(n, seed=1):
            f.write(json.dumps({"object": o}, separators=(",", ":")) + "\n")
    sides = ["CoatyKit", "Coaty JS", "mosquitto_sub"]
    for drain in (False, True):
        results = {s: [] for s in sides}
        for p in range(args.passes):
            for who in (sides if p % 2 == 0 else list(reversed(sides))):
                results[who].append(observe_pass(who, broker, burst, n, work, drain=drain))
        med = {s: {k: statistics.median(r[k] for r in results[s]) for k in ("perSecond", "cpuPerEvent")}
               for s in sides}
        lost = {s: [r["delivered"] for r in results[s] if r["delivered"] != n] for s in sides}
        how = ("the burst queued at the broker while the subscriber was stopped, then drained"
               if drain else "published at full speed while the subscriber reads")
        report.table(f"observe: {n} Advertise events, {how}; one line each into a fast reader"
                     f" (medians of {args.passes} passes)",
                     ["side", "msg/s", "CPU µs/event", "delivered"],
                     [[s, f"{med[s]['perSecond']:,.0f}", f"{med[s]['cpuPerEvent']:.1f}",
                       "all" if not lost[s] else f"LOST: {lost[s]}"] for s in sides])
        k, j, c = med["CoatyKit"], med["Coaty JS"], med["mosquitto_sub"]
        label = "drained backlog" if drain else "live burst"
        report.goal(f"observe throughput vs Coaty JS ({label})", k["perSecond"] / j["perSecond"], ">=", 1.3)
        report.goal(f"observe throughput vs mosquitto_sub ({label})", k["perSecond"] / c["perSecond"], ">=", 0.9)
        if not drain:
            report.goal("observe CPU per event vs Coaty JS", k["cpuPerEvent"] / j["cpuPerEvent"], "<=", 1.0)


# --------------------------------------------------------------------------------------- responders

class Responder:
    """A Discover/Query responder process: `coaty record`, Coaty JS respond, or the C resolver."""

    def __init__(self, who, broker, objects_file, work, count):
        self.who = who
        if who == "coaty record":
            db = os.path.join(work, f"record-{count}.sqlite")
            self.process = subprocess.Popen([COATY, "record", "--db", db, "--broker", broker.url],
                                            stdout=subprocess.DEVNULL, stderr=open(os.path.join(work, "record.log"), "a"))
            # Fill it as a network would: a Coaty JS agent advertises the objects.
            if not os.path.exists(db + ".filled"):
                time.sleep(1.5)
                adv = subprocess.run(["node", AGENT_JS, "advertise", "--objects", "@" + objects_file, "--timeout", "600",
                                      "--broker", broker.url], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                if adv.returncode != 0:
                    raise RuntimeError("Coaty JS could not advertise the objects")
                open(db + ".filled", "w").close()
        elif who == "Coaty JS":
            self.process = subprocess.Popen(["node", AGENT_JS, "respond", "--objects", "@" + objects_file, "--quiet",
                                             "--timeout", "100000", "--broker", broker.url],
                                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
            line = self.process.stdout.readline()
            if b"ready" not in line:
                raise RuntimeError(f"Coaty JS responder not ready: {line!r}")
        else:
            lines = os.path.join(work, f"objects-{count}.lines")
            with open(objects_file) as f, open(lines, "w") as out:
                for o in json.load(f):
                    out.write(json.dumps(o, separators=(",", ":")) + "\n")
            self.process = subprocess.Popen([BASELINE, "coaty-resolver", "127.0.0.1", str(broker.port), lines],
                                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
            if b"ready" not in self.process.stdout.readline():
                raise RuntimeError("C resolver not ready")

    def cpu(self):
        return cpu_seconds(self.process.pid)

    def stop(self):
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def js_loop(broker, kind, rounds, warmup, object_id=None, query_filter=None):
    if kind == "discover":
        cmd = ["node", AGENT_JS, "discover-loop", "--object-id", object_id]
    else:
        cmd = ["node", AGENT_JS, "query-loop", "--object-types", OBJECT_TYPE, "--filter", json.dumps(query_filter)]
    cmd += ["--rounds", str(rounds), "--warmup", str(warmup), "--timeout", "600", "--broker", broker.url]
    out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=900).stdout.decode()
    for line in out.splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if event.get("event") == "latency":
            return {"p50": event["p50_us"], "p99": event["p99_us"], "sample": event.get("sample")}
    raise RuntimeError(f"Coaty JS {kind}-loop gave no latency line: {out[-500:]}")


def kit_loop(broker, kind, rounds, warmup, object_id=None, query_filter=None):
    cmd = [AGENT_BENCH, f"{kind}-loop", "127.0.0.1", str(broker.port), str(rounds), str(warmup)]
    cmd += [object_id] if kind == "discover" else [OBJECT_TYPE, json.dumps(query_filter)]
    out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=900)
    for line in out.stdout.decode().splitlines():
        if line.startswith("{") and "p50_us" in line:
            event = json.loads(line)
            return {"p50": event["p50_us"], "p99": event["p99_us"]}
    raise RuntimeError(f"CoatyKit {kind}-loop failed: {out.stderr.decode()[-500:]}")


def responder_pass(responder, broker, kind, rounds, warmup, **request):
    cpu0 = responder.cpu()
    result = js_loop(broker, kind, rounds, warmup, **request)
    cpu1 = responder.cpu()
    result["cpuPerRequest"] = (cpu1 - cpu0) * 1e6 / (rounds + warmup)
    return result


def responder_table(args, broker, work, report, kind, objects_file, count, sides, rounds, request, title):
    results = {s: [] for s in sides}
    for p in range(args.passes):
        for who in (sides if p % 2 == 0 else list(reversed(sides))):
            responder = Responder(who, broker, objects_file, work, count)
            try:
                if who == "coaty record":  # it has every object once it answers for the last one
                    probe = dict(request)
                    js_loop(broker, kind, 1, 0, **probe)
                results[who].append(responder_pass(responder, broker, kind, rounds, rounds // 10, **request))
            finally:
                responder.stop()
    med = {s: {k: statistics.median(r[k] for r in results[s]) for k in ("p50", "p99", "cpuPerRequest")}
           for s in sides}
    report.table(title, ["responder", "p50 µs", "p99 µs", "CPU µs/request"],
                 [[s, f"{med[s]['p50']:.0f}", f"{med[s]['p99']:.0f}", f"{med[s]['cpuPerRequest']:.0f}"] for s in sides])
    return med, results


def requester_table(args, broker, work, report, kind, objects_file, count, rounds, request, title):
    responder = Responder("Coaty JS", broker, objects_file, work, count)
    results = {"CoatyKit": [], "Coaty JS": []}
    try:
        for p in range(args.passes):
            order = ["CoatyKit", "Coaty JS"] if p % 2 == 0 else ["Coaty JS", "CoatyKit"]
            for who in order:
                loop = kit_loop if who == "CoatyKit" else js_loop
                results[who].append(loop(broker, kind, rounds, rounds // 10, **request))
    finally:
        responder.stop()
    med = {s: {k: statistics.median(r[k] for r in results[s]) for k in ("p50", "p99")} for s in results}
    report.table(title, ["requester", "p50 µs", "p99 µs"],
                 [[s, f"{med[s]['p50']:.0f}", f"{med[s]['p99']:.0f}"] for s in results])
    return med


def write_objects(work, count):
    path = os.path.join(work, f"objects-{count}.json")
    if not os.path.exists(path):
        with open(path, "w") as f:
            json.dump(make_objects(count), f, separators=(",", ":"))
    return path


def scenario_discover(args, broker, work, report):
    objects_file = write_objects(work, 1000)
    target = make_objects(1000)[777]["objectId"]
    request = {"object_id": target}
    med, _ = responder_table(args, broker, work, report, "discover", objects_file, 1000,
                             ["coaty record", "Coaty JS", "C"], args.rounds, request,
                             f"Discover by objectId, {args.rounds} sequential round trips by a Coaty JS requester, "
                             "1000 objects held")
    r, j, c = med["coaty record"], med["Coaty JS"], med["C"]
    report.goal("Discover p50: coaty record vs Coaty JS responder", r["p50"] / j["p50"], "<=", 0.7)
    report.goal("Discover p50: coaty record vs C responder", r["p50"] / c["p50"], "<=", 1.2)
    report.goal("Discover responder CPU/request: coaty record vs Coaty JS", r["cpuPerRequest"] / j["cpuPerRequest"],
                "<=", 1.0)
    req = requester_table(args, broker, work, report, "discover", objects_file, 1000, args.rounds, request,
                          "Discover requester against a Coaty JS responder")
    report.goal("Discover requester p50: CoatyKit vs Coaty JS", req["CoatyKit"]["p50"] / req["Coaty JS"]["p50"],
                "<=", 1.0)


QUERY_FILTER = {"conditions": ["value", [0, 500]], "orderByProperties": [["seq", "Desc"]], "take": 10}


def scenario_query(args, broker, work, report):
    rounds = max(args.rounds // 4, 50)
    request = {"query_filter": QUERY_FILTER}
    filter_text = json.dumps(QUERY_FILTER)
    objects_file = write_objects(work, 1000)
    med, _ = responder_table(args, broker, work, report, "query", objects_file, 1000, ["coaty record", "Coaty JS"],
                             rounds, request,
                             f"Query {filter_text} over 1000 objects, {rounds} round trips by a Coaty JS requester")
    r, j = med["coaty record"], med["Coaty JS"]
    report.goal("Query p50 at 1000: coaty record vs Coaty JS", r["p50"] / j["p50"], "<=", 0.5)
    report.goal("Query responder CPU/request: coaty record vs Coaty JS", r["cpuPerRequest"] / j["cpuPerRequest"],
                "<=", 1.0)
    if args.large:
        large_file = write_objects(work, args.large)
        large_rounds = max(rounds // 5, 20)
        big, _ = responder_table(args, broker, work, report, "query", large_file, args.large,
                                 ["coaty record", "Coaty JS"], large_rounds, request,
                                 f"the same Query over {args.large} objects, {large_rounds} round trips")
        growth = big["coaty record"]["p50"] / r["p50"]
        report.note(f"coaty record Query p50 grows {growth:.1f} × from 1000 to {args.large} objects "
                    f"({args.large // 1000} × the objects); Coaty JS {big['Coaty JS']['p50'] / j['p50']:.1f} ×")
        report.goal(f"Query growth 1000 → {args.large} (sub-linear: below the object ratio)", growth, "<=",
                    args.large / 1000)
    req = requester_table(args, broker, work, report, "query", objects_file, 1000, rounds, request,
                          "Query requester against a Coaty JS responder (1000 objects)")
    report.goal("Query requester p50: CoatyKit vs Coaty JS", req["CoatyKit"]["p50"] / req["Coaty JS"]["p50"],
                "<=", 1.0)


# ------------------------------------------------------------------------------------------- report

class Report:
    def __init__(self):
        self.goals = []

    def table(self, title, header, rows):
        widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
        print(f"\n{title}")
        print("| " + " | ".join(h.ljust(w) for h, w in zip(header, widths)) + " |")
        print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
        for row in rows:
            print("| " + " | ".join(str(x).ljust(w) for x, w in zip(row, widths)) + " |")
        sys.stdout.flush()

    def note(self, text):
        print(text)
        sys.stdout.flush()

    def goal(self, name, ratio, op, bound):
        met = ratio >= bound if op == ">=" else ratio <= bound
        self.goals.append((name, ratio, op, bound, met))

    def summary(self):
        self.table("goals (ratio CoatyKit / other)", ["goal", "ratio", "target", "met"],
                   [[n, f"{r:.2f}", f"{o} {b:g}", "yes" if m else "NO"] for n, r, o, b, m in self.goals])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--passes", type=int, default=2)
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=2000)
    parser.add_argument("--large", type=int, default=100_000, help="objects of the large Query (0: skip)")
    parser.add_argument("--only", default="observe,discover,query")
    args = parser.parse_args()
    for path, hint in ((COATY, "swift build -c release --product coaty"),
                       (BASELINE, "swift build -c release --product mqtt-baseline"),
                       (AGENT_BENCH, "swift build -c release --product agent-benchmark")):
        if not os.access(path, os.X_OK):
            sys.exit(f"{path} missing: {hint}")
    if not os.path.exists(AGENT_JS) or subprocess.run(["node", AGENT_JS, "--help"], capture_output=True).returncode:
        sys.exit(f"the Coaty JS peer is not ready at {AGENT_JS}: run ../shared/coaty-js/install (COATY_JS_AGENT)")
    work = tempfile.mkdtemp(prefix="coatyjs-bench-")
    broker = Broker(work)
    report = Report()
    load0 = os.getloadavg()
    print(f"CoatyKit vs Coaty JS 2.4.1 (node {subprocess.run(['node', '--version'], capture_output=True, text=True).stdout.strip()}),"
          f" release build, mosquitto with set_tcp_nodelay true; {args.passes} alternating passes; "
          f"load average at start {load0[0]:.2f} {load0[1]:.2f}")
    try:
        for name in args.only.split(","):
            {"observe": scenario_observe, "discover": scenario_discover, "query": scenario_query}[name](
                args, broker, work, report)
    finally:
        broker.stop()
        shutil.rmtree(work, ignore_errors=True)
    load1 = os.getloadavg()
    report.summary()
    print(f"load average at end {load1[0]:.2f} {load1[1]:.2f}")


if __name__ == "__main__":
    main()
