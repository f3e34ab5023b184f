// common.mjs - pieces the node benchmarks share (http-bench, prefix-bench,
// nats-bench): ports, servers' start and stop, percentiles, the pairing of
// token events, and the tokens llama-server cannot stream.
import { openSync, readSync, closeSync } from 'node:fs';
import { createServer } from 'node:net';
import { request } from 'node:http';

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
export const pct = (xs, p) => {
    if (!xs.length) return NaN;
    const s = [...xs].sort((a, b) => a - b);
    return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};

export function freePort() {
    return new Promise((res, rej) => {
        const s = createServer();
        s.listen(0, '127.0.0.1', () => { const p = s.address().port; s.close(() => res(p)); });
        s.on('error', rej);
    });
}

export async function waitHealthy(base, child, what) {
    for (let i = 0; i < 1200; i++) {
        if (child.exitCode !== null || child.signalCode !== null)
            throw new Error(`${what} exited with ${child.exitCode ?? child.signalCode}`);
        try { if ((await fetch(`${base}/health`)).status === 200) return; } catch { /* not up yet */ }
        await sleep(100);
    }
    throw new Error(`${what} did not get healthy on ${base}`);
}

export async function stop(c) {
    c.stopping = true;
    if (c.exitCode !== null || c.signalCode !== null) return;
    const done = new Promise((r) => c.on('exit', r));
    c.kill('SIGTERM');
    await Promise.race([done, sleep(10000)]);
    if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
}

// POST a JSON body and call onEvent(json, now) for each SSE `data: {...}`.
// A fresh connection per request, closed after it (agent: false): idle
// keep-alive connections would hold llama-server's HTTP threads.
export function ssePost(srv, path, body, onEvent, signal) {
    return new Promise((res, rej) => {
        const req = request(`${srv.base}${path}`, { method: 'POST', agent: false, signal,
                                                           headers: { 'Content-Type': 'application/json' } }, (r) => {
            let buf = '';
            r.setEncoding('utf8');
            if (r.statusCode !== 200) {
                r.on('data', (d) => { buf += d; });
                r.on('end', () => rej(new Error(`${srv.name}: HTTP ${r.statusCode}: ${buf}`)));
                return;
            }
            r.on('data', (d) => {
                const now = performance.now();
                buf += d;
                let i;
                while ((i = buf.indexOf('\n\n')) >= 0) {
                    const ev = buf.slice(0, i);
                    buf = buf.slice(i + 2);
                    if (ev.startsWith('data: {')) {
                        const j = JSON.parse(ev.slice(6));
                        if (j.error) return rej(new Error(`${srv.name}: ${JSON.stringify(j.error)}`));
                        onEvent(j, now);
                    }
                }
            });
            r.on('end', () => res());
            r.on('error', rej);
        });
        req.on('error', rej);
        req.end(JSON.stringify(body));
    });
}

// Both requests decode in the same engine steps, so each step sends their
// two token events one after the other, whatever token each is at (they need
// not have started in the same step).  Each event of the other path (SSE, the
// bus) is paired with the nearest ZeroMQ event; pairs further apart than a
// quarter of a step are from different steps (a step where one of them was
// not scheduled) and are left out.  Returns the other path's times minus the
// ZeroMQ ones, in microseconds.
export function eventDiffs(zmq, other, itl) {
    const z = zmq.map((m) => m[1]);
    const out = [];
    for (const [, t] of other) {
        let lo = 0, hi = z.length - 1;
        while (lo < hi) { const mid = (lo + hi) >> 1; if (z[mid] < t) lo = mid + 1; else hi = mid; }
        const near = [z[lo], z[lo - 1]].filter((x) => x !== undefined).reduce((a, x) => (Math.abs(t - x) < Math.abs(t - a) ? x : a));
        const d = (t - near) * 1000;
        if (Math.abs(d) < itl / 4) out.push(d);
    }
    return out;
}

// Tokens whose text is not whole UTF-8 on its own (byte-level BPE pieces of
// a character), read from the GGUF's tokenizer.ggml.tokens.  llama-server
// ends a stream with a 500 ("does not match the expected Content-only
// format") at such a token, and a random-weight model picks them freely, so
// llama-server gets them as logit_bias false (lmpipe streams them, and takes
// at most 1024 logit_bias entries; the bias is microseconds a token against
// the model's milliseconds, and both generate the same number of tokens).
export function partialUtf8Tokens(path) {
    const fd = Buffer.alloc(64 << 20); // the vocabulary lies in the header
    const f = openSync(path, 'r');
    readSync(f, fd, 0, fd.length, 0);
    closeSync(f);
    let p = 16;
    const u32 = () => { const v = fd.readUInt32LE(p); p += 4; return v; };
    const u64 = () => { const v = Number(fd.readBigUInt64LE(p)); p += 8; return v; };
    const str = () => { const n = u64(); const v = fd.subarray(p, p + n); p += n; return v; };
    const fixed = { 0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8 };
    const skip = (t) => { if (fixed[t]) p += fixed[t]; else if (t === 8) str(); else if (t === 9) { const et = u32(); const n = u64(); for (let i = 0; i < n; i++) skip(et); } };
    const nKv = u64();
    // GPT-2's byte <-> printable character map of byte-level BPE vocabularies
    const dec = new Map();
    const printable = (b) => (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
    for (let b = 0, k = 0; b < 256; b++) dec.set(String.fromCodePoint(printable(b) ? b : 256 + k++), b);
    const strict = new TextDecoder('utf-8', { fatal: true });
    const bad = [];
    for (let i = 0; i < nKv; i++) {
        const key = str().toString();
        const t = u32();
        if (key !== 'tokenizer.ggml.tokens') { skip(t); continue; }
        u32();
        const n = u64();
        for (let id = 0; id < n; id++) {
            const chars = [...str().toString()];
            if (!chars.every((c) => dec.has(c))) continue; // not a byte-level piece
            try { strict.decode(Uint8Array.from(chars.map((c) => dec.get(c)))); } catch { bad.push(id); }
        }
        break;
    }
    return bad;
}
