// http-bench.mjs - lmpipe's HTTP gateway against llama.cpp's llama-server,
// in one run, on one GGUF and the same threads (docs/BENCHMARKS.md).
//
// 1. Throughput: N concurrent streaming clients (N = 1, 8, 16) POST the same
//    prompt set to llama.cpp's /completion (stream, greedy, ignore_eos, fixed
//    n_predict: random-weight models would otherwise stop at random), the
//    two servers alternating round by round.  Reported: aggregate generated
//    tokens/s (all tokens / first request sent to last stream ended) and
//    TTFT p50/p99 (request sent to the first token's chunk).
// 2. The gateway's added time per token event over the ZeroMQ client: one
//    greedy request through `lmpipe generate --stream` (ZeroMQ, its stdout
//    piped here) and the same request through the gateway's SSE, sent
//    together so the coordinator runs them in the same engine steps and emits
//    both token events in the same loop turn (a long background request keeps
//    the engine stepping so the two join at one step boundary).  Each path has one process hop
//    to this script (lmpipe generate -> pipe; lmpipe-http -> TCP), both read
//    on this event loop and stamped with one monotonic clock
//    (performance.now); the difference at each token boundary (matched by
//    text offset) is what the gateway adds.  Which request reaches the
//    coordinator first alternates, so its emission order cancels out.
//
// usage: node bench/http-bench.mjs --model Q.gguf [--build build]
//          [--llama-server ../shared/llama.cpp/bin/llama-server] [--threads 2]
//          [--clients 1,8,16] [--max-tokens 64] [--rounds 3] [--event-reps 8]
//          [--json out.json]
import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir, cpus } from 'node:os';
import { join, resolve } from 'node:path';
import { sleep, pct, freePort, waitHealthy, stop, ssePost, eventDiffs, partialUtf8Tokens } from './common.mjs';

const args = { build: 'build', 'llama-server': '../shared/llama.cpp/bin/llama-server', threads: '2', clients: '1,8,16',
               'max-tokens': '64', rounds: '3', 'event-reps': '8', 'n-ctx': '512' };
for (let i = 2; i < process.argv.length; i++) {
    const a = process.argv[i];
    if (!a.startsWith('--') || i + 1 >= process.argv.length) { console.error(`http-bench: bad argument '${a}' (see the usage at the top of the file)`); process.exit(2); }
    args[a.slice(2)] = process.argv[++i];
}
if (!args.model) { console.error('http-bench: --model GGUF is required'); process.exit(2); }
const model = resolve(args.model);
const lmpipe = resolve(args.build, 'tools/lmpipe');
const llamaServer = resolve(args['llama-server']);
const threads = Number(args.threads), maxTokens = Number(args['max-tokens']), rounds = Number(args.rounds);
const nCtx = Number(args['n-ctx']), eventReps = Number(args['event-reps']);
const banned = partialUtf8Tokens(model).map((id) => [id, false]);
const clientCounts = args.clients.split(',').filter(Boolean).map(Number);
const maxClients = Math.max(2, ...clientCounts);

const prompts = [
    'The history of the printing press begins', 'Write a short story about a lighthouse keeper who',
    'Explain how a refrigerator moves heat from inside to outside', 'A list of ten uses for a paperclip:',
    'In the morning the market opened and', 'The recipe calls for flour, water, salt and',
    'Dear committee, I am writing to ask', 'The train left the station at noon, heading north toward',
    'Photosynthesis turns light into chemical energy by', 'Once upon a time in a small village by the sea',
    'The main differences between TCP and UDP are', 'She opened the old wooden box and found',
    'To configure the server, first edit the file', 'The mountain path was narrow, and the wind',
    'Summarize the plot of a detective novel in which', 'The best way to learn a new language is',
];

const work = mkdtempSync(join(tmpdir(), 'http-bench-'));
const children = [];
process.on('exit', () => { for (const c of children) try { c.kill('SIGTERM'); } catch { /* gone */ } rmSync(work, { recursive: true, force: true }); });
for (const s of ['SIGINT', 'SIGTERM']) process.on(s, () => process.exit(1));

async function modelName(base) {
    return (await (await fetch(`${base}/v1/models`)).json()).data[0].id;
}
function start(cmd, argv, what) {
    const c = spawn(cmd, argv, { stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    c.stderr.on('data', (d) => { err = (err + d).slice(-4000); });
    c.on('exit', (code, sig) => { if ((code || sig) && !c.stopping) console.error(`${what} exited ${code ?? sig}: ${err}`); });
    children.push(c);
    return c;
}

async function startLmpipe(slots = maxClients) {
    const port = await freePort();
    const conf = join(work, `lmpipe-${port}.conf`);
    // the engine's threads as llama-server's -t, slots for the most clients
    writeFileSync(conf, `model = ${model}\nthreads = ${threads}\nmax_seqs = ${slots}\nn_ctx = ${nCtx}\nmax_batch_tokens = 512\n`);
    const endpoint = `ipc://${work}/coordinator-${port}.sock`;
    const c = start(lmpipe, ['up', '--config', conf, '--endpoint', endpoint, '--http', `127.0.0.1:${port}`], 'lmpipe up');
    const base = `http://127.0.0.1:${port}`;
    await waitHealthy(base, c, 'lmpipe up --http');
    return { name: 'lmpipe', base, child: c, endpoint, model: await modelName(base), extra: {} };
}
async function startLlama(n) {
    const port = await freePort();
    const c = start(llamaServer, ['-m', model, '-t', String(threads), '-tb', String(threads), '-np', String(n), '-c', String(n * nCtx),
                                  '--host', '127.0.0.1', '--port', String(port), '-ngl', '0'], 'llama-server');
    const base = `http://127.0.0.1:${port}`;
    await waitHealthy(base, c, 'llama-server');
    // no prompt cache between rounds: lmpipe keeps none either
    return { name: 'llama-server', base, child: c, model: await modelName(base), extra: { cache_prompt: false, logit_bias: banned } };
}



// One streamed completion; times from performance.now().
// llama.cpp's /completion on both: llama-server's /v1/completions parses the
// output for a content format and fails a stream with a 500 when a
// random-weight model emits what looks like markup.
async function streamOne(srv, prompt, nTok) {
    const t0 = performance.now();
    let first = null, chunks = 0, predicted = null;
    await ssePost(srv, '/completion', { prompt, n_predict: nTok, temperature: 0, stream: true, ignore_eos: true, ...srv.extra }, (j, now) => {
        if (j.stop) { predicted = j.tokens_predicted ?? null; return; }
        chunks++;
        if (first === null) first = now;
    });
    return { ttft: first - t0, t0, end: performance.now(), tokens: predicted ?? chunks };
}


async function loadRun(srv, n, round, nTok = maxTokens) {
    const t = await Promise.all([...Array(n)].map((_, i) => streamOne(srv, `${round + 1}. ${prompts[i % prompts.length]}`, nTok)));
    const tokens = t.reduce((a, x) => a + x.tokens, 0);
    if (tokens !== n * nTok) throw new Error(`${srv.name}: ${tokens} tokens generated, not ${n} x ${nTok}`);
    const wall = (Math.max(...t.map((x) => x.end)) - Math.min(...t.map((x) => x.t0))) / 1000;
    return { tokens, wall, ttfts: t.map((x) => x.ttft) };
}

// ---- 2. the gateway's added time per token event ----
function zmqStream(endpoint, prompt, nTok) {
    const c = spawn(lmpipe, ['generate', '--endpoint', endpoint, '--prompt', prompt, '--max-tokens', String(nTok), '--temperature', '0',
                             '--ignore-eos', '--stream'], { stdio: ['ignore', 'pipe', 'pipe'] });
    const marks = []; // [bytes so far, time]
    let bytes = 0, err = '';
    c.stdout.on('data', (d) => { bytes += d.length; marks.push([bytes, performance.now()]); });
    c.stderr.on('data', (d) => { err += d; });
    return new Promise((res, rej) => c.on('exit', (code) => code ? rej(new Error(`lmpipe generate: ${code} ${err}`)) : res(marks)));
}
// The SSE side is read off a plain TCP socket and stamped at the bytes'
// arrival, as the ZeroMQ side is off its pipe: node's HTTP client would add
// its own parsing and stream plumbing to one side only.  One write per event
// (the gateway's), so an event's "\n\n" arrives in the read that stamps it.
function sseStream(srv, prompt, nTok) {
    const u = new URL(srv.base);
    const body = JSON.stringify({ model: srv.model, prompt, max_tokens: nTok, temperature: 0, stream: true, ignore_eos: true });
    return new Promise((res, rej) => {
        const marks = [];
        let raw = '', bytes = 0, head = true;
        const sock = connect(Number(u.port), u.hostname, () => {
            sock.setNoDelay(true);
            sock.write(`POST /v1/completions HTTP/1.1\r\nHost: ${u.host}\r\nContent-Type: application/json\r\n` +
                       `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
        });
        sock.setEncoding('utf8');
        sock.on('data', (d) => {
            const now = performance.now();
            raw += d;
            if (head) {
                const h = raw.indexOf('\r\n\r\n');
                if (h < 0) return;
                if (!raw.startsWith('HTTP/1.1 200')) return rej(new Error(`${srv.name}: ${raw.split('\r\n')[0]}`));
                head = false;
                raw = raw.slice(h + 4);
            }
            let i;
            while ((i = raw.indexOf('\n\n')) >= 0) {
                const ev = raw.slice(0, i);
                raw = raw.slice(i + 2);
                const k = ev.indexOf('data: {');
                if (k < 0) continue;
                const j = JSON.parse(ev.slice(k + 6));
                if (j.error) return rej(new Error(`${srv.name}: ${JSON.stringify(j.error)}`));
                const text = j.choices?.[0]?.text ?? '';
                if (text) { bytes += Buffer.byteLength(text); marks.push([bytes, now]); }
            }
        });
        sock.on('end', () => res(marks));
        sock.on('error', rej);
    });
}
async function eventRun(srv) {
    const prompt = 'The quick brown fox jumps over the lazy dog and then';
    const reps = [];
    for (let r = 0; r < eventReps; r++) {
        // Each request in turn starts 50 ms ahead of the other, so that both
        // emission orders within a step occur (see added_us below).
        const lead = r % 2 ? 50 : -50;
        let z, s;
        if (lead > 0) { z = zmqStream(srv.endpoint, prompt, maxTokens); await sleep(lead); s = sseStream(srv, prompt, maxTokens); }
        else { s = sseStream(srv, prompt, maxTokens); await sleep(-lead); z = zmqStream(srv.endpoint, prompt, maxTokens); }
        const [zm, sm] = await Promise.all([z, s]);
        const gaps = zm.slice(1).map((m, i) => (m[1] - zm[i][1]) * 1000);
        const itl = pct(gaps, 50);
        const d = eventDiffs(zm, sm, itl);
        reps.push({ lead_ms: lead, paired: d.length, events: sm.length, median_us: pct(d, 50), itl_us: itl, diffs: d });
    }
    const all = reps.flatMap((r) => r.diffs);
    const byLead = (l) => reps.filter((r) => r.lead_ms === l).flatMap((r) => r.diffs);
    // Within a step the coordinator sends the two events one after the
    // other, d apart, in the order of its rows: an event whose ZeroMQ twin
    // left first measures g + d, one whose SSE twin left first g - d, g being
    // what the gateway's path adds.  The differences fall in two clusters,
    // one each side of zero (d is larger than g), so the sign says the order;
    // g is the mean of the two clusters' medians, d half their distance
    // (null unless both orders occurred).
    const zFirst = all.filter((x) => x > 0), sFirst = all.filter((x) => x <= 0);
    const both = zFirst.length > 0 && sFirst.length > 0;
    return { reps: reps.map(({ diffs, ...r }) => r), n: all.length, events: reps.reduce((a, r) => a + r.events, 0),
             p50_us: pct(all, 50), p90_us: pct(all, 90), mean_us: all.reduce((a, x) => a + x, 0) / all.length,
             p50_sse_ahead_us: pct(byLead(-50), 50), p50_zmq_ahead_us: pct(byLead(50), 50),
             added_us: both ? (pct(zFirst, 50) + pct(sFirst, 50)) / 2 : null,
             send_gap_us: both ? (pct(zFirst, 50) - pct(sFirst, 50)) / 2 : null,
             zmq_first: zFirst.length, sse_first: sFirst.length };
}

// ---- main ----
const out = { model: args.model, threads, max_tokens: maxTokens, rounds, cpus: cpus().length, cpu: cpus()[0].model, load: [], event: null };
console.log(`http-bench: ${args.model}, -t ${threads}, max_tokens ${maxTokens}, ${banned.length} partial-UTF-8 tokens banned at llama-server, ${rounds} alternating rounds, clients ${clientCounts.join(',')}, ${out.cpus} CPUs (${out.cpu})`);
const lm = await startLmpipe();
for (const n of clientCounts) {
    const ll = await startLlama(n);
    const servers = [lm, ll];
    for (const s of servers) await loadRun(s, n, -1, 8); // warm-up: weights paged in, threads up
    const acc = { lmpipe: { tokens: 0, wall: 0, ttfts: [], tps: [] }, 'llama-server': { tokens: 0, wall: 0, ttfts: [], tps: [] } };
    for (let r = 0; r < rounds; r++) {
        for (const s of r % 2 ? [ll, lm] : [lm, ll]) {
            const x = await loadRun(s, n, r);
            const a = acc[s.name];
            a.tokens += x.tokens; a.wall += x.wall; a.ttfts.push(...x.ttfts); a.tps.push(x.tokens / x.wall);
            console.log(`  N=${n} round ${r + 1} ${s.name.padEnd(12)} ${(x.tokens / x.wall).toFixed(1).padStart(7)} tok/s  TTFT p50 ${pct(x.ttfts, 50).toFixed(0)} ms`);
        }
    }
    await stop(ll.child);
    const row = { clients: n };
    for (const [name, a] of Object.entries(acc))
        row[name] = { tok_s: a.tokens / a.wall, tok_s_rounds: a.tps, ttft_p50_ms: pct(a.ttfts, 50), ttft_p99_ms: pct(a.ttfts, 99) };
    row.ratio = row.lmpipe.tok_s / row['llama-server'].tok_s;
    out.load.push(row);
}
out.event = await eventRun(lm);
await stop(lm.child);
if (args.json) writeFileSync(args.json, JSON.stringify(out, null, 1));

console.log('\n| clients | lmpipe tok/s | llama-server tok/s | ratio | lmpipe TTFT p50 / p99 (ms) | llama-server TTFT p50 / p99 (ms) |');
console.log('|---:|---:|---:|---:|---:|---:|');
for (const r of out.load)
    console.log(`| ${r.clients} | ${r.lmpipe.tok_s.toFixed(1)} | ${r['llama-server'].tok_s.toFixed(1)} | ${r.ratio.toFixed(2)}x | ` +
                `${r.lmpipe.ttft_p50_ms.toFixed(0)} / ${r.lmpipe.ttft_p99_ms.toFixed(0)} | ${r['llama-server'].ttft_p50_ms.toFixed(0)} / ${r['llama-server'].ttft_p99_ms.toFixed(0)} |`);
const e = out.event;
if (eventReps > 0 && e?.n) console.log(`\ngateway SSE minus ZeroMQ client, per token event: p50 ${e.p50_us.toFixed(0)} us, p90 ${e.p90_us.toFixed(0)} us, mean ${e.mean_us.toFixed(0)} us ` +
            `(${e.n} of ${e.events} SSE events paired with a ZeroMQ event of the same step; p50 with the SSE request started 50 ms ahead ${e.p50_sse_ahead_us?.toFixed(0)} us, 50 ms behind ${e.p50_zmq_ahead_us?.toFixed(0)} us)`);
if (eventReps > 0 && e?.n) console.log(e.added_us === null
    ? `time the gateway's path adds, order-balanced: n/a (every step sent its two events in one order)`
    : `time the gateway's path adds, order-balanced: ${e.added_us.toFixed(0)} us; the coordinator sends a step's two events ` +
      `${e.send_gap_us.toFixed(0)} us apart (${e.zmq_first} events ZeroMQ first, ${e.sse_first} SSE first)`);
process.exit(0);
