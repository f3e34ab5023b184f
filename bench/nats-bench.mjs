// nats-bench.mjs - what the NATS bridge costs (docs/BENCHMARKS.md).
//
// 1. The bus path's added time per token event over the ZeroMQ client: one
//    greedy request through `lmpipe generate --stream` (ZeroMQ, its stdout
//    piped here) and the same request through the bus (JetStream in,
//    lmpipe-nats, core NATS events out to this script's subscription), sent
//    together so that the coordinator runs both in the same engine steps and
//    emits their token events in the same loop turn.  Both paths end on this
//    script's event loop, stamped on arrival with one monotonic clock
//    (performance.now) before any parsing; each bus event is paired with the
//    nearest ZeroMQ event, and pairs further apart than a quarter of a step
//    are left out (a step where only one of them ran).  Which request reaches
//    the coordinator first alternates.
// 2. Requests/s for short generations: R requests of a few tokens published
//    at once, from the first publish to the last final event.
//
// Uses the npm nats client of the tests (npm ci in tests/nats) and Debian's
// nats-server.
// usage: node bench/nats-bench.mjs --model M.gguf [--build build] [--threads 2]
//          [--max-tokens 64] [--event-reps 8] [--requests 1000] [--short-tokens 4,16]
//          [--json out.json]
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir, cpus } from 'node:os';
import { join, resolve, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { sleep, pct, freePort, eventDiffs } from './common.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const require = createRequire(join(here, '../tests/nats/package.json'));
const { connect, headers, StringCodec } = require('nats');

const args = { build: 'build', threads: '2', 'max-tokens': '64', 'event-reps': '8', requests: '1000', 'short-tokens': '4,16' };
for (let i = 2; i < process.argv.length; i++) {
    const a = process.argv[i];
    if (!a.startsWith('--') || i + 1 >= process.argv.length) { console.error(`nats-bench: bad argument '${a}' (see the usage at the top of the file)`); process.exit(2); }
    args[a.slice(2)] = process.argv[++i];
}
if (!args.model) { console.error('nats-bench: --model GGUF is required'); process.exit(2); }
const model = resolve(args.model);
const lmpipe = resolve(args.build, 'tools/lmpipe');
const maxTokens = Number(args['max-tokens']), eventReps = Number(args['event-reps']), nReq = Number(args.requests);
const shortTokens = args['short-tokens'].split(',').filter(Boolean).map(Number);
const sc = StringCodec();

const work = mkdtempSync(join(tmpdir(), 'nats-bench-'));
const children = [];
process.on('exit', () => {
    for (const c of children) try { c.kill('SIGKILL'); } catch { /* gone */ }
    try { rmSync(work, { recursive: true, force: true, maxRetries: 5 }); } catch { /* nats-server still writing: left in /tmp */ }
});
for (const s of ['SIGINT', 'SIGTERM']) process.on(s, () => process.exit(1));
async function until(pred, ms, what) {
    const end = Date.now() + ms;
    while (Date.now() < end) { if (pred()) return; await sleep(50); }
    throw new Error(`timed out waiting for ${what}`);
}

// ---- nats-server and lmpipe up --nats ----
const port = await freePort();
const ns = spawn('nats-server', ['-js', '-a', '127.0.0.1', '-p', String(port), '-sd', join(work, 'js')], { stdio: ['ignore', 'ignore', 'pipe'] });
children.push(ns);
let nsLog = '';
ns.stderr.on('data', (d) => { nsLog += d; });
await until(() => nsLog.includes('Server is ready'), 10000, 'nats-server');
const url = `nats://127.0.0.1:${port}`;
const endpoint = `ipc://${work}/coordinator.sock`;
writeFileSync(join(work, 'up.conf'), `model = ${model}\nendpoint = ${endpoint}\nthreads = ${args.threads}\nnats.url = ${url}\n`);
const up = spawn(lmpipe, ['up', '--config', join(work, 'up.conf')], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, LMPIPE_LOG: 'info' } });
children.push(up);
let upOut = '', upErr = '';
up.stdout.on('data', (d) => { upOut += d; });
up.stderr.on('data', (d) => { upErr += d; });
await until(() => /ready on/.test(upOut) && /lmpipe-nats: info: consuming/.test(upErr), 120000, 'lmpipe up and its bridge');
const nc = await connect({ servers: url });
const js = nc.jetstream();
const waiting = new Map(); // request id -> handler of its events
nc.subscribe('bench.ev.>', { callback: (err, m) => {
    const now = performance.now();
    const e = JSON.parse(sc.decode(m.data));
    const h = waiting.get(e.id);
    if (h) h(e, now);
} });
let nextId = 0;
function busRequest(body) {
    const id = `b${++nextId}`;
    const h = headers();
    h.set('Nats-Msg-Id', id);
    h.set('Lmpipe-Reply-To', `bench.ev.${id}`);
    return { id, sent: js.publish('lmpipe.req.bench', sc.encode(JSON.stringify(body)), { headers: h }) };
}

// ---- 1. per token event ----
function zmqStream(prompt, nTok) {
    const c = spawn(lmpipe, ['generate', '--endpoint', endpoint, '--prompt', prompt, '--max-tokens', String(nTok), '--temperature', '0',
                             '--ignore-eos', '--stream'], { stdio: ['ignore', 'pipe', 'pipe'] });
    const marks = [];
    let bytes = 0, err = '';
    c.stdout.on('data', (d) => { bytes += d.length; marks.push([bytes, performance.now()]); });
    c.stderr.on('data', (d) => { err += d; });
    return new Promise((res, rej) => c.on('exit', (code) => code ? rej(new Error(`lmpipe generate: ${code} ${err}`)) : res(marks)));
}
function busStream(prompt, nTok) {
    const marks = [];
    let bytes = 0;
    const { id } = busRequest({ prompt, n_predict: nTok, temperature: 0, ignore_eos: true });
    return new Promise((res) => {
        waiting.set(id, (e, now) => {
            if (e.piece) { bytes += Buffer.byteLength(e.piece); marks.push([bytes, now]); }
            if (e.final) { waiting.delete(id); res(marks); }
        });
    });
}
const out = { model: args.model, threads: Number(args.threads), max_tokens: maxTokens, cpus: cpus().length, cpu: cpus()[0].model, event: null, throughput: [] };
console.log(`nats-bench: ${args.model}, threads ${args.threads}, ${out.cpus} CPUs (${out.cpu})`);
await Promise.all([zmqStream('Warm up', 8), busStream('Warm up', 8)]);
const prompt = 'The quick brown fox jumps over the lazy dog and then';
const reps = [];
for (let r = 0; r < eventReps; r++) {
    const lead = r % 2 ? 50 : 0;
    const z = zmqStream(prompt, maxTokens);
    await sleep(lead);
    const [zm, bm] = await Promise.all([z, busStream(prompt, maxTokens)]);
    const gaps = zm.slice(1).map((m, i) => (m[1] - zm[i][1]) * 1000);
    const itl = pct(gaps, 50);
    const d = eventDiffs(zm, bm, itl);
    reps.push({ lead_ms: lead, paired: d.length, events: bm.length, itl_us: itl, diffs: d });
}
const all = reps.flatMap((r) => r.diffs);
out.event = { reps: reps.map(({ diffs, ...r }) => ({ ...r, median_us: pct(diffs, 50) })), n: all.length,
              events: reps.reduce((a, r) => a + r.events, 0), p50_us: pct(all, 50), p99_us: pct(all, 99), p90_us: pct(all, 90),
              itl_us: pct(reps.map((r) => r.itl_us), 50) };
console.log(`bus minus ZeroMQ client, per token event: p50 ${out.event.p50_us.toFixed(0)} us, p90 ${out.event.p90_us.toFixed(0)} us, ` +
            `p99 ${out.event.p99_us.toFixed(0)} us (${out.event.n} of ${out.event.events} events paired; step ${(out.event.itl_us / 1000).toFixed(1)} ms)`);

// ---- 2. requests/s ----
for (const nTok of shortTokens) {
    let done = 0;
    const t0 = performance.now();
    const finished = new Promise((res) => {
        for (let i = 0; i < nReq; i++) {
            const { id } = busRequest({ prompt: `Story ${i % 16}:`, n_predict: nTok, temperature: 0, ignore_eos: true });
            waiting.set(id, (e) => { if (e.final) { waiting.delete(id); if (++done === nReq) res(); } });
        }
    });
    await finished;
    const secs = (performance.now() - t0) / 1000;
    out.throughput.push({ n_predict: nTok, requests: nReq, seconds: secs, requests_per_s: nReq / secs, tokens_per_s: (nReq * nTok) / secs });
    console.log(`${nReq} requests of ${nTok} tokens: ${(nReq / secs).toFixed(0)} requests/s, ${((nReq * nTok) / secs).toFixed(0)} tokens/s (${secs.toFixed(2)} s)`);
}
if (args.json) writeFileSync(args.json, JSON.stringify(out, null, 1));
await nc.close();
process.exit(0);
