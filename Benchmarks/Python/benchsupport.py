"""Helpers the Python benchmark drivers share (Benchmarks/CoatyJS, Soak, Group)."""
import os, socket

TICKS = os.sysconf("SC_CLK_TCK")


def free_port():
    """A TCP port free on 127.0.0.1 right now."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def cpu_seconds(pid):
    """User + system CPU seconds of a running process (from /proc, clock-tick resolution)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS
