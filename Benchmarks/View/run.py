#!/usr/bin/env python3
"""`coaty view` under load: its CPU and memory at a steady event rate, against mosquitto_sub in the same run.

  Benchmarks/run view [--rate R (default 10000)] [--seconds S (default 30)] [--pages N (default 1)]

One mosquitto (its default configuration, `set_tcp_nodelay true`, on a free loopback port); `coaty view` (release
build, its defaults, `--http-port` free) with N pages connected to its WebSocket (a minimal client in this script that
reads every state message, as the page does); `mosquitto_sub -t 'coaty/3/-/#'` to /dev/null as the baseline (the C
floor of receiving the same stream); `mosquitto_pub -l` publishing R Advertise events per second for S seconds (each
a distinct object, ~210 bytes, paced in 10 ms steps by this script).

Reported: the events sent and the events the viewer counted (`totals.events` of GET /api/state: it must not fall
behind or lose any), the CPU of the viewer and of mosquitto_sub over the run (% of one core, µs per event), the
viewer's resident memory (start, peak, end), and the state messages the pages got (count, mean size). Then the ratio
viewer CPU / mosquitto_sub CPU. Not a test: no assertion on time.
"""
import argparse, base64, json, os, re, socket, subprocess, sys, tempfile, threading, time, urllib.request, uuid

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "Python"))
from benchsupport import cpu_seconds, free_port  # noqa: E402
COATY = os.environ.get("COATY", os.path.join(ROOT, ".build", "release", "coaty"))


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


class Page(threading.Thread):
    """A WebSocket client reading the viewer's state messages (text frames, unmasked from the server)."""

    def __init__(self, port):
        super().__init__(daemon=True)
        self.sock = socket.create_connection(("127.0.0.1", port))
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall((f"GET /ws HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
                           f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
        head = b""
        while b"\r\n\r\n" not in head:
            head += self.sock.recv(1)
        if b" 101 " not in head.split(b"\r\n")[0]:
            sys.exit(f"no WebSocket upgrade: {head[:200]!r}")
        self.messages, self.bytes, self.last = 0, 0, None

    def read(self, n):
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise EOFError
            data += chunk
        return data

    def run(self):
        try:
            while True:
                b0, b1 = self.read(2)
                length = b1 & 0x7F
                if length == 126:
                    length = int.from_bytes(self.read(2), "big")
                elif length == 127:
                    length = int.from_bytes(self.read(8), "big")
                payload = self.read(length)
                if b0 & 0x0F == 1:
                    self.messages += 1
                    self.bytes += length
                    self.last = payload
        except (EOFError, OSError):
            pass


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rate", type=int, default=10_000)
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--pages", type=int, default=1)
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="coaty-view-bench-")
    port, http = free_port(), free_port()
    conf = os.path.join(work, "mosquitto.conf")
    with open(conf, "w") as f:
        f.write(f"listener {port} 127.0.0.1\nallow_anonymous true\nset_tcp_nodelay true\n")
        if os.getuid() == 0:
            f.write("user root\n")
    broker = subprocess.Popen(["mosquitto", "-c", conf], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    url = f"mqtt://127.0.0.1:{port}"
    viewer = subprocess.Popen([COATY, "view", "--broker", url, "--http-port", str(http)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    line = viewer.stderr.readline()
    if "Viewing" not in line:
        sys.exit(f"coaty view did not start: {line}")
    sub = subprocess.Popen(["mosquitto_sub", "-h", "127.0.0.1", "-p", str(port), "-t", "coaty/3/-/#"],
                           stdout=subprocess.DEVNULL)
    pages = [Page(http) for _ in range(args.pages)]
    for page in pages:
        page.start()
    time.sleep(2)

    def state():
        with urllib.request.urlopen(f"http://127.0.0.1:{http}/api/state", timeout=30) as response:
            return json.load(response)

    before = state()["totals"]["events"]
    source = uuid.uuid4()
    pub = subprocess.Popen(["mosquitto_pub", "-h", "127.0.0.1", "-p", str(port), "-l",
                            "-t", f"coaty/3/-/ADV::com.example.Light/{source}"], stdin=subprocess.PIPE)
    rss_start = rss_kib(viewer.pid)
    cpu_viewer, cpu_sub = cpu_seconds(viewer.pid), cpu_seconds(sub.pid)
    peak = rss_start
    sent, start = 0, time.monotonic()
    total = int(args.rate * args.seconds)
    step = args.rate // 100
    while sent < total:
        due = start + sent / args.rate
        now = time.monotonic()
        if due > now:
            time.sleep(due - now)
        lines = []
        for _ in range(min(step, total - sent)):
            object_id = uuid.uuid4()
            lines.append(json.dumps({"object": {
                "objectType": "com.example.Light", "coreType": "CoatyObject", "objectId": str(object_id),
                "name": f"Lamp {sent + len(lines)}", "on": (sent + len(lines)) % 2 == 0, "brightness": 0.5}},
                separators=(",", ":")))
        pub.stdin.write(("\n".join(lines) + "\n").encode())
        pub.stdin.flush()
        sent += len(lines)
        if sent % args.rate < step:
            peak = max(peak, rss_kib(viewer.pid))
    elapsed = time.monotonic() - start
    pub.stdin.close()
    pub.wait()
    # Until the viewer has counted everything (or 30 s).
    deadline = time.monotonic() + 30
    counted = 0
    while time.monotonic() < deadline:
        counted = state()["totals"]["events"] - before
        if counted >= total:
            break
        time.sleep(0.1)
    cpu_viewer = cpu_seconds(viewer.pid) - cpu_viewer
    cpu_sub = cpu_seconds(sub.pid) - cpu_sub
    peak = max(peak, rss_kib(viewer.pid))
    rss_end = rss_kib(viewer.pid)
    for process in (viewer, sub, broker):
        process.terminate()
    for process in (viewer, sub, broker):
        process.wait()
    wall = elapsed
    print(f"coaty view under {args.rate} events/s for {args.seconds:g} s ({args.pages} page(s) connected)")
    print(f"| measure | coaty view | mosquitto_sub | ratio |")
    print(f"|---|---:|---:|---:|")
    print(f"| events sent / counted | {total} / {counted} | — | — |")
    print(f"| achieved rate | {total / elapsed:,.0f}/s | | |")
    print(f"| CPU, % of one core | {100 * cpu_viewer / wall:.1f} % | {100 * cpu_sub / wall:.1f} % | "
          f"{cpu_viewer / cpu_sub if cpu_sub else float('nan'):.2f} |")
    print(f"| CPU per event | {1e6 * cpu_viewer / total:.1f} µs | {1e6 * cpu_sub / total:.1f} µs | |")
    print(f"| resident memory start / peak / end | {rss_start / 1024:.1f} / {peak / 1024:.1f} / "
          f"{rss_end / 1024:.1f} MiB | | |")
    for index, page in enumerate(pages):
        mean = page.bytes / page.messages if page.messages else 0
        print(f"| page {index + 1}: state messages, mean size | {page.messages}, {mean / 1024:.1f} KiB | | |")
    if counted < total:
        print(f"the viewer counted {counted} of {total} events", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
