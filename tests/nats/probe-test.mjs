// probe-test.mjs - the request schema at both doors (issue #28), with
// clients nobody here wrote (node's fetch, the npm nats client):
//   - 50 fields lmpipe does not implement (and misspellings) sent to
//     /v1/completions, /v1/chat/completions, /completion and over NATS:
//     each a 400 (an error event over NATS) naming the field, every time;
//   - every field `lmpipe schema --json` documents, with its example, on
//     each endpoint and edge it lists: 200 (a final event without error);
//   - CORS (http.cors_origins): a preflight answered, the origin echoed, an
//     origin not listed refused; deadline_ms and t_max_predict_ms passed
//     through; template errors a 400 with the template's message, and
//     /apply-template takes chat_template.
// Run by tests/http/probe-test.sh, which starts `lmpipe up --http` with
// http.cors_origins and sets LMPIPE_HTTP (the base URL) and, where
// nats-server and lmpipe-nats are there, NATS_OK=1 with LMPIPE_NATS and COORD.
import { execFileSync, spawn } from 'node:child_process';

const base = process.env.LMPIPE_HTTP;
const lmpipe = process.env.LMPIPE;
const natsOk = process.env.NATS_OK === '1';
let failures = 0;
function check(cond, what, detail) {
    if (cond) return true;
    failures++;
    console.log(`FAIL: ${what}${detail === undefined ? '' : `: ${JSON.stringify(detail).slice(0, 400)}`}`);
    return false;
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function post(path, body, headers = {}) {
    for (let attempt = 0; ; attempt++) {
        const r = await fetch(`${base}${path}`, { method: 'POST', body: typeof body === 'string' ? body : JSON.stringify(body),
                                                 headers: { 'Content-Type': 'application/json', ...headers } });
        const text = await r.text();
        let json = null;
        try { json = JSON.parse(text); } catch { /* SSE */ }
        // the vocabulary (logprobs) comes just after the hello
        if (r.status === 503 && /vocabulary is still loading/.test(text) && attempt < 100) { await sleep(100); continue; }
        return { status: r.status, json, text, headers: r.headers };
    }
}

const schema = JSON.parse(execFileSync(lmpipe, ['schema', '--json']).toString());
const model = (await (await fetch(`${base}/v1/models`)).json()).data[0].id;

// ---- the bodies each endpoint needs ----
const chatBase = { messages: [{ role: 'user', content: 'Hi' }], chat_template: 'chatml', max_tokens: 2 };
const bases = {
    '/v1/completions': { prompt: 'Once upon a time', max_tokens: 2 },
    '/v1/chat/completions': chatBase,
    '/completion': { prompt: 'Once upon a time', n_predict: 2 },
    '/tokenize': { content: 'Hi' },
    '/detokenize': { tokens: [1, 2] },
    '/apply-template': { messages: [{ role: 'user', content: 'Hi' }], chat_template: 'chatml' },
};
const gens = ['/v1/completions', '/v1/chat/completions', '/completion'];
// A body with `field` set to `value` on `path`: the base, less what the
// field stands in for.
function bodyWith(path, field, value, aliasOf) {
    const b = { ...bases[path] };
    if (aliasOf) delete b[aliasOf];
    if (field === 'top_logprobs') b.logprobs = true;
    b[field] = value;
    return b;
}

// ---- 50 fields lmpipe does not implement, and misspellings ----
const unimplemented = [
    ['response_format', { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'object' } } }],
    ['response_format', { type: 'nonsense' }], ['tool_choice', { type: 'function', function: { name: 'f' } }],
    ['tool_choice', 'required'], ['reasoning_format', 'deepseek'], ['functions', [{ name: 'f' }]], ['function_call', 'none'],
    ['grammar', 'root ::= "yes"'], ['json_schema', { type: 'string' }], ['guided_json', { type: 'object' }],
    ['guided_regex', '\\d+'], ['guided_choice', ['yes', 'no']], ['guided_grammar', 'root ::= "a"'],
    ['structured_outputs', { regex: '[a-z]' }], ['lora', [{ id: 0, scale: 0.5 }]], ['priority', 10], ['id_slot', 1],
    ['temperture', 0.5], ['top_kk', 3], ['maxtokens', 5], ['reasoning_effort', 'high'], ['reasoning', { effort: 'low' }],
    ['include_reasoning', true], ['add_generation_prompt', false],
    ['continue_final_message', true], ['documents', [{ text: 'x' }]], ['min_tokens', 3], ['stop_token_ids', [2]],
    ['bad_words', ['dog']], ['allowed_token_ids', [1, 2]], ['skip_special_tokens', false],
    ['include_stop_str_in_output', true], ['truncate_prompt_tokens', 4], ['prompt_logprobs', 1],
    ['use_beam_search', true], ['length_penalty', 0.5], ['n_keep', 4], ['n_discard', 2], ['timings_per_token', true],
    ['post_sampling_probs', true], ['return_tokens', true], ['image_data', [{ data: 'x', id: 1 }]],
    ['audio', { voice: 'alloy', format: 'mp3' }], ['modalities', ['text', 'audio']],
    ['prediction', { type: 'content', content: 'x' }], ['service_tier', 'priority'], ['logits_processors', ['x']],
    ['tfs_z', 0.9], ['penalize_nl', true], ['mirostat_mode', 2], ['frobnicate', 1], ['Temperature', 0.5],
];
check(unimplemented.length >= 50, 'the probe has 50 fields', unimplemented.length);
let refusedOk = 0;
for (const path of gens)
    for (const [field, value] of unimplemented) {
        const r = await post(path, bodyWith(path, field, value));
        const e = r.json?.error;
        if (check(r.status === 400 && e?.param === field && e.message.startsWith(`${field}: `) &&
                  e.type === 'invalid_request_error', `${path} ${field}: 400 naming it`, { status: r.status, e }))
            refusedOk++;
    }
console.log(`ok: ${refusedOk} of ${gens.length * unimplemented.length} unimplemented or misspelled fields refused by name over HTTP`);

// ---- every documented field: taken ----
let takenOk = 0, takenN = 0;
for (const f of schema.fields) {
    if (f.use === 'refused' || !f.edges.includes('http')) continue;
    if (['prompt', 'messages', 'content', 'tokens'].includes(f.name)) continue; // every body has it
    for (const path of f.endpoints) {
        const value = f.example === 'MODEL' ? model : f.example;
        const r = await post(path, bodyWith(path, f.name, value, f.alias_of));
        takenN++;
        if (check(r.status === 200, `${path} ${f.name}=${JSON.stringify(value)}: 200`, { status: r.status, body: r.text.slice(0, 300) }))
            takenOk++;
    }
}
console.log(`ok: ${takenOk} of ${takenN} documented fields (with each endpoint) taken over HTTP`);

// ---- CORS ----
{
    const app = 'https://app.example';
    const pre = await fetch(`${base}/v1/chat/completions`, {
        method: 'OPTIONS', headers: { Origin: app, 'Access-Control-Request-Method': 'POST',
                                      'Access-Control-Request-Headers': 'authorization, content-type, x-stainless-os' } });
    check(pre.status === 204 && pre.headers.get('access-control-allow-origin') === app &&
          /POST/.test(pre.headers.get('access-control-allow-methods')) &&
          /x-stainless-os/.test(pre.headers.get('access-control-allow-headers')),
          'CORS: the preflight of an allowed origin is answered (204, its origin, POST, the asked headers)',
          { status: pre.status, h: [...pre.headers] });
    const r = await post('/v1/completions', bases['/v1/completions'], { Origin: app });
    check(r.status === 200 && r.headers.get('access-control-allow-origin') === app && /Origin/.test(r.headers.get('vary')),
          'CORS: a request from the allowed origin gets it back', [...r.headers]);
    const bad = await post('/v1/completions', { ...bases['/v1/completions'], temperture: 1 }, { Origin: app });
    check(bad.status === 400 && bad.headers.get('access-control-allow-origin') === app,
          'CORS: errors carry it too, so the page can read them', [...bad.headers]);
    const other = await fetch(`${base}/v1/completions`, { method: 'OPTIONS', headers: { Origin: 'https://evil.example',
                                                                                          'Access-Control-Request-Method': 'POST' } });
    check(other.status === 403 && !other.headers.get('access-control-allow-origin'),
          'CORS: the preflight of another origin is refused', { status: other.status });
    const o2 = await post('/v1/completions', bases['/v1/completions'], { Origin: 'https://evil.example' });
    check(o2.status === 200 && !o2.headers.get('access-control-allow-origin'), 'CORS: another origin gets no allow header');
    console.log('ok: CORS');
}

// ---- deadline_ms and t_max_predict_ms, passed through ----
{
    const t0 = Date.now();
    const r = await post('/completion', { prompt: 'Once upon a time', n_predict: 1500, ignore_eos: true, deadline_ms: 1 });
    const ms = Date.now() - t0;
    check(r.status === 504 && r.json?.error?.code === 'deadline_exceeded' && r.json.error.param === 'deadline_ms' && ms < 3000,
          'deadline_ms 1: 504 deadline_exceeded at once, not 1,500 tokens later', { status: r.status, ms, e: r.json?.error });
    const s = await post('/v1/completions', { prompt: 'Once upon a time', max_tokens: 1500, ignore_eos: true,
                                              deadline_ms: 150, stream: true });
    check(s.status === 200 && /"code":"deadline_exceeded"/.test(s.text) && s.text.trim().endsWith('data: [DONE]'),
          'deadline_ms after the first token: an error event ends the stream', s.text.slice(-300));
    // newlines made likely (token 13 is "\n"): the limit ends the text once one is out
    const t = await post('/completion', { prompt: 'Once upon a time', n_predict: 1500, ignore_eos: true, t_max_predict_ms: 1,
                                          logit_bias: [[13, 4]], temperature: 0 });
    check(t.status === 200 && t.json.stop_type === 'limit' && t.json.tokens_predicted < 1500 && t.json.content.includes('\n'),
          't_max_predict_ms 1: the text ends at a newline with stop_type limit', t.json && { n: t.json.tokens_predicted, stop: t.json.stop_type });
    console.log('ok: deadline_ms and t_max_predict_ms');
}

// ---- templates ----
{
    const noTemplate = await post('/v1/chat/completions', { messages: [{ role: 'user', content: 'Hi' }], max_tokens: 2 });
    check(noTemplate.status === 400 && noTemplate.json?.error?.param === 'chat_template' &&
          /chat_template/.test(noTemplate.json.error.message), 'chat with a model without a template: 400 naming chat_template',
          noTemplate.json);
    const badTemplate = await post('/v1/chat/completions', { ...chatBase, chat_template: '{% for m in messages %}{{ nonsense' });
    check(badTemplate.status === 400 && badTemplate.json?.error?.param === 'chat_template' &&
          /template/.test(badTemplate.json.error.message), 'an unusable template: 400 with the template\'s message', badTemplate.json);
    const at = await post('/apply-template', { messages: [{ role: 'user', content: 'Hi' }], chat_template: 'chatml' });
    check(at.status === 200 && at.json.prompt.includes('<|im_start|>user\nHi<|im_end|>'),
          '/apply-template takes chat_template', at.json);
    const at2 = await post('/apply-template', { messages: [{ role: 'user', content: 'Hi' }] });
    check(at2.status === 400 && at2.json?.error?.param === 'chat_template', '/apply-template without a template: 400', at2.json);
    console.log('ok: template errors and /apply-template');
}

// ---- over NATS ----
if (natsOk) {
    const { natsServer, bridge, client, request, sc } = await import('./lib.mjs');
    const srv = await natsServer('probe');
    const br = bridge('probe', srv.url, ['--ack-wait-ms', '5000']);
    await br.ready();
    const nc = await client(srv.url);
    const js = nc.jetstream();
    const finals = new Map();
    const sub = nc.subscribe('lmpipe.evt.probe.>');
    (async () => { for await (const m of sub) { const e = JSON.parse(sc.decode(m.data)); if (e.final) finals.set(e.id, e); } })();
    let seq = 0;
    const ask = async (body) => {
        const id = `p${++seq}`;
        await request(js, body, { id, reply: `lmpipe.evt.probe.${id}` });
        for (let i = 0; i < 600 && !finals.has(id); i++) await sleep(50);
        return finals.get(id) ?? { timeout: true };
    };
    const natsBases = { '/v1/completions': { prompt: 'Once', max_tokens: 2 }, '/v1/chat/completions': chatBase,
                        '/completion': { prompt: 'Once', n_predict: 2 } };
    let nRefused = 0;
    for (const path of gens)
        for (const [field, value] of unimplemented) {
            const f = await ask({ ...natsBases[path], [field]: value });
            if (check(f.reason === 'error' && f.error?.code === 'invalid_request' && f.error.param === field &&
                      f.error.message.startsWith(`${field}: `), `NATS (${path} shape) ${field}: an error event naming it`, f))
                nRefused++;
        }
    console.log(`ok: ${nRefused} of ${gens.length * unimplemented.length} refused by name over NATS`);
    let nTaken = 0, nN = 0;
    for (const fld of schema.fields) {
        if (fld.use === 'refused' || !fld.edges.includes('nats')) continue;
        if (['prompt', 'messages'].includes(fld.name)) continue;
        for (const path of fld.endpoints.filter((p) => gens.includes(p))) {
            const b = { ...natsBases[path] };
            if (fld.alias_of) delete b[fld.alias_of];
            if (fld.name === 'top_logprobs') b.logprobs = true;
            b[fld.name] = fld.example;
            const f = await ask(b);
            nN++;
            if (check(f.final && f.reason !== 'error', `NATS (${path} shape) ${fld.name}=${JSON.stringify(fld.example)}: taken`, f))
                nTaken++;
        }
    }
    console.log(`ok: ${nTaken} of ${nN} documented fields taken over NATS`);
    await nc.close();
    await br.kill('SIGTERM');
    await srv.stop();
} else {
    console.log('(NATS not checked: nats-server or lmpipe-nats is missing)');
}

console.log(failures ? `probe-test: ${failures} failure(s)` : 'probe-test: all passed');
process.exit(failures ? 1 : 0);
