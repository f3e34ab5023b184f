// llama-api-test.mjs - lmpipe's llama.cpp-style endpoints against llama.cpp's
// own llama-server (the reference, on the same GGUF), and the request fields
// the OpenAI SDK test does not send:
//   - /tokenize, /detokenize and /apply-template answer as llama-server does,
//     and /tokenize gives the goldens' prompt ids;
//   - a streamed /completion: a chunk per token with its id, the golden ids,
//     a last chunk with stop, timings and no [DONE]; a prompt of token ids;
//   - prompt tokens taken from the prefix cache, as usage.prompt_tokens_details
//     .cached_tokens and timings.cache_n, moving /metrics' prefix hits;
//   - presence/frequency penalties, top_p, user, logit_bias (ids), and the
//     llama.cpp sampler fields (typical_p, dry_*, xtc_*, mirostat*, samplers)
//     are taken and act; bad values are 400 naming the field.
// Run by llama-api-test.sh, which sets LMPIPE_HTTP, LMPIPE_API_KEY, LLAMA_HTTP
// (llama-server --no-jinja on the same file) and GOLDENS.
import { readFileSync } from 'node:fs';

const base = process.env.LMPIPE_HTTP;
const key = process.env.LMPIPE_API_KEY;
const ref = process.env.LLAMA_HTTP;
const goldens = process.env.GOLDENS;
for (const [k, v] of Object.entries({ LMPIPE_HTTP: base, LMPIPE_API_KEY: key, LLAMA_HTTP: ref, GOLDENS: goldens }))
    if (!v) { console.error(`llama-api-test: ${k} is not set`); process.exit(2); }

let failures = 0;
function check(cond, what, detail) {
    if (cond) { console.log(`ok: ${what}`); return true; }
    failures++;
    console.log(`FAIL: ${what}${detail === undefined ? '' : `: ${JSON.stringify(detail)}`}`);
    return false;
}
async function section(name, fn) {
    try { await fn(); } catch (e) { failures++; console.log(`FAIL: ${name}: threw ${e && e.stack}`); }
}
async function post(url, path, body) {
    const r = await fetch(`${url}${path}`, { method: 'POST', body: JSON.stringify(body),
                                            headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${key}` } });
    const text = await r.text();
    let json = null;
    try { json = JSON.parse(text); } catch { /* an SSE body */ }
    return { status: r.status, json, text };
}
const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);
// a sample of /metrics: the first series of `name` whose labels include `label`
async function metric(name, label = '') {
    const t = await (await fetch(`${base}/metrics`)).text();
    const m = t.match(new RegExp(`^lmpipe:${name}\\{[^}]*${label}[^}]*\\} (\\S+)$`, 'm'));
    return m ? Number(m[1]) : 0;
}
const golden = JSON.parse(readFileSync(`${goldens}/stories260K.json`, 'utf8'));

await section('tokenize', async () => {
    for (const c of golden.cases) {
        const a = await post(base, '/tokenize', { content: c.prompt, add_special: true });
        check(a.status === 200 && same(a.json.tokens, c.prompt_ids), `/tokenize "${c.prompt}" gives the golden prompt ids`,
              { got: a.json, want: c.prompt_ids });
    }
    const text = ' Hello <s> world\n\nand  "quotes" 123 ünïcode';
    for (const body of [{ content: text }, { content: text, add_special: true, with_pieces: true },
                        { content: text, parse_special: false }]) {
        const [a, b] = await Promise.all([post(base, '/tokenize', body), post(ref, '/tokenize', body)]);
        check(a.status === 200 && same(a.json, b.json), `/tokenize ${JSON.stringify(Object.keys(body))} equals llama-server's`,
              { lmpipe: a.json, llama: b.json });
    }
});

await section('detokenize', async () => {
    const lists = [golden.cases[0].continuation_ids, [1, ...golden.cases[0].prompt_ids.slice(1), 2],
                   [403, 1, 2, 0, 511, 13, 300], []];
    for (const tokens of lists) {
        const [a, b] = await Promise.all([post(base, '/detokenize', { tokens }), post(ref, '/detokenize', { tokens })]);
        check(a.status === 200 && same(a.json, b.json), `/detokenize ${JSON.stringify(tokens.slice(0, 6))}... equals llama-server's`,
              { lmpipe: a.json, llama: b.json });
    }
    const e0 = await metric('errors_total', 'kind="bad_request"');
    const bad = await post(base, '/detokenize', { tokens: [1, 512] });
    check(bad.status === 400 && /512/.test(bad.json?.error?.message), '/detokenize of an id past the vocabulary: 400 naming it', bad.json);
    const e1 = await metric('errors_total', 'kind="bad_request"');
    check(e1 - e0 === 1, 'the refused /detokenize counts in errors_total{kind="bad_request"}', { e0, e1 });
});

await section('apply-template', async () => {
    const conv = [
        [{ role: 'user', content: 'Tell a story' }],
        [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hi there' },
         { role: 'assistant', content: 'Hello.' }, { role: 'user', content: 'Tell a story' }],
    ];
    for (const messages of conv) {
        const [a, b] = await Promise.all([post(base, '/apply-template', { messages }), post(ref, '/apply-template', { messages })]);
        check(a.status === 200 && typeof a.json.prompt === 'string' && same(a.json, b.json),
              `/apply-template of ${messages.length} messages equals llama-server's`, { lmpipe: a.json, llama: b.json });
    }
});

await section('streamed /completion', async () => {
    for (const c of golden.cases.slice(0, 3)) {
        const r = await post(base, '/completion', { prompt: c.prompt, n_predict: c.continuation_ids.length, temperature: 0, stream: true });
        const events = r.text.split('\n\n').filter((e) => e.length);
        const chunks = events.map((e) => (e.startsWith('data: ') ? JSON.parse(e.slice(6)) : null));
        const ids = chunks.filter((j) => j && !j.stop).flatMap((j) => j.tokens);
        const last = chunks[chunks.length - 1];
        check(r.status === 200 && chunks.every((j) => j !== null), `"${c.prompt}": every event is a data: JSON line`, events.slice(-2));
        check(same(ids, c.continuation_ids), `"${c.prompt}": one chunk per token, ids equal the golden`, { got: ids, want: c.continuation_ids });
        check(last && last.stop === true && last.tokens_predicted === c.continuation_ids.length &&
              last.tokens_evaluated === c.prompt_ids.length && last.timings && last.timings.predicted_n === c.continuation_ids.length &&
              last.timings.prompt_n + last.timings.cache_n === c.prompt_ids.length,
              `"${c.prompt}": the last chunk has stop, the counts and timings`, last);
        check(!r.text.includes('[DONE]'), `"${c.prompt}": no [DONE], as llama-server`);
        const byIds = (await post(base, '/completion', { prompt: c.prompt_ids, n_predict: c.continuation_ids.length, temperature: 0 })).json;
        check(same(byIds?.tokens, c.continuation_ids), `"${c.prompt}" sent as its token ids: the golden ids`, byIds);
    }
    for (const [prompt, want] of [[[1, 512], /512 is not in 0\.\.511/], [[], /empty token list/], [[1, -3], /not a token id/]]) {
        const r = await post(base, '/completion', { prompt, n_predict: 2 });
        check(r.status === 400 && want.test(r.json?.error?.message), `/completion prompt ${JSON.stringify(prompt)}: 400 naming it`, r.json);
    }
});


await section('cached prompt tokens', async () => {
    // a prompt no other section sends, long enough for several KV blocks
    const prompt = 'Zara the small red fox ran to the big old tree by the river, and she saw a bird, a frog and a happy dog.';
    const hits0 = await metric('prefix_cache_hits_total');
    const body = { prompt, n_predict: 6, temperature: 0 };
    const a = (await post(base, '/completion', body)).json;
    const b = (await post(base, '/completion', body)).json;
    const n = a.tokens_evaluated;
    check(a.timings.cache_n === 0 && a.tokens_cached === 0 && a.timings.prompt_n === n, 'first time: nothing cached', a.timings);
    check(b.timings.cache_n > 0 && b.timings.cache_n < n && b.timings.cache_n + b.timings.prompt_n === n &&
          b.tokens_cached === b.timings.cache_n, `again: ${b.timings.cache_n} of ${n} prompt tokens from the cache`, b.timings);
    check(a.content === b.content && same(a.tokens, b.tokens), 'the same tokens with the prefix reused', { a: a.content, b: b.content });
    const o = (await post(base, '/v1/completions', { prompt, max_tokens: 6, temperature: 0 })).json;
    check(o.usage?.prompt_tokens === n && o.usage?.prompt_tokens_details?.cached_tokens === b.timings.cache_n &&
          o.choices[0].text === a.content, 'OpenAI usage.prompt_tokens_details.cached_tokens', o.usage);
    const hits1 = await metric('prefix_cache_hits_total');
    check(hits1 - hits0 === 2 * b.timings.cache_n, '/metrics prefix_cache_hits_total moved by the cached tokens', { hits0, hits1 });
    const n2 = (await post(base, '/v1/completions', { prompt: [prompt, prompt], max_tokens: 2, n: 2, temperature: 0 })).json;
    check(n2.usage?.prompt_tokens === 2 * n && n2.usage.prompt_tokens_details.cached_tokens === 2 * b.timings.cache_n,
          'two prompts with n = 2: each prompt\'s tokens and reuse counted once', n2.usage);
});

await section('sampler fields', async () => {
    const c = golden.cases[0];
    const first = c.continuation_ids[0];
    const greedy = { prompt: c.prompt, n_predict: 8, temperature: 0 };
    const banned = (await post(base, '/completion', { ...greedy, logit_bias: { [first]: -100 } })).json;
    check(banned.tokens && banned.tokens.length === 8 && !banned.tokens.includes(first),
          `logit_bias {"${first}": -100} keeps the greedy token ${first} out`, banned.tokens);
    const forced = (await post(base, '/completion', { ...greedy, n_predict: 4, logit_bias: { 300: 100 } })).json;
    check(same(forced.tokens, [300, 300, 300, 300]), 'logit_bias {"300": 100} makes every token 300', forced.tokens);
    // penalties push the repeated tokens of a greedy run down
    const plain = (await post(base, '/completion', { ...greedy, n_predict: 48 })).json.tokens;
    const pen = (await post(base, '/v1/completions', { prompt: c.prompt, max_tokens: 48, temperature: 0, presence_penalty: 2, frequency_penalty: 2 })).json;
    const penIds = (await post(base, '/tokenize', { content: pen.choices[0].text })).json.tokens;
    check(new Set(penIds).size > new Set(plain).size, 'presence/frequency penalties: more distinct tokens than plain greedy',
          { plain: new Set(plain).size, penalized: new Set(penIds).size });
    // every llama.cpp sampler field is taken; a seed makes the draw repeatable
    const all = { prompt: c.prompt, max_tokens: 16, temperature: 0.9, seed: 7, top_p: 0.95, user: 'test-user', top_k: 40,
                  min_p: 0.02, typical_p: 0.98, dry_multiplier: 0.8, dry_base: 1.75, dry_allowed_length: 2,
                  dry_penalty_last_n: 64, dry_sequence_breakers: ['\n', '.'], xtc_probability: 0.2, xtc_threshold: 0.3,
                  repeat_penalty: 1.1, repeat_last_n: 32, top_n_sigma: -1, min_keep: 1,
                  samplers: ['penalties', 'dry', 'top_k', 'typ_p', 'top_p', 'min_p', 'xtc', 'temperature'] };
    const r1 = await post(base, '/v1/completions', all), r2 = await post(base, '/v1/completions', all);
    check(r1.status === 200 && r1.json.usage.completion_tokens === 16 && r1.json.choices[0].text === r2.json.choices[0].text,
          'all sampler fields at once: 200, 16 tokens, the same text again with the seed', { r1: r1.json, r2: r2.json?.choices });
    const m = await post(base, '/v1/completions', { prompt: c.prompt, max_tokens: 8, temperature: 1, seed: 3, mirostat: 2, mirostat_tau: 5, mirostat_eta: 0.1 });
    check(m.status === 200 && m.json.usage.completion_tokens === 8, 'mirostat 2 with tau and eta: 200', m.json);
    const bad = [['presence_penalty', 3], ['frequency_penalty', -2.5], ['top_p', 1.5], ['typical_p', 2], ['mirostat', 7],
                 ['mirostat_tau', -1], ['dry_multiplier', -1], ['xtc_probability', 1.5], ['samplers', ['bogus']],
                 ['logit_bias', { 512: 1 }], ['logit_bias', { abc: 1 }], ['user', 5], ['dry_sequence_breakers', 5]];
    for (const [field, value] of bad) {
        const r = await post(base, '/v1/completions', { prompt: c.prompt, max_tokens: 4, [field]: value });
        check(r.status === 400 && r.json?.error?.param === field && r.json.error.message.startsWith(field),
              `${field} = ${JSON.stringify(value)}: 400 naming the field`, r.json);
    }
    const after = await post(base, '/completion', greedy);
    check(after.status === 200 && same(after.json.tokens, c.continuation_ids.slice(0, 8)), 'greedy output unchanged after the refusals', after.json.tokens);
});

console.log(failures ? `llama-api-test: ${failures} failure(s)` : 'llama-api-test: all passed');
process.exit(failures ? 1 : 0);
