#!/usr/bin/env python3
"""prefill-itl.py - what a long prompt arriving beside a decoding request
does to that request's token gaps, for several prefill_chunk settings
(docs/BENCHMARKS.md, "Chunked prefill beside decode").

Each round starts `lmpipe up --http` with one prefill_chunk value, streams
a greedy request A of 200 tokens through llama.cpp's /completion, and one
second later sends request B, a prompt of about 1,800 tokens never seen
before (4 tokens).  Reported per setting: A's inter-token gap p50 and max
(the max is a step that carried B's prefill), and B's time to first token.
The settings take turns, round by round.

usage: bench/prefill-itl.py --model M.gguf [--build build] [--threads 2]
                            [--chunks 512,256,128,64] [--rounds 2]
"""
import argparse
import http.client
import json
import os
import random
import socket
import subprocess
import tempfile
import threading
import time

WORDS = ("the a river mountain city garden winter morning story letter music window road friend market "
         "history engine light paper ocean forest").split()


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def stream(port, prompt, n, out):
    """Token arrival times (s from the request) of one streamed /completion."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    t0 = time.monotonic()
    body = {"prompt": prompt, "n_predict": n, "temperature": 0, "ignore_eos": True, "stream": True}
    c.request("POST", "/completion", json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    if r.status != 200:
        raise RuntimeError("HTTP %d: %s" % (r.status, r.read()[:300]))
    buf = b""
    while True:
        d = r.read1(65536)
        if not d:
            break
        buf += d
        while b"\n\n" in buf:
            ev, buf = buf.split(b"\n\n", 1)
            if ev.startswith(b"data: ") and not json.loads(ev[6:]).get("stop"):
                out.append(time.monotonic() - t0)


def one_round(args, chunk, work):
    port = free_port()
    conf = os.path.join(work, "itl.conf")
    with open(conf, "w") as f:
        f.write("model = %s\nthreads = %d\nmax_seqs = 8\nn_ctx = 2048\nprefill_chunk = %d\n"
                % (args.model, args.threads, chunk))
    up = subprocess.Popen([os.path.join(args.build, "tools/lmpipe"), "up", "--config", conf, "--endpoint",
                           "ipc://%s/itl-%d.sock" % (work, port), "--http", "127.0.0.1:%d" % port],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(600):
            try:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
                c.request("GET", "/health")
                if c.getresponse().status == 200:
                    break
            except OSError:
                pass
            time.sleep(0.1)
        seed = random.randrange(1 << 30)
        long_prompt = str(seed) + " " + " ".join(WORDS[(i * 7 + seed) % len(WORDS)] + str(i % 7)
                                                 for i in range(900))
        a, b = [], []
        ta = threading.Thread(target=stream, args=(port, "Once upon a time", 200, a))
        ta.start()
        time.sleep(1.0)
        tb = threading.Thread(target=stream, args=(port, long_prompt, 4, b))
        tb.start()
        ta.join()
        tb.join()
        gaps = sorted(y - x for x, y in zip(a, a[1:]))
        return gaps[len(gaps) // 2] * 1000, gaps[-1] * 1000, b[0] * 1000
    finally:
        up.terminate()
        up.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--build", default="build")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--chunks", default="512,256,128,64")
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    args.model = os.path.realpath(args.model)
    chunks = [int(x) for x in args.chunks.split(",")]
    res = {c: [] for c in chunks}
    with tempfile.TemporaryDirectory(prefix="prefill-itl-") as work:
        for r in range(args.rounds):
            for c in (chunks if r % 2 == 0 else chunks[::-1]):
                res[c].append(one_round(args, c, work))
                print("  round %d prefill_chunk %d: A gap p50 %.0f ms, max %.0f ms; B TTFT %.0f ms"
                      % ((r + 1, c) + res[c][-1]), flush=True)
    print("\n| prefill_chunk | A gap p50 (ms) | A gap max (ms) | B TTFT (ms) |\n|---:|---:|---:|---:|")
    for c in chunks:
        rs = res[c]
        print("| %d | %s | %s | %s |" % (c, ", ".join("%.0f" % x[0] for x in rs), ", ".join("%.0f" % x[1] for x in rs),
                                        ", ".join("%.0f" % x[2] for x in rs)))


if __name__ == "__main__":
    main()
