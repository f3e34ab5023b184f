// prefix-bench.mjs - prefix reuse: lmpipe's HTTP gateway against llama.cpp's
// llama-server (cache_prompt on, the same -np), in one run, on one GGUF and
// the same threads (docs/BENCHMARKS.md, issue #20).
//
// 1. Multi-turn chat: C conversations (default 8) of T turns (6), all at
//    once; each turn sends the whole conversation so far (the earlier
//    prompts and the server's own answers) plus about U new user tokens
//    (100), and generates G tokens (64).  Reported per turn: TTFT p50/p99
//    (request sent to the first token's chunk) over the conversations, and
//    the turn-T / turn-1 TTFT p50 ratio.  --carry tokens (the default)
//    sends the conversation as token ids: each user turn tokenized once,
//    each answer as the ids the server generated, as a trained model's
//    answer survives a detokenize/tokenize round trip.  --carry text sends
//    it as text, which random weights' answers do not survive (a third of
//    their tokens come back the same), so most of every answer is
//    prefilled again on the next turn, on both servers.
// 2. Shared system prompt: R requests (64), a common P-token prefix (1,000)
//    and distinct Q-token questions (50), F in flight (8), G tokens each.
//    Reported: TTFT p50/p99 and aggregate generated tokens/s (all tokens /
//    first request sent to last stream ended).
//
// Both servers get the same texts (sized once through lmpipe's /tokenize),
// greedy, ignore_eos, a fixed n_predict (random-weight models would
// otherwise stop at random), on llama.cpp's /completion.  Each server's
// conversation continues with the text it generated itself.
// --no-prefix-cache also runs lmpipe with its prefix cache off.
//
// usage: node bench/prefix-bench.mjs --model Q.gguf [--build build]
//          [--llama-server ../shared/llama.cpp/bin/llama-server] [--threads 2]
//          [--conversations 8] [--turns 6] [--user-tokens 100] [--gen-tokens 64]
//          [--requests 64] [--prefix-tokens 1000] [--question-tokens 50] [--in-flight 8]
//          [--carry tokens|text] [--no-prefix-cache 1] [--json out.json]
import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { sleep, pct, freePort, waitHealthy, stop, ssePost, partialUtf8Tokens } from './common.mjs';

const args = { build: 'build', 'llama-server': '../shared/llama.cpp/bin/llama-server', threads: '2',
               conversations: '8', turns: '6', 'user-tokens': '100', 'gen-tokens': '64', requests: '64',
               'prefix-tokens': '1000', 'question-tokens': '50', 'in-flight': '8', carry: 'tokens' };
for (let i = 2; i < process.argv.length; i++) {
    const a = process.argv[i];
    if (!a.startsWith('--') || i + 1 >= process.argv.length) { console.error(`prefix-bench: bad argument '${a}' (see the usage at the top of the file)`); process.exit(2); }
    args[a.slice(2)] = process.argv[++i];
}
if (!args.model) { console.error('prefix-bench: --model GGUF is required'); process.exit(2); }
const num = (k) => {
    const v = Number(args[k]);
    if (!Number.isInteger(v) || v < 1) { console.error(`prefix-bench: --${k}: '${args[k]}' is not a positive integer`); process.exit(2); }
    return v;
};
const model = resolve(args.model);
const lmpipe = resolve(args.build, 'tools/lmpipe');
const llamaServer = resolve(args['llama-server']);
const threads = num('threads'), nConv = num('conversations'), nTurns = num('turns'), userTok = num('user-tokens');
const genTok = num('gen-tokens'), nReq = num('requests'), prefixTok = num('prefix-tokens');
const questionTok = num('question-tokens'), inFlight = num('in-flight');
const slots = Math.max(nConv, inFlight);
if (args.carry !== 'tokens' && args.carry !== 'text') { console.error(`prefix-bench: --carry: '${args.carry}' is not tokens or text`); process.exit(2); }
const byIds = args.carry === 'tokens';
// Each slot holds one whole conversation, or a prefix and its question and answer.
const ctxPerSlot = Math.max(nTurns * (userTok + genTok), prefixTok + questionTok + genTok) + 64;
const banned = partialUtf8Tokens(model).map((id) => [id, false]);

const work = mkdtempSync(join(tmpdir(), 'prefix-bench-'));
const children = [];
process.on('exit', () => { for (const c of children) try { c.kill('SIGTERM'); } catch { /* gone */ } rmSync(work, { recursive: true, force: true }); });
for (const s of ['SIGINT', 'SIGTERM']) process.on(s, () => process.exit(1));

function start(cmd, argv, what) {
    const c = spawn(cmd, argv, { stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    c.stderr.on('data', (d) => { err = (err + d).slice(-4000); });
    c.on('exit', (code, sig) => { if ((code || sig) && !c.stopping) console.error(`${what} exited ${code ?? sig}: ${err}`); });
    children.push(c);
    return c;
}

async function startLmpipe(cache) {
    const port = await freePort();
    const conf = join(work, `lmpipe-${port}.conf`);
    writeFileSync(conf, `model = ${model}\nthreads = ${threads}\nmax_seqs = ${slots}\nn_ctx = ${ctxPerSlot}\n` +
                        `max_batch_tokens = 512\ncoordinator.prefix_cache = ${cache}\n`);
    const c = start(lmpipe, ['up', '--config', conf, '--endpoint', `ipc://${work}/coordinator-${port}.sock`,
                             '--http', `127.0.0.1:${port}`], 'lmpipe up');
    const base = `http://127.0.0.1:${port}`;
    await waitHealthy(base, c, 'lmpipe up --http');
    return { name: cache ? 'lmpipe' : 'lmpipe (no prefix cache)', base, child: c, extra: {} };
}
async function startLlama() {
    const port = await freePort();
    const c = start(llamaServer, ['-m', model, '-t', String(threads), '-tb', String(threads), '-np', String(slots),
                                  '-c', String(slots * ctxPerSlot), '--host', '127.0.0.1', '--port', String(port), '-ngl', '0'],
                    'llama-server');
    const base = `http://127.0.0.1:${port}`;
    await waitHealthy(base, c, 'llama-server');
    return { name: 'llama-server', base, child: c, extra: { cache_prompt: true, logit_bias: banned, return_tokens: true } };
}


// One streamed completion: its TTFT (ms), the text, ids and token count generated.
async function complete(srv, prompt, nTok) {
    const t0 = performance.now();
    let first = null, chunks = 0, predicted = null, text = '';
    const ids = [];
    await ssePost(srv, '/completion', { prompt, n_predict: nTok, temperature: 0, stream: true, ignore_eos: true,
                                        ...srv.extra }, (j, now) => {
        if (typeof j.content === 'string') text += j.content;
        if (Array.isArray(j.tokens)) ids.push(...j.tokens);
        if (j.stop) { predicted = j.tokens_predicted ?? null; return; }
        chunks++;
        if (first === null) first = now;
    });
    const tokens = predicted ?? chunks;
    if (tokens !== nTok) throw new Error(`${srv.name}: ${tokens} tokens generated, not ${nTok}`);
    if (byIds && ids.length !== nTok) throw new Error(`${srv.name}: ${ids.length} token ids streamed, not ${nTok}`);
    return { ttft: first - t0, t0, end: performance.now(), text, ids, tokens };
}


// About n tokens of plain text, different for each seed (words counted
// once through /tokenize).
const words = ('the a river mountain city garden winter morning story letter music window road friend market ' +
               'history engine light paper ocean forest question answer reason system kitchen village teacher ' +
               'bridge harbor station lantern journey silver copper meadow thunder quiet bright ancient careful').split(' ');
async function tokenize(base, text, addSpecial) {
    const r = await fetch(`${base}/tokenize`, { method: 'POST', headers: { 'Content-Type': 'application/json' },
                                                body: JSON.stringify({ content: text, add_special: addSpecial }) });
    if (r.status !== 200) throw new Error(`/tokenize: HTTP ${r.status}: ${await r.text()}`);
    return (await r.json()).tokens;
}
const countTokens = async (base, text) => (await tokenize(base, text, false)).length;
async function text(base, seed, n) {
    let x = (seed * 2654435761) % 4294967296 || 1;
    const rnd = () => { x ^= x << 13; x >>>= 0; x ^= x >>> 17; x ^= x << 5; x >>>= 0; return x; };
    const all = [...Array(2 * n)].map(() => words[rnd() % words.length]);
    const perWord = (await countTokens(base, ' ' + all.join(' '))) / all.length;
    const k = Math.max(1, Math.min(all.length, Math.round(n / perWord)));
    return ' ' + all.slice(0, k).join(' ') + '.';
}

// ---- 1. multi-turn chat ----
// users[c][t]: turn t's text; with --carry tokens, userIds[c][t] its ids.
async function chat(srv, users, userIds) {
    const perTurn = [...Array(nTurns)].map(() => []);
    let tokens = 0;
    const t0 = performance.now();
    await Promise.all(users.map(async (turns, c) => {
        let conv = byIds ? [] : '';
        for (let t = 0; t < nTurns; t++) {
            conv = byIds ? conv.concat(userIds[c][t]) : conv + turns[t];
            const r = await complete(srv, conv, genTok);
            perTurn[t].push(r.ttft);
            tokens += r.tokens;
            conv = byIds ? conv.concat(r.ids) : conv + r.text;
        }
    }));
    const wall = (performance.now() - t0) / 1000;
    return { turns: perTurn.map((xs) => ({ p50: pct(xs, 50), p99: pct(xs, 99) })), tps: tokens / wall };
}

// ---- 2. shared system prompt ----
async function shared(srv, prefix, questions) {
    const ttfts = [];
    let next = 0, tokens = 0;
    const t0 = performance.now();
    let end = t0;
    await Promise.all([...Array(inFlight)].map(async () => {
        while (next < questions.length) {
            const q = questions[next++];
            const r = await complete(srv, prefix + q, genTok);
            ttfts.push(r.ttft);
            tokens += r.tokens;
            end = Math.max(end, r.end);
        }
    }));
    return { p50: pct(ttfts, 50), p99: pct(ttfts, 99), tps: tokens / ((end - t0) / 1000) };
}

async function bench(srv, inputs) {
    const c = await chat(srv, inputs.users, inputs.userIds);
    const s = await shared(srv, inputs.prefix, inputs.questions);
    return { chat: c, shared: s };
}

async function main() {
    const runs = [];
    // The inputs, sized by lmpipe's tokenizer-svc.
    let srv = await startLmpipe(true);
    const users = [];
    for (let c = 0; c < nConv; c++) {
        const turns = [];
        for (let t = 0; t < nTurns; t++) turns.push(await text(srv.base, 1000 * c + t + 1, userTok));
        users.push(turns);
    }
    // the first turn's ids begin with the model's BOS where it has one
    const userIds = [];
    for (const turns of users) {
        const ids = [];
        for (let t = 0; t < nTurns; t++) ids.push(await tokenize(srv.base, turns[t], t === 0));
        userIds.push(ids);
    }
    const prefix = await text(srv.base, 7, prefixTok);
    const questions = [];
    for (let i = 0; i < nReq; i++) questions.push(await text(srv.base, 50000 + i, questionTok));
    const inputs = { users, userIds, prefix, questions };
    try { runs.push([srv.name, await bench(srv, inputs)]); } finally { await stop(srv.child); }
    if (args['no-prefix-cache']) {
        srv = await startLmpipe(false);
        try { runs.push([srv.name, await bench(srv, inputs)]); } finally { await stop(srv.child); }
    }
    srv = await startLlama();
    try { runs.push([srv.name, await bench(srv, inputs)]); } finally { await stop(srv.child); }

    const f = (x) => x.toFixed(1);
    console.log(`# prefix-bench: ${model}, ${threads} threads, ${slots} slots, conversations carried as ${byIds ? "token ids" : "text"}`);
    console.log(`## multi-turn chat: ${nConv} conversations x ${nTurns} turns, ${userTok} user + ${genTok} generated tokens a turn`);
    console.log(`| server | ${[...Array(nTurns)].map((_, t) => `turn ${t + 1} TTFT p50/p99 (ms)`).join(' | ')} | turn ${nTurns}/1 p50 | tokens/s |`);
    console.log(`|---|${[...Array(nTurns)].map(() => '---|').join('')}---|---|`);
    for (const [name, r] of runs) {
        const t = r.chat.turns;
        console.log(`| ${name} | ${t.map((x) => `${f(x.p50)} / ${f(x.p99)}`).join(' | ')} | ${(t[nTurns - 1].p50 / t[0].p50).toFixed(2)}x | ${f(r.chat.tps)} |`);
    }
    console.log(`## shared system prompt: ${nReq} requests, ${prefixTok}-token prefix, ${questionTok}-token questions, ${inFlight} in flight, ${genTok} generated`);
    console.log('| server | TTFT p50 (ms) | TTFT p99 (ms) | tokens/s |');
    console.log('|---|---|---|---|');
    for (const [name, r] of runs) console.log(`| ${name} | ${f(r.shared.p50)} | ${f(r.shared.p99)} | ${f(r.shared.tps)} |`);
    const lm = runs[0][1], ll = runs[runs.length - 1][1];
    console.log(`targets: chat turn ${nTurns}/1 TTFT p50 ${(lm.chat.turns[nTurns - 1].p50 / lm.chat.turns[0].p50).toFixed(2)}x (<= 1.3x); ` +
                `TTFT p50 vs llama-server: chat ${(lm.chat.turns.reduce((a, x) => a + x.p50, 0) / ll.chat.turns.reduce((a, x) => a + x.p50, 0)).toFixed(2)}x, ` +
                `shared ${(lm.shared.p50 / ll.shared.p50).toFixed(2)}x (<= 1x); throughput vs llama-server: chat ` +
                `${(lm.chat.tps / ll.chat.tps).toFixed(2)}x, shared ${(lm.shared.tps / ll.shared.tps).toFixed(2)}x (>= 1.5x)`);
    if (args.json) writeFileSync(args.json, JSON.stringify({ model, threads, slots, carry: args.carry, runs: Object.fromEntries(runs) }, null, 2));
}


main().catch((e) => { console.error(`prefix-bench: ${e.stack || e}`); process.exit(1); });
