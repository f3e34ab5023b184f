#!/usr/bin/env python3
"""The gateway's door (issue #26) on real loopback sockets, against
`lmpipe up --http` with an API key and an admin key.

  methods  every method llhttp knows (read from llhttp.h) on every path,
           without a key, with the API key and with the admin key: only the
           admin key's POST changes the sampler; 405 with Allow elsewhere
  framing  request smuggling shapes (chunk data not followed by CRLF, bare
           LF, Content-Length with Transfer-Encoding, ...) refused with 400
           and nothing after them served; 414 and 431; HTTP/1.0 streams
           without chunked coding; Expect: 100-continue; HEAD; the key
           checked before the body is read; the body's total deadline
  fair     per-key shares: one key's 256 queued choices do not hold up
           another key's request, and a third batch over the key's share
           gets 429 at once
  flood    a slow-body flood of 512 connections without a key, then a
           slowloris of 300, each from other loopback addresses: /health
           answers within 100 ms and a keyed completion is served meanwhile

usage: door-test.py LMPIPE LMPIPE_HTTP SHARED_DIR LLHTTP_H PART
"""
import json
import os
import re
import select
import socket
import subprocess
import sys
import tempfile
import time

lmpipe, gateway, shared, llhttp_h, part = sys.argv[1:6]
model = os.path.join(shared, "models", "stories260K.gguf")
KEY, KEY2, ADMIN = "door-key", "door-key-2", "door-admin"
failed = False


def bad(msg):
    global failed
    failed = True
    print("FAIL: " + msg, flush=True)


def ok(msg):
    print("ok: " + msg, flush=True)


def free_port():
    here = os.path.dirname(os.path.abspath(__file__))
    return int(subprocess.check_output([sys.executable, os.path.join(here, "..", "free-ports.py")]).split()[0])


# ---- a small HTTP/1.1 client that shows exactly what came back ----

def read_response(s, head=False, timeout=10):
    """(status, headers dict lower-case, body bytes, closed) of one response."""
    s.settimeout(timeout)
    buf = b""
    while b"\r\n\r\n" not in buf:
        d = s.recv(65536)
        if not d:
            return None, {}, buf, True
        buf += d
    hdr, rest = buf.split(b"\r\n\r\n", 1)
    lines = hdr.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    h = {}
    for ln in lines[1:]:
        k, v = ln.split(":", 1)
        h[k.strip().lower()] = v.strip()
    if status < 200:
        return status, h, rest, False
    body, closed = rest, False
    if head:
        return status, h, b"", False
    if "content-length" in h:
        n = int(h["content-length"])
        while len(body) < n:
            d = s.recv(65536)
            if not d:
                closed = True
                break
            body += d
        return status, h, body[:n], closed
    if h.get("transfer-encoding") == "chunked":
        out = b""
        while True:
            while b"\r\n" not in body:
                d = s.recv(65536)
                if not d:
                    return status, h, out, True
                body += d
            line, body = body.split(b"\r\n", 1)
            n = int(line, 16)
            while len(body) < n + 2:
                d = s.recv(65536)
                if not d:
                    return status, h, out, True
                body += d
            out += body[:n]
            body = body[n + 2:]
            if n == 0:
                return status, h, out, False
    while True:  # close-delimited
        d = s.recv(65536)
        if not d:
            return status, h, body, True
        body += d


def connect(port, src="127.0.0.1"):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind((src, 0))
    s.connect(("127.0.0.1", port))
    return s


def request(port, method, path, body=None, auth=None, headers=(), version="1.1", head=False):
    s = connect(port)
    try:
        r = "%s %s HTTP/%s\r\nHost: x\r\n" % (method, path, version)
        if auth:
            r += "Authorization: Bearer %s\r\n" % auth
        for hd in headers:
            r += hd + "\r\n"
        data = body.encode() if isinstance(body, str) else body
        if data is not None:
            r += "Content-Type: application/json\r\nContent-Length: %d\r\n" % len(data)
        s.sendall(r.encode() + b"\r\n" + (data or b""))
        return read_response(s, head=head or method == "HEAD")
    finally:
        s.close()


def is_closed(s, timeout=3):
    """Whether the peer closes s within timeout (reading what comes)."""
    s.settimeout(timeout)
    try:
        while True:
            d = s.recv(65536)
            if not d:
                return True
    except socket.timeout:
        return False
    except OSError:
        return True


# ---- the pipeline ----

work = tempfile.mkdtemp(prefix="lmpipe-door-")
port = free_port()
up = subprocess.Popen([lmpipe, "up", "--model", model, "--endpoint", "ipc://%s/client.sock" % work,
                       "--http", "127.0.0.1:%d" % port, "--api-key", KEY, "--api-key", KEY2, "--admin-key", ADMIN],
                      stdout=open(os.path.join(work, "up.out"), "w"), stderr=open(os.path.join(work, "up.err"), "w"))
others = []


def stop_all():
    for p in others + [up]:
        if p.poll() is None:
            p.terminate()
    for p in others + [up]:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
    subprocess.call(["rm", "-rf", work])


def wait_health(p, key=None, secs=30):
    t0 = time.time()
    while time.time() - t0 < secs:
        try:
            st, _, body, _ = request(p, "GET", "/health", auth=key)
            if st == 200:
                return True
        except OSError:
            pass
        time.sleep(0.1)
    return False


if not wait_health(port):
    print("FAIL: lmpipe up --http never got healthy: " + open(os.path.join(work, "up.err")).read())
    stop_all()
    sys.exit(1)


def sampler_version():
    st, _, body, _ = request(port, "GET", "/sampler", auth=KEY)
    assert st == 200, (st, body)
    return json.loads(body)["version"]


# ---- every method on every path ----

def part_methods():
    src = open(llhttp_h).read()
    m = re.search(r"#define HTTP_ALL_METHOD_MAP\(XX\)(.*?)\n\n", src, re.S)
    methods = re.findall(r"XX\(\d+,\s*\w+,\s*([\w-]+)\)", m.group(1))
    assert len(methods) >= 46 and "SOURCE" in methods, methods
    paths = ["/", "/health", "/metrics", "/v1/models", "/models", "/v1/completions", "/v1/chat/completions",
             "/completion", "/tokenize", "/detokenize", "/apply-template", "/sampler", "/sampler?x=1",
             "/nowhere"]
    gets = {"/", "/health", "/metrics", "/v1/models", "/models"}
    open_gets = {"/", "/health", "/metrics"}
    posts = {"/v1/completions", "/v1/chat/completions", "/completion", "/tokenize", "/detokenize",
             "/apply-template"}
    bodies = {"/v1/completions": '{"prompt":"x","max_tokens":1}',
              "/v1/chat/completions": '{"messages":[{"role":"user","content":"x"}],"chat_template":"chatml","max_tokens":1}',
              "/completion": '{"prompt":"x","n_predict":1}', "/tokenize": '{"content":"x"}',
              "/detokenize": '{"tokens":[1]}',
              "/apply-template": '{"messages":[{"role":"user","content":"x"}],"chat_template":"chatml"}'}
    v0 = sampler_version()
    wrong, unparsed, n = [], set(), 0
    admin_posts = 0
    for meth in methods:
        for path in paths:
            base = path.split("?")[0]
            for who, auth in (("none", None), ("key", KEY), ("admin", ADMIN)):
                body = '{"op":"set","params":{"temperature":1.7}}' if base == "/sampler" else bodies.get(base, "{}")
                st, h, resp, _ = request(port, meth, path, body=body, auth=auth)
                n += 1
                if st == 400 and b"malformed HTTP request" in resp:
                    unparsed.add(meth)  # llhttp does not take it as HTTP: fine
                    continue
                read = meth in ("GET", "HEAD")
                if base == "/nowhere":
                    want = {404}
                elif base == "/sampler":
                    if read:
                        want = {401} if who == "none" else {200}
                    elif who != "admin":
                        want = {401}
                    else:
                        want = {200} if meth == "POST" else {405}
                elif base in gets:
                    want = ({200} if base in open_gets or who != "none" else {401}) if read else {405}
                else:
                    # stories260K has no chat template: /apply-template ends in the
                    # tokenizer's 500 (issue #28), past every check that matters here
                    served = {200, 500} if base == "/apply-template" else {200}
                    want = ({401} if who == "none" else served) if meth == "POST" else {405}
                if st == 200 and base == "/sampler" and meth == "POST":
                    admin_posts += 1
                if st not in want:
                    wrong.append("%s %s (%s): %s, want %s: %s" % (meth, path, who, st, sorted(want), resp[:120]))
                elif st == 405 and not h.get("allow"):
                    wrong.append("%s %s: 405 without Allow" % (meth, path))
                elif meth == "HEAD" and resp:
                    wrong.append("HEAD %s: a body" % path)
    v1 = sampler_version()
    if wrong:
        bad("methods: %d of %d wrong:\n  %s" % (len(wrong), n, "\n  ".join(wrong[:40])))
    else:
        ok("%d methods x %d paths x 3 keys: %d requests answered as the route table says "
           "(not taken as HTTP by llhttp: %s)" % (len(methods), len(paths), n, ", ".join(sorted(unparsed)) or "none"))
    if v1 - v0 == admin_posts == 2:
        ok("the sampler changed only by the admin key's POSTs (version %d -> %d)" % (v0, v1))
    else:
        bad("the sampler version went %d -> %d with %d admin POSTs" % (v0, v1, admin_posts))
    # the reproduction, word for word
    for meth in ("SOURCE", "PUT", "PATCH", "DELETE", "PURGE", "LINK"):
        for op in ('{"op":"set","params":{"temperature":1.7}}', '{"op":"load","path":"x.so"}',
                   '{"op":"unload","name":"x"}', '{"op":"rollback"}'):
            st, _, resp, _ = request(port, meth, "/sampler", body=op, auth=KEY)
            if st != 401:
                bad("%s /sampler %s with the API key: %s %s" % (meth, op, st, resp[:200]))
    if sampler_version() == v1:
        ok("SOURCE/PUT/PATCH/DELETE/PURGE/LINK /sampler with an API key: 401 for set, load, unload, rollback")
    else:
        bad("a non-admin method changed the sampler")


# ---- framing ----

def smuggle(name, raw, want=400):
    """raw is sent at once, followed by a pipelined request for /smuggled;
    the answer must be `want` and nothing must answer /smuggled."""
    s = connect(port)
    s.sendall(raw + b"GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n")
    st, h, body, closed = read_response(s)
    rest = b""
    s.settimeout(2)
    try:
        while True:
            d = s.recv(65536)
            if not d:
                break
            rest += d
    except socket.timeout:
        pass
    s.close()
    if st == want and b"/smuggled" not in rest and b"HTTP/1.1" not in rest:
        ok("%s: %d, and the bytes after it are not served" % (name, st))
    else:
        bad("%s: %s %s / after: %r" % (name, st, body[:200], rest[:200]))


def part_framing():
    A = ("Authorization: Bearer %s\r\n" % KEY).encode()
    body16 = b'{"content":"hi"}'
    assert len(body16) == 16
    post = b"POST /tokenize HTTP/1.1\r\nHost: x\r\n" + A
    chunked = post + b"Transfer-Encoding: chunked\r\n\r\n"
    # the control: well-formed chunks are served, and the next request too
    s = connect(port)
    s.sendall(chunked + b"10\r\n" + body16 + b"\r\n0\r\n\r\n")
    st, _, body, _ = read_response(s)
    s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
    st2, _, _, _ = read_response(s)
    s.close()
    if st == 200 and b"tokens" in body and st2 == 200:
        ok("a well-formed chunked body is read (200), and the next request on the connection")
    else:
        bad("well-formed chunked: %s %s, then %s" % (st, body[:200], st2))
    smuggle("chunk data followed by XX instead of CRLF (the issue's)", chunked + b"10\r\n" + body16 + b"XX0\r\n\r\n")
    smuggle("chunk data followed by a bare LF", chunked + b"10\r\n" + body16 + b"\n0\r\n\r\n")
    smuggle("a chunk size line ended by a bare LF", chunked + b"10\n" + body16 + b"\r\n0\r\n\r\n")
    smuggle("a chunk extension with a bare LF", chunked + b"10;a=b\n" + body16 + b"\r\n0\r\n\r\n")
    smuggle("a chunk size with a space", chunked + b"10 \r\n" + body16 + b"\r\n0\r\n\r\n")
    smuggle("a chunk size over 64 bits", chunked + b"10000000000000010\r\n" + body16 + b"\r\n0\r\n\r\n")
    smuggle("Content-Length with Transfer-Encoding: chunked",
            post + b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n10\r\n" + body16 + b"\r\n0\r\n\r\n")
    smuggle("Transfer-Encoding: chunked, identity (chunked not last)",
            post + b"Transfer-Encoding: chunked, identity\r\n\r\n10\r\n" + body16 + b"\r\n0\r\n\r\n")
    smuggle("Transfer-Encoding: xchunked", post + b"Transfer-Encoding: xchunked\r\n\r\n")
    smuggle("two different Content-Lengths", post + b"Content-Length: 16\r\nContent-Length: 3\r\n\r\n" + body16)
    smuggle("a space before the colon", post + b"Content-Length : 16\r\n\r\n" + body16)
    smuggle("a folded header line", post + b"X-A: a\r\n b\r\nContent-Length: 16\r\n\r\n" + body16)
    smuggle("a header line ended by a bare LF", post + b"Content-Length: 16\n\r\n" + body16)
    smuggle("a NUL in a header value", post + b"X-A: a\x00b\r\nContent-Length: 16\r\n\r\n" + body16)

    # 414, 431
    st, _, body, _ = request(port, "GET", "/v1/models?" + "a" * 9000, auth=KEY)
    (ok if st == 414 else bad)("a 9,000-byte request target: %s %s" % (st, body[:120]))
    st, _, body, _ = request(port, "GET", "/v1/models", auth=KEY, headers=["X-Big: " + "a" * 9000])
    (ok if st == 431 else bad)("a 9,000-byte header value: %s %s" % (st, body[:120]))
    st, _, body, _ = request(port, "GET", "/v1/models", auth=KEY, headers=["X-H%d: 1" % i for i in range(101)])
    (ok if st == 431 else bad)("101 header fields: %s %s" % (st, body[:120]))
    st, _, body, _ = request(port, "GET", "/v1/models", auth=KEY,
                             headers=["X-H%d: %s" % (i, "a" * 4000) for i in range(9)])
    (ok if st == 431 else bad)("9 header fields of 4,000 bytes (36 KB): %s %s" % (st, body[:120]))
    st, _, body, _ = request(port, "GET", "/v1/models", auth=KEY, headers=["X-H%d: 1" % i for i in range(90)])
    (ok if st == 200 else bad)("90 small header fields are fine: %s" % st)

    # HTTP/1.0: a stream is close-delimited, not chunked
    st, h, body, closed = request(port, "POST", "/v1/completions", version="1.0", auth=KEY,
                                  body='{"prompt":"Once upon a time","max_tokens":8,"temperature":0,"stream":true}')
    if st == 200 and "transfer-encoding" not in h and "content-length" not in h and closed and \
            body.startswith(b"data: ") and body.endswith(b"data: [DONE]\n\n"):
        ok("HTTP/1.0: the stream comes without chunked coding and ends with the connection")
    else:
        bad("HTTP/1.0 stream: %s %s closed=%s %r" % (st, h, closed, body[:200]))
    st, h, body, closed = request(port, "POST", "/v1/completions", auth=KEY,
                                  body='{"prompt":"Once upon a time","max_tokens":8,"temperature":0,"stream":true}')
    (ok if st == 200 and h.get("transfer-encoding") == "chunked" and body.endswith(b"data: [DONE]\n\n")
     else bad)("HTTP/1.1: the same stream is chunked")

    # Expect: 100-continue
    s = connect(port)
    payload = b'{"content":"hi there"}'
    s.sendall(b"POST /tokenize HTTP/1.1\r\nHost: x\r\n" + A + b"Expect: 100-continue\r\nContent-Length: %d\r\n\r\n"
              % len(payload))
    t0 = time.time()
    st, _, _, _ = read_response(s, timeout=5)
    dt = time.time() - t0
    s.sendall(payload)
    st2, _, body, _ = read_response(s)
    s.close()
    (ok if st == 100 and dt < 0.5 and st2 == 200 else bad)(
        "Expect: 100-continue: %s after %.0f ms, then %s" % (st, dt * 1000, st2))
    s = connect(port)
    s.sendall(b"POST /tokenize HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 100000\r\n\r\n")
    st, _, body, _ = read_response(s, timeout=5)
    closed = is_closed(s)
    s.close()
    (ok if st == 401 and closed else bad)("Expect: 100-continue without a key: %s (no 100), closed=%s" % (st, closed))
    st, _, body, _ = request(port, "POST", "/tokenize", body="{}", auth=KEY, headers=["Expect: something-else"])
    (ok if st == 417 else bad)("an unknown Expect: %s" % st)

    # HEAD wherever GET goes
    for path, auth in (("/health", None), ("/", None), ("/v1/models", KEY), ("/models", KEY), ("/sampler", KEY),
                       ("/metrics", None)):
        st, h, _, _ = request(port, "GET", path, auth=auth)
        sth, hh, bodyh, _ = request(port, "HEAD", path, auth=auth)
        s = connect(port)  # on one connection: HEAD, then GET, nothing of the HEAD's body between
        s.sendall(("HEAD %s HTTP/1.1\r\nHost: x\r\n%s\r\nGET /health HTTP/1.1\r\nHost: x\r\n\r\n" %
                   (path, "Authorization: Bearer %s\r\n" % auth if auth else "")).encode())
        got = b""
        s.settimeout(5)
        while got.count(b"HTTP/1.1 ") < 2 or not got.rstrip().endswith(b"}"):
            d = s.recv(65536)
            if not d:
                break
            got += d
        s.close()
        first, _, second = got.partition(b"\r\n\r\n")
        if sth == st == 200 and hh.get("content-type") == h.get("content-type") and \
                int(hh.get("content-length", -1)) > 0 and first.startswith(b"HTTP/1.1 200") and \
                second.startswith(b"HTTP/1.1 200") and b'"status"' in second:
            ok("HEAD %s: 200 with GET's headers and no body" % path)
        else:
            bad("HEAD %s: %s %s (GET %s), pipelined: %r" % (path, sth, hh, st, got[:300]))

    # the key is checked when the headers are in, before the body
    s = connect(port)
    t0 = time.time()
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n{")
    st, _, body, _ = read_response(s, timeout=5)
    dt = time.time() - t0
    closed = is_closed(s)
    s.close()
    (ok if st == 401 and dt < 1 and closed else bad)(
        "no key, a 100,000-byte body announced: 401 after %.0f ms without the body, then closed (%s)"
        % (dt * 1000, closed))
    s = connect(port)
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer wrong\r\n"
              b"Transfer-Encoding: chunked\r\n\r\n1\r\n{\r\n")
    st, _, body, _ = read_response(s, timeout=5)
    s.close()
    (ok if st == 401 else bad)("a wrong key, chunked body: 401 at the headers: %s" % st)

    # deadlines: the body's total, and the headers' total, on a gateway with short ones
    p2 = free_port()
    gw = subprocess.Popen([gateway, "--coordinator", "ipc://%s/client.sock" % work, "--listen",
                           "127.0.0.1:%d" % p2, "--api-key", KEY, "--header-timeout-ms", "1000",
                           "--body-timeout-ms", "1000"], stderr=open(os.path.join(work, "gw2.err"), "w"))
    others.append(gw)
    if not wait_health(p2):
        bad("the second gateway never got healthy")
        return
    for what, first, trickle in (
            ("body", b"POST /tokenize HTTP/1.1\r\nHost: x\r\n" + A + b"Content-Length: 100\r\n\r\n", b"a"),
            ("headers", b"POST /tokenize HTTP/1.1\r\nHost: x\r\n" + A, b"X")):
        s = connect(p2)
        s.sendall(first)
        t0 = time.time()
        closed_at = None
        while time.time() - t0 < 4:
            try:
                s.send(trickle)
            except OSError:
                closed_at = time.time() - t0
                break
            r, _, _ = select.select([s], [], [], 0.1)
            if r:
                try:
                    if not s.recv(4096):
                        closed_at = time.time() - t0
                        break
                except OSError:
                    closed_at = time.time() - t0
                    break
        s.close()
        if closed_at is not None and 0.8 <= closed_at <= 2.0:
            ok("a byte every 100 ms does not extend the %s deadline (1 s): closed after %.2f s" % (what, closed_at))
        else:
            bad("%s deadline: closed after %s" % (what, closed_at))


# ---- floods ----

class Flood:
    """n connections from the given source addresses, each sending `first`
    and then one byte of `drip` per second; a connection the gateway closes
    is opened again (at most `reopen_per_s` a second), so the pressure stays."""

    def __init__(self, port, n, sources, first, drip):
        self.port, self.n, self.sources, self.first, self.drip = port, n, sources, first, drip
        self.socks = []
        self.closed = self.reopened = self.got401 = 0
        for i in range(n):
            self.socks.append(self.open(i))

    def open(self, i):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        s.bind((self.sources[i % len(self.sources)], 0))
        try:
            s.connect(("127.0.0.1", self.port))
        except BlockingIOError:
            pass
        return [s, 0, i]

    def tick(self, max_reopen):
        reopen = 0
        for ent in self.socks:
            if ent[0] is None:
                if reopen < max_reopen:
                    reopen += 1
                    self.reopened += 1
                    ent[:] = self.open(ent[2])
                continue
            s = ent[0]
            try:
                d = s.recv(4096)
                if b" 401 " in d[:16]:
                    self.got401 += 1
                if d == b"":
                    raise ConnectionResetError
            except (BlockingIOError, socket.timeout):
                pass
            except OSError:
                s.close()
                self.closed += 1
                ent[0] = None
                continue
            try:
                s.send(self.first if ent[1] == 0 else self.drip)
                ent[1] = 1
            except OSError:
                pass

    def close(self):
        for e in self.socks:
            if e[0] is not None:
                e[0].close()


def timed_health(p):
    t0 = time.time()
    st, _, body, _ = request(p, "GET", "/health")
    return st, (time.time() - t0) * 1000


def keyed_completion(p):
    t0 = time.time()
    st, _, body, _ = request(p, "POST", "/v1/completions", auth=KEY,
                             body='{"prompt":"Once upon a time","max_tokens":8,"temperature":0}')
    return st, (time.time() - t0) * 1000, body


def run_flood(name, n, sources, first, drip, secs=8):
    f = Flood(port, n, sources, first, drip)
    lat, served, t0 = [], [], time.time()
    next_tick = 0
    while time.time() - t0 < secs:
        if time.time() >= next_tick:
            f.tick(max_reopen=64)
            next_tick = time.time() + 1.0
        if time.time() - t0 > 1.5:  # once the flood is on
            st, ms = timed_health(port)
            lat.append((st, ms))
            if len(served) < 3 and len(lat) % 5 == 0:
                served.append(keyed_completion(port))
        time.sleep(0.2)
    f.close()
    worst = max(ms for _, ms in lat) if lat else None
    statuses = sorted(set(st for st, _ in lat))
    if lat and statuses == [200] and worst < 100 and served and all(s[0] == 200 for s in served):
        ok("%s: %d /health answers during it, all 200, the slowest %.1f ms; %d keyed completions served "
           "(slowest %.0f ms); the flood saw %d closes, %d reopened, %d answered 401"
           % (name, len(lat), worst, len(served), max(s[1] for s in served), f.closed, f.reopened, f.got401))
    else:
        bad("%s: /health %s (slowest %s ms); completions %s" %
            (name, statuses, worst, [(s[0], s[2][:100]) for s in served]))


def metric(name):
    st, _, body, _ = request(port, "GET", "/metrics")
    m = re.search(r"^lmpipe:%s\{[^}]*\} (\S+)$" % name, body.decode(), re.M)
    return float(m.group(1)) if m else None


def part_flood():
    # 512 connections from 8 addresses (64 each, the per-address default):
    # headers announcing a 100,000-byte body, then a byte a second
    run_flood("slow-body flood, 512 connections without a key", 512,
              ["127.0.0.%d" % i for i in range(2, 10)],
              b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n{", b"a")
    time.sleep(0.5)
    # 300 connections from 5 addresses: a header byte a second (--max-connections 256)
    ev0 = metric("http_connections_evicted_total")
    run_flood("slowloris, 300 connections", 300, ["127.0.0.%d" % i for i in range(20, 25)],
              b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nX-Slow: ", b"a")
    ev1 = metric("http_connections_evicted_total")
    if ev0 is not None and ev1 is not None and ev1 > ev0:
        ok("http_connections_evicted_total counted the slowloris: %g -> %g" % (ev0, ev1))
    else:
        bad("http_connections_evicted_total: %s -> %s" % (ev0, ev1))
    # one address alone cannot take more than its share
    s_list = []
    for i in range(80):
        s = socket.socket()
        s.bind(("127.0.0.30", 0))
        s.connect(("127.0.0.1", port))
        s_list.append(s)
    time.sleep(0.5)
    open_n = metric("http_connections")
    for s in s_list:
        s.close()
    if open_n is not None and open_n <= 64 + 8 + 2:
        ok("80 connections from one address: %g held (--max-connections-per-address 64, plus the reserve)" % open_n)
    else:
        bad("per-address cap: %s connections held" % open_n)
    code = up.poll()
    (ok if code is None else bad)("lmpipe up still running after the floods (%s)" % code)


def part_fair():
    # key 1: two requests of n=128 long choices (16 run, 240 wait)
    body = json.dumps({"prompt": "Once upon a time", "max_tokens": 400, "ignore_eos": True, "n": 128})
    hogs = []
    for _ in range(2):
        s = connect(port)
        s.sendall(("POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
                   "Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (KEY, len(body), body)).encode())
        hogs.append(s)
    t0 = time.time()
    while time.time() - t0 < 10:
        m = metric("num_requests_waiting")
        if m is not None and m >= 200:
            break
        time.sleep(0.1)
    waiting = metric("num_requests_waiting")
    # key 2: a short request, admitted at the next free slot
    t0 = time.time()
    st, _, resp, _ = request(port, "POST", "/v1/completions", auth=KEY2,
                             body='{"prompt":"Once upon a time","max_tokens":4,"temperature":0}')
    dt = time.time() - t0
    still = metric("num_requests_waiting")
    # fairness is read from the queue, not a clock: served in arrival order,
    # key 2 would wait until key 1's 240 choices had drained below 100
    if st == 200 and (waiting or 0) >= 200 and (still or 0) >= 100:
        ok("key 2's 4-token request served in %.2f s while key 1 had %g choices waiting (%g still)" % (dt, waiting, still))
    else:
        bad("key 2 behind key 1: %s after %.2f s (waiting %s, then %s): %s" % (st, dt, waiting, still, resp[:200]))
    # key 1 again: over its share (max_queued_per_client, 256 waiting) at once
    t0 = time.time()
    st, _, resp, _ = request(port, "POST", "/v1/completions", auth=KEY, body=body)
    dt = time.time() - t0
    e = json.loads(resp).get("error", {}) if resp.startswith(b"{") else {}
    if st == 429 and dt < 2 and e.get("code") == "rate_limit_exceeded":
        ok("key 1's third batch: 429 rate_limit_exceeded after %.0f ms (%s)" % (dt * 1000, e.get("message")))
    else:
        bad("key 1 over its share: %s after %.2f s: %s" % (st, dt, resp[:300]))
    st, _, resp, _ = request(port, "POST", "/v1/completions", auth=KEY2,
                             body='{"prompt":"Lily","max_tokens":2,"temperature":0}')
    (ok if st == 200 else bad)("key 2 is still served meanwhile: %s" % st)
    for s in hogs:
        s.close()
    t0 = time.time()
    while time.time() - t0 < 20 and (metric("num_requests_waiting") or 0) > 0:
        time.sleep(0.2)
    left = metric("num_requests_waiting")
    (ok if left == 0 else bad)("closing key 1's connections cancels its choices: %s waiting" % left)


try:
    {"fair": part_fair, "methods": part_methods, "framing": part_framing, "flood": part_flood}[part]()
except Exception as e:  # a crash of the test is a failure, with its trace
    import traceback
    traceback.print_exc()
    bad("the test itself failed: %r" % e)
finally:
    errs = open(os.path.join(work, "up.err")).read()
    stop_all()
    if "AddressSanitizer" in errs or "runtime error" in errs:
        bad("a sanitizer report: " + errs[-2000:])
sys.exit(1 if failed else 0)
