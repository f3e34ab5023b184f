#!/usr/bin/env python3
"""sd_notify from real binaries on a test NOTIFY_SOCKET (an '@' abstract
datagram socket with SO_PASSCRED, as systemd's):

1. tokenizer-svc alone: READY=1 with a STATUS once bound and loaded,
   WATCHDOG=1 pings at half WATCHDOG_USEC, STOPPING=1 on SIGTERM.
2. `lmpipe up` as a unit's main process (WATCHDOG_PID is its pid): exactly
   one READY=1, after the pipeline answers, and every message from lmpipe's
   own pid (NotifyAccess=main); with one service stopped (SIGSTOP: a wedged
   loop) lmpipe stops feeding the watchdog; STOPPING=1 on SIGTERM.

usage: sdnotify-test.py BUILD_DIR SHARED_DIR"""
import os
import signal
import socket
import struct
import subprocess
import sys
import time

build, shared = sys.argv[1], sys.argv[2]
model = os.path.join(shared, "models", "stories260K.gguf")
fails = 0


def fail(msg):
    global fails
    fails += 1
    print("FAIL:", msg)


def listener(tag):
    name = "@lmpipe-sdnotify-%s-%d" % (tag, os.getpid())
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
    s.bind("\0" + name[1:])
    return s, name


def messages(sock, seconds, until=None):
    """(sender pid, text) pairs for `seconds`, or until `until(text)`."""
    out = []
    end = time.time() + seconds
    while time.time() < end:
        sock.settimeout(max(0.01, end - time.time()))
        try:
            data, anc, _, _ = sock.recvmsg(4096, socket.CMSG_SPACE(12))
        except socket.timeout:
            break
        pid = -1
        for level, typ, d in anc:
            if level == socket.SOL_SOCKET and typ == socket.SCM_CREDENTIALS:
                pid = struct.unpack("iII", d[:12])[0]
        out.append((pid, data.decode()))
        if until and until(data.decode()):
            break
    return out


def env_with(**kw):
    env = {k: v for k, v in os.environ.items()
           if k not in ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID")}
    env.update(kw)
    return env


# 1. one service
sock, name = listener("svc")
ep = "ipc:///tmp/lmpipe-sdnotify-%d.sock" % os.getpid()
svc = subprocess.Popen([os.path.join(build, "tokenizer-svc", "tokenizer-svc"), "--model", model,
                        "--endpoint", ep], env=env_with(NOTIFY_SOCKET=name, WATCHDOG_USEC="200000"),
                       stderr=subprocess.DEVNULL)
msgs = messages(sock, 30, until=lambda m: m.startswith("READY=1"))
if not msgs or not msgs[-1][1].startswith("READY=1\nSTATUS=tokenizer-svc: serving on " + ep):
    fail("tokenizer-svc: no READY=1 with its STATUS: %r" % msgs)
elif msgs[-1][0] != svc.pid:
    fail("tokenizer-svc: READY=1 from pid %d, not %d" % (msgs[-1][0], svc.pid))
pings = [m for m in messages(sock, 0.75) if m[1] == "WATCHDOG=1"]
if not 4 <= len(pings) <= 10:
    fail("tokenizer-svc: %d pings in 0.75 s at 100 ms" % len(pings))
svc.send_signal(signal.SIGTERM)
rest = messages(sock, 10, until=lambda m: m == "STOPPING=1")
if not rest or rest[-1][1] != "STOPPING=1":
    fail("tokenizer-svc: no STOPPING=1 after SIGTERM: %r" % rest)
if svc.wait(10) != 0:
    fail("tokenizer-svc: exit status %d" % svc.returncode)
sock.close()
print("ok: tokenizer-svc READY, %d pings, STOPPING" % len(pings))

# 2. lmpipe up as the unit's main process, its services behind the relay
sock, name = listener("up")
lmpipe = os.path.join(build, "tools", "lmpipe")
up = subprocess.Popen(["sh", "-c", 'WATCHDOG_PID=$$ exec "$0" "$@"', lmpipe, "up", "--model", model],
                      env=env_with(NOTIFY_SOCKET=name, WATCHDOG_USEC="400000"),
                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
try:
    msgs = messages(sock, 60, until=lambda m: m.startswith("READY=1"))
    ready = [m for m in msgs if m[1].startswith("READY=1")]
    if len(ready) != 1 or not ready[0][1].startswith("READY=1\nSTATUS=lmpipe up: ready on ipc://"):
        fail("lmpipe up: no READY=1 with its STATUS: %r" % msgs)
    line = up.stdout.readline()
    if not line.startswith("lmpipe up: ready on"):
        fail("lmpipe up printed %r before READY" % line)
    msgs += messages(sock, 1.2)
    if any(pid != up.pid for pid, _ in msgs):
        fail("messages from other pids than lmpipe's %d: %r" % (up.pid, msgs))
    if len([m for m in msgs if m[1].startswith("READY=1")]) != 1:
        fail("more than one READY=1: %r" % msgs)
    pings = [m for m in msgs if m[1] == "WATCHDOG=1"]
    if len(pings) < 4:
        fail("lmpipe up: %d pings in 1.2 s at 200 ms" % len(pings))
    kids = subprocess.run(["ps", "-o", "pid=,args=", "--ppid", str(up.pid)], capture_output=True,
                          text=True).stdout.split("\n")
    engine = [int(k.split()[0]) for k in kids if "engine-svc" in k]
    if len(engine) != 1:
        fail("no engine-svc child: %r" % kids)
    else:
        os.kill(engine[0], signal.SIGSTOP)  # its loop stops: no more pings from it
        late = [m for m in messages(sock, 2.0)[3:] if m[1] == "WATCHDOG=1"]
        if late:
            fail("lmpipe up fed the watchdog with engine-svc stopped: %d pings" % len(late))
        os.kill(engine[0], signal.SIGCONT)
        back = [m for m in messages(sock, 1.0) if m[1] == "WATCHDOG=1"]
        if not back:
            fail("no pings after engine-svc went on")
    up.send_signal(signal.SIGTERM)
    rest = messages(sock, 10, until=lambda m: m.startswith("STOPPING=1"))
    if not rest or not rest[-1][1].startswith("STOPPING=1"):
        fail("lmpipe up: no STOPPING=1 after SIGTERM: %r" % rest)
    up.wait(15)
    err = up.stderr.read()
    if "missed its watchdog ping" not in err:
        fail("lmpipe up did not say which service missed its ping: %s" % err)
finally:
    if up.poll() is None:
        up.kill()
if not fails:
    print("ok: lmpipe up relays READY once, feeds the watchdog only while every service pings")
sys.exit(1 if fails else 0)
