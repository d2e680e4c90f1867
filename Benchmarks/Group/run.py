#!/usr/bin/env python3
"""Recorder groups: 1 member against N members on one PostgreSQL, in the same run.

  Benchmarks/run group [--events M (default 30000)] [--members N (default 3)] [--passes P (default 2)]

One mosquitto (its default configuration plus `max_queued_messages 0`, on a free loopback port), one PostgreSQL
(initdb in a temporary directory, its default configuration, on a free loopback port), and for each pass first one
then N `coaty record --group bench --db postgres://…` members (release build, the defaults a user gets; a group
member is durable: QoS 1, persistent session, acknowledged after commit). A publisher (a minimal MQTT 3.1.1 client
in this script, 200 QoS 1 publications in flight) sends M Advertise events of distinct objects as fast as the broker
takes them; the time runs from the first publication until PostgreSQL holds all M rows (polled every 50 ms).

Reported per configuration (best pass): throughput (events stored per second), each member's share (its `received`
count, from the statistics it prints when it stops), and the CPU seconds of the broker, the members together and
PostgreSQL (all its processes) over the run, per 1000 events. Then the ratio N members / 1 member. Not a test: no
assertion on time.
"""
import argparse, os, pwd, re, shutil, socket, struct, subprocess, sys, tempfile, threading, time, uuid

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "Python"))
from benchsupport import cpu_seconds, free_port  # noqa: E402
COATY = os.environ.get("COATY", os.path.join(ROOT, ".build", "release", "coaty"))


def cpu_total(pids):
    """CPU seconds of the processes still running among `pids`."""
    total = 0.0
    for pid in pids:
        try:
            total += cpu_seconds(pid)
        except (FileNotFoundError, ProcessLookupError, IndexError):
            pass
    return total


def postgres_pids(data_dir):
    pids = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read()
        except OSError:
            continue
        if cmd.startswith(b"postgres") or b"/postgres\0" in cmd:
            pids.append(int(pid))
    return pids


class Postgres:
    def __init__(self, work):
        versions = sorted(os.listdir("/usr/lib/postgresql"), key=lambda v: int(v) if v.isdigit() else 0)
        if not versions:
            sys.exit("PostgreSQL is not installed (apt-get install postgresql)")
        self.bin = f"/usr/lib/postgresql/{versions[-1]}/bin"
        self.dir = os.path.join(work, "pg")
        os.makedirs(self.dir)
        self.as_user = os.getuid() == 0
        if self.as_user:
            pw = pwd.getpwnam("postgres")
            os.chown(work, pw.pw_uid, pw.pw_gid)
            os.chown(self.dir, pw.pw_uid, pw.pw_gid)
        self.port = free_port()
        self.tool("initdb", "-D", self.dir + "/data", "-A", "trust", "-U", "postgres", "-E", "UTF8", "--locale=C")
        self.tool("pg_ctl", "-D", self.dir + "/data", "-o",
                  f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1", "-l", self.dir + "/log", "-w", "start")

    def tool(self, name, *args, capture=False):
        cmd = [f"{self.bin}/{name}", *args]
        if self.as_user:
            cmd = ["runuser", "-u", "postgres", "--"] + cmd
        out = subprocess.run(cmd, check=True, capture_output=True, text=True)
        return out.stdout

    def create(self, name):
        self.tool("createdb", "-h", self.dir, "-p", str(self.port), "-U", "postgres", name)
        return f"postgres://postgres@127.0.0.1:{self.port}/{name}?sslmode=disable"

    def count(self, name):
        out = self.tool("psql", "-h", self.dir, "-p", str(self.port), "-U", "postgres", "-d", name, "-At", "-c",
                        "SELECT count(*) FROM coaty_rows WHERE \"coreType\" = 'Task'")
        return int(out.strip() or 0)

    def stop(self):
        try:
            self.tool("pg_ctl", "-D", self.dir + "/data", "-m", "fast", "-w", "stop")
        except subprocess.CalledProcessError:
            pass


def mqtt_string(s):
    b = s.encode()
    return struct.pack("!H", len(b)) + b


def mqtt_packet(first, body):
    length, encoded = len(body), b""
    while True:
        byte = length % 128
        length //= 128
        encoded += bytes([byte | (0x80 if length else 0)])
        if not length:
            return bytes([first]) + encoded + body


def publish(port, count, window=200):
    """Publishes `count` Advertise events at QoS 1 with up to `window` in flight; returns the start time."""
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    body = mqtt_string("MQTT") + bytes([4, 2]) + struct.pack("!H", 60) + mqtt_string(f"bench-{uuid.uuid4().hex[:8]}")
    sock.sendall(mqtt_packet(0x10, body))
    if sock.recv(4)[:2] != b"\x20\x02":
        sys.exit("the broker refused the publisher")
    acked = threading.Semaphore(window)
    done = threading.Event()

    def read_acks():
        buffer = b""
        seen = 0
        while seen < count:
            data = sock.recv(65536)
            if not data:
                break
            buffer += data
            while len(buffer) >= 4:
                if buffer[0] != 0x40:
                    sys.exit(f"unexpected packet 0x{buffer[0]:02x}")
                buffer = buffer[4:]
                seen += 1
                acked.release()
        done.set()

    reader = threading.Thread(target=read_acks, daemon=True)
    reader.start()
    source = str(uuid.uuid4())
    topic = mqtt_string(f"coaty/3/-/ADV:Task/{source}")
    start = time.time()
    for i in range(count):
        acked.acquire()
        payload = ('{"object":{"objectType":"coaty.Task","coreType":"Task","objectId":"%s","name":"T%d",'
                   '"creatorId":"%s","creationTimestamp":1,"status":0}}' % (uuid.uuid4(), i, source)).encode()
        sock.sendall(mqtt_packet(0x32, topic + struct.pack("!H", i % 65535 + 1) + payload))
    done.wait(120)
    sock.close()
    return start


def run_pass(members, events, port, pg, index):
    name = f"bench_{members}_{index}"
    url = pg.create(name)
    work = tempfile.mkdtemp(prefix="coaty-group-")
    procs = []
    try:
        for m in range(members):
            log = open(os.path.join(work, f"m{m}.log"), "w")
            procs.append((subprocess.Popen([COATY, "record", "--group", "bench", "--db", url, "--broker",
                                            f"mqtt://127.0.0.1:{port}", "--log-level", "info",
                                            "--name", f"member {m}"],
                                           stdout=subprocess.DEVNULL, stderr=log), os.path.join(work, f"m{m}.log")))
        deadline = time.time() + 30
        while not all("Recording" in open(path).read() for _, path in procs):
            if time.time() > deadline:
                sys.exit("the members did not start within 30 s: " + open(procs[0][1]).read()[-1500:])
            time.sleep(0.05)
        time.sleep(0.5)
        pg_pids = postgres_pids(pg.dir)
        broker_pid = [int(p) for p in subprocess.run(["pgrep", "-f", f"mosquitto -c .*{port}"],
                                                      capture_output=True, text=True).stdout.split()]
        member_pids = [p.pid for p, _ in procs]
        before = (cpu_total(broker_pid), cpu_total(member_pids), cpu_total(pg_pids))
        start = publish(port, events)
        stored = 0
        while stored < events and time.time() - start < 300:
            stored = pg.count(name)
            if stored < events:
                time.sleep(0.05)
        elapsed = time.time() - start
        after = (cpu_total(broker_pid), cpu_total(member_pids), cpu_total(pg_pids))
        shares = []
        for p, path in procs:
            p.terminate()
            p.wait(timeout=60)
            match = re.findall(r"received (\d+), stored (\d+)", open(path).read())
            shares.append(int(match[-1][0]) if match else None)
        return {"members": members, "stored": stored, "seconds": elapsed, "rate": stored / elapsed,
                "shares": shares, "cpu": [a - b for a, b in zip(after, before)]}
    finally:
        for p, _ in procs:
            if p.poll() is None:
                p.kill()
        shutil.rmtree(work, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser(description="CoatyKit recorder-group benchmark")
    parser.add_argument("--events", type=int, default=30000)
    parser.add_argument("--members", type=int, default=3)
    parser.add_argument("--passes", type=int, default=2)
    args = parser.parse_args()
    if not os.access(COATY, os.X_OK):
        sys.exit(f"{COATY} missing: swift build -c release --product coaty")
    work = tempfile.mkdtemp(prefix="coaty-group-bench-")
    port = free_port()
    conf = os.path.join(work, f"mosquitto-{port}.conf")
    with open(conf, "w") as f:
        f.write(f"listener {port} 127.0.0.1\nallow_anonymous true\nmax_queued_messages 0\n")
    broker = subprocess.Popen(["mosquitto", "-c", conf], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    pg = None
    try:
        pg = Postgres(work)
        results = {1: [], args.members: []}
        for index in range(args.passes):  # alternating, so load drift hits both alike
            for members in (1, args.members):
                result = run_pass(members, args.events, port, pg, index)
                results[members].append(result)
                print(f"pass {index + 1}, {members} member(s): {result['rate']:,.0f} events/s "
                      f"({result['stored']:,} stored in {result['seconds']:.2f} s), shares {result['shares']}",
                      flush=True)
        best = {k: max(v, key=lambda r: r["rate"]) for k, v in results.items()}
        print()
        print(f"{args.events:,} Advertise events at QoS 1 into `coaty record --group` on one PostgreSQL, "
              f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} (best of {args.passes})")
        print("| members | events/s | each member's share | broker CPU s/1000 | members CPU s/1000 | "
              "PostgreSQL CPU s/1000 |")
        print("|---:|---:|---|---:|---:|---:|")
        for k in (1, args.members):
            r = best[k]
            per = [c / r["stored"] * 1000 for c in r["cpu"]]
            print(f"| {k} | {r['rate']:,.0f} | {', '.join(str(s) for s in r['shares'])} | {per[0]:.3f} | "
                  f"{per[1]:.3f} | {per[2]:.3f} |")
        print(f"\n{args.members} members / 1 member: {best[args.members]['rate'] / best[1]['rate']:.2f} × throughput")
    finally:
        broker.terminate()
        if pg:
            pg.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
