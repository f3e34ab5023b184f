// structured-bench.mjs - what a JSON-Schema constraint costs per token at 8
// concurrent streams (issue 29's overlap target: at most 5% over the same 8
// streams unconstrained), through `lmpipe up --http`, one server, one GGUF,
// the same threads, constrained and unconstrained rounds alternating
// (docs/BENCHMARKS.md).
//
// Each round starts N streaming /completion requests at once (temperature
// 1, fixed seeds, n_predict tokens, ignore_eos); the constrained round adds
// a strict JSON Schema (compact) whose output stays open for the whole run
// (at least 1000 objects with free strings), so every token is drawn from a
// mask.  Time per token for one stream = (last token event - first) /
// (tokens_predicted - 1);
// reported: the mean over streams and rounds, each kind, their ratio, and
// the median of the rounds' ratios (each round pairs an unconstrained and a
// constrained run back to back).
//
// usage: node bench/structured-bench.mjs --model Q.gguf [--build build]
//          [--threads 2] [--clients 8] [--tokens 96] [--rounds 4] [--json out.json]
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { freePort, waitHealthy, stop, ssePost } from './common.mjs';

const args = { build: 'build', threads: '2', clients: '8', tokens: '96', rounds: '4' };
for (let i = 2; i < process.argv.length; i++) {
    const a = process.argv[i];
    if (!a.startsWith('--') || i + 1 >= process.argv.length) { console.error(`structured-bench: bad argument '${a}'`); process.exit(2); }
    args[a.slice(2)] = process.argv[++i];
}
if (!args.model) { console.error('structured-bench: --model GGUF is required'); process.exit(2); }
const lmpipe = resolve(args.build, 'tools/lmpipe');
const nClients = Number(args.clients), nTokens = Number(args.tokens), rounds = Number(args.rounds);
const schema = {
    type: 'array', minItems: 1000,
    items: { type: 'object', properties: { name: { type: 'string' }, note: { type: 'string' }, n: { type: 'integer' } },
             required: ['name', 'note', 'n'], additionalProperties: false },
};
const work = mkdtempSync(join(tmpdir(), 'lmpipe-structured-bench-'));
const port = await freePort();
const srv = { name: 'lmpipe', base: `http://127.0.0.1:${port}` };
writeFileSync(join(work, 'lmpipe.conf'), `model = ${resolve(args.model)}\nendpoint = ipc://${work}/c.sock\n` +
              `http.listen = 127.0.0.1:${port}\nthreads = ${args.threads}\n`);
const child = spawn(lmpipe, ['up', '--config', join(work, 'lmpipe.conf')], { stdio: ['ignore', 'ignore', 'inherit'] });
try {
    await waitHealthy(srv.base, child, 'lmpipe up');
    // the sampler's time on a step's rows (lmpipe:sampler_step_seconds): the
    // path from the rows to the tokens, which the overlap keeps the masks off
    async function stepSums() {
        const t = await (await fetch(`${srv.base}/metrics`)).text();
        const get = (name) => Number((t.match(new RegExp(`^lmpipe:${name}(?:\\{[^}]*\\})? (\\S+)$`, 'm')) || [])[1] ?? NaN);
        return { s: get('sampler_step_seconds_sum'), n: get('sampler_step_seconds_count'),
                 e: get('engine_step_seconds_sum') };
    }
    const stepMs = { off: [0, 0, 0], on: [0, 0, 0] };
    async function round(constrained, r) {
        const per = [];
        const m0 = await stepSums();
        await Promise.all([...Array(nClients).keys()].map(async (i) => {
            const times = [];
            let text = '', n = 0;
            const body = { prompt: `Item ${i}:`, n_predict: nTokens, ignore_eos: true, temperature: 1, seed: 1000 * r + i,
                           stream: true, ...(constrained ? { response_format: { type: 'json_schema', json_schema: { name: 'items', schema, strict: true } } } : {}) };
            await ssePost(srv, '/completion', body, (j, now) => {
                text += j.content ?? '';
                if (j.stop) n = j.tokens_predicted; // (a token whose text is held back has no event of its own)
                else times.push(now);
            });
            // the constraint holds: an array of objects, never closed within the run
            if (constrained && !text.startsWith('[{"')) throw new Error(`not constrained: ${text.slice(0, 80)}`);
            if (times.length > 8 && n > 8) per.push((times[times.length - 1] - times[0]) / (n - 1));
        }));
        const m1 = await stepSums();
        const acc = stepMs[constrained ? 'on' : 'off'];
        acc[0] += m1.s - m0.s;
        acc[1] += m1.e - m0.e;
        acc[2] += m1.n - m0.n;
        return per;
    }
    await round(false, 0); // warm: the first constrained open also builds the grammar vocabulary
    await round(true, 0);
    for (const k of ['off', 'on']) stepMs[k] = [0, 0, 0];
    const res = { off: [], on: [] }, ratios = [];
    const mean = (xs) => xs.reduce((a, x) => a + x, 0) / xs.length;
    for (let r = 1; r <= rounds; r++) {
        const pair = {};
        for (const c of r % 2 ? [false, true] : [true, false]) {
            const per = await round(c, r);
            res[c ? 'on' : 'off'].push(...per);
            pair[c ? 'on' : 'off'] = mean(per);
        }
        ratios.push(pair.on / pair.off);
    }
    // the median of the rounds' ratios: a noisy round (the machine is shared) weighs less
    const med = [...ratios].sort((a, b) => a - b)[Math.floor(ratios.length / 2)];
    const off = mean(res.off), on = mean(res.on);
    const out = { clients: nClients, tokens: nTokens, rounds, threads: Number(args.threads),
                  ms_per_token_unconstrained: +off.toFixed(3), ms_per_token_constrained: +on.toFixed(3),
                  overhead_pct: +((on / off - 1) * 100).toFixed(1),
                  overhead_pct_median_round: +((med - 1) * 100).toFixed(1),
                  round_ratios: ratios.map((x) => +x.toFixed(3)), streams: { off: res.off.length, on: res.on.length },
                  sampler_ms_per_step: { off: +(1000 * stepMs.off[0] / stepMs.off[2]).toFixed(3),
                                         on: +(1000 * stepMs.on[0] / stepMs.on[2]).toFixed(3) },
                  engine_ms_per_step: { off: +(1000 * stepMs.off[1] / stepMs.off[2]).toFixed(3),
                                        on: +(1000 * stepMs.on[1] / stepMs.on[2]).toFixed(3) } };
    console.log(JSON.stringify(out));
    if (args.json) writeFileSync(args.json, JSON.stringify(out, null, 1));
} finally {
    await stop(child);
    rmSync(work, { recursive: true, force: true });
}
