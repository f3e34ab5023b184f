#!/usr/bin/env python3
"""Print the first of N consecutive free loopback TCP ports.

The ports come from below the kernel's ephemeral range, so that no client
socket of a test running beside this one can take them between this check
and the bind of the service under test.
usage: free-ports.py [N]
"""
import random
import socket
import sys

n = int(sys.argv[1]) if len(sys.argv) > 1 else 1
try:
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        eph_lo = int(f.read().split()[0])
except OSError:
    eph_lo = 32768
lo, hi = 10000, max(eph_lo, 10000 + 1000) - n
for _ in range(1000):
    base = random.randrange(lo, hi)
    socks = []
    try:
        for p in range(base, base + n):
            s = socket.socket()
            socks.append(s)
            s.bind(("127.0.0.1", p))
        print(base)
        sys.exit(0)
    except OSError:
        pass
    finally:
        for s in socks:
            s.close()
sys.exit("free-ports.py: no %d consecutive free ports in [%d, %d)" % (n, lo, hi))
