#!/usr/bin/env python3
"""Soak benchmark: a steady mixed load for N minutes, sampled every 10 s.

  Benchmarks/run soak [--minutes N (default 30)] [--advertise-rate R (default 500)] [--request-rate Q (default 20)]

One mosquitto (its default configuration, on a free loopback port), `coaty record` (release build, SQLite file, the
defaults a user gets: it records every event and answers Discover and Query from its store), and one load process
(`agent-benchmark soak-load`): R Advertise events per second over 1000 object ids, Q Discover-by-objectId → Resolve
and Q Query → Retrieve round trips per second, each awaited up to 5 s.

Every 10 s a row: the recorder's and the load process's RSS, open file descriptors and threads (from /proc), the
broker's RSS, the window's Discover and Query latency p50/p99, and the requests left unanswered. At the end, the
last minute against the first (after a one-minute warm-up): RSS, descriptors and threads as differences, latencies
as ratios, so drift shows as a number. Not a test: no assertion on time; an unanswered request is reported as such.
"""
import argparse, json, os, shutil, socket, statistics, subprocess, sys, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "Python"))
from benchsupport import free_port  # noqa: E402
RELEASE = os.path.join(ROOT, ".build", "release")
COATY = os.environ.get("COATY", os.path.join(RELEASE, "coaty"))
AGENT_BENCH = os.path.join(RELEASE, "agent-benchmark")
PAGE_KB = os.sysconf("SC_PAGE_SIZE") // 1024


def process_figures(pid):
    """RSS (KiB), open descriptors and threads of a running process, from /proc."""
    try:
        with open(f"/proc/{pid}/statm") as f:
            rss = int(f.read().split()[1]) * PAGE_KB
        fds = len(os.listdir(f"/proc/{pid}/fd"))
        threads = len(os.listdir(f"/proc/{pid}/task"))
        return {"rss": rss, "fds": fds, "threads": threads}
    except (FileNotFoundError, ProcessLookupError):
        return None


def wait_for_port(port, process, what):
    deadline = time.time() + 10
    while time.time() < deadline:
        if process.poll() is not None:
            sys.exit(f"{what} exited with status {process.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    sys.exit(f"{what} did not listen on {port} within 10 s")


def fmt(value, decimals=0):
    return "–" if value is None else f"{value:,.{decimals}f}"


def main():
    parser = argparse.ArgumentParser(description="CoatyKit soak benchmark")
    parser.add_argument("--minutes", type=float, default=30)
    parser.add_argument("--advertise-rate", type=int, default=500)
    parser.add_argument("--request-rate", type=int, default=20)
    args = parser.parse_args()
    for path, product in ((COATY, "coaty"), (AGENT_BENCH, "agent-benchmark")):
        if not os.access(path, os.X_OK):
            sys.exit(f"{path} missing: swift build -c release --product {product}")
    seconds = max(20, int(args.minutes * 60))
    work = tempfile.mkdtemp(prefix="coaty-soak-")
    port = free_port()
    conf = os.path.join(work, "mosquitto.conf")
    with open(conf, "w") as f:
        f.write(f"listener {port} 127.0.0.1\nallow_anonymous true\n")
    processes = []
    keep = False
    try:
        broker = subprocess.Popen(["mosquitto", "-c", conf], stdout=subprocess.DEVNULL,
                                  stderr=open(os.path.join(work, "mosquitto.log"), "w"))
        processes.append(broker)
        wait_for_port(port, broker, "mosquitto")
        url = f"mqtt://127.0.0.1:{port}"
        recorder = subprocess.Popen([COATY, "record", "--db", os.path.join(work, "soak.sqlite"), "--broker", url],
                                    stdout=subprocess.DEVNULL, stderr=open(os.path.join(work, "record.log"), "w"))
        processes.append(recorder)
        time.sleep(1)
        load = subprocess.Popen([AGENT_BENCH, "soak-load", "127.0.0.1", str(port), str(seconds),
                                 str(args.advertise_rate), str(args.request_rate)],
                                stdout=subprocess.PIPE, stderr=open(os.path.join(work, "load.log"), "w"), text=True)
        processes.append(load)
        print(f"Soak: {seconds / 60:.1f} min, {args.advertise_rate} Advertise/s over 1000 objects, "
              f"{args.request_rate} Discover/s and {args.request_rate} Query/s, into `coaty record` (SQLite); "
              f"load average at start {os.getloadavg()[0]:.2f}", flush=True)
        header = ["t (s)", "rec RSS KiB", "rec fds", "rec thr", "load RSS KiB", "load fds", "load thr",
                  "broker RSS KiB", "adv/s", "Disc p50 µs", "Disc p99 µs", "Query p50 µs", "Query p99 µs",
                  "unanswered"]
        print("| " + " | ".join(header) + " |")
        print("|" + "|".join("---:" for _ in header) + "|", flush=True)
        rows = []
        for line in load.stdout:
            line = line.strip()
            if not line.startswith("{"):
                continue
            window = json.loads(line)
            for process, what, log in ((recorder, "coaty record", "record.log"), (broker, "mosquitto", "mosquitto.log")):
                if process.poll() is not None:  # a zombie's /proc entry still reads as 0 KiB
                    keep = True
                    head = open(os.path.join(work, log)).read()[:1500]
                    sys.exit(f"{what} exited with status {process.returncode} at t = {window['t']:.0f} s "
                             f"(log kept in {work}):\n{head}")
            rec, gen, brk = (process_figures(p.pid) for p in (recorder, load, broker))
            row = {"t": window["t"], "rec": rec, "load": gen, "broker": brk, **window}
            rows.append(row)
            print("| " + " | ".join([
                fmt(row["t"]), fmt(rec["rss"]), str(rec["fds"]), str(rec["threads"]),
                fmt(gen["rss"] if gen else None), str(gen["fds"] if gen else "–"),
                str(gen["threads"] if gen else "–"), fmt(brk["rss"] if brk else None),
                fmt(window["advertised"] / 10), fmt(window["discoverP50"]), fmt(window["discoverP99"]),
                fmt(window["queryP50"]), fmt(window["queryP99"]), str(window["unanswered"])]) + " |", flush=True)
        status = load.wait()
        if status != 0:
            sys.exit(f"the load process failed with status {status}: {open(os.path.join(work, 'load.log')).read()[-2000:]}")
        summarize(rows)
    finally:
        for p in reversed(processes):
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()
        if not keep:
            shutil.rmtree(work, ignore_errors=True)


def summarize(rows):
    """The last minute against the first minute after a one-minute warm-up."""
    if len(rows) < 4:
        print("too short for a drift summary (needs 40 s)")
        return
    warm = [r for r in rows if r["t"] > 60] or rows[len(rows) // 4:]
    span = min(6, max(1, len(warm) // 3))
    first, last = warm[:span], warm[-span:]

    def median(rs, pick):
        values = [v for v in (pick(r) for r in rs) if v is not None]
        return statistics.median(values) if values else None

    print()
    print(f"Drift: the last {span * 10} s against the first {span * 10} s after the warm-up "
          f"(t {first[0]['t']:.0f}–{first[-1]['t']:.0f} s vs {last[0]['t']:.0f}–{last[-1]['t']:.0f} s)")
    print("| figure | first | last | change |")
    print("|---|---:|---:|---:|")
    for name, pick, kind in (
        ("coaty record RSS (KiB)", lambda r: r["rec"]["rss"], "diff"),
        ("coaty record open descriptors", lambda r: r["rec"]["fds"], "diff"),
        ("coaty record threads", lambda r: r["rec"]["threads"], "diff"),
        ("load process RSS (KiB)", lambda r: r["load"]["rss"] if r["load"] else None, "diff"),
        ("load process open descriptors", lambda r: r["load"]["fds"] if r["load"] else None, "diff"),
        ("broker RSS (KiB)", lambda r: r["broker"]["rss"] if r["broker"] else None, "diff"),
        ("Discover p99 (µs)", lambda r: r["discoverP99"], "ratio"),
        ("Query p99 (µs)", lambda r: r["queryP99"], "ratio"),
    ):
        a, b = median(first, pick), median(last, pick)
        if a is None or b is None:
            change = "–"
        elif kind == "diff":
            change = f"{b - a:+,.0f}"
        else:
            change = f"{b / a:.2f} ×"
        print(f"| {name} | {fmt(a)} | {fmt(b)} | {change} |")
    unanswered = sum(r["unanswered"] for r in rows)
    advertised = sum(r["advertised"] for r in rows)
    print(f"\n{advertised:,} Advertise events published; {unanswered} requests unanswered within 5 s; "
          f"load average at end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
