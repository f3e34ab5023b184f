// openai-test.mjs - the npm `openai` SDK (a client nobody here wrote) against
// lmpipe's HTTP gateway: completions and chat, streaming and not, n > 1,
// logprobs, stop, seed, max_tokens, include_usage, the SDK's error classes,
// and the stories260K greedy goldens through HTTP.
// Run by openai-test.sh, which starts `lmpipe up --http` and sets:
//   LMPIPE_HTTP (base URL), LMPIPE_API_KEY, LMPIPE (the CLI), MODEL (gguf),
//   GOLDENS (the goldens folder).
import OpenAI from 'openai';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

const base = process.env.LMPIPE_HTTP;
const key = process.env.LMPIPE_API_KEY;
const lmpipe = process.env.LMPIPE;
const modelPath = process.env.MODEL;
const goldens = process.env.GOLDENS;
for (const [k, v] of Object.entries({ LMPIPE_HTTP: base, LMPIPE_API_KEY: key, LMPIPE: lmpipe, MODEL: modelPath, GOLDENS: goldens }))
    if (!v) { console.error(`openai-test: ${k} is not set`); process.exit(2); }

// No retries: a 5xx or a dropped connection must show, not be papered over.
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: key, maxRetries: 0, timeout: 60000 });
let failures = 0;
function check(cond, what, detail) {
    if (cond) { console.log(`ok: ${what}`); return true; }
    failures++;
    console.log(`FAIL: ${what}${detail === undefined ? '' : `: ${typeof detail === 'string' ? detail : JSON.stringify(detail)}`}`);
    return false;
}
async function section(name, fn) {
    try { await fn(); } catch (e) {
        failures++;
        console.log(`FAIL: ${name}: threw ${e && e.constructor ? e.constructor.name : ''} ${e && e.status ? e.status : ''} ${e && e.message}`);
    }
}
const detok = (ids) => execFileSync(lmpipe, ['detokenize', '--model', modelPath], { input: ids.join(' ') }).toString();
const sameIndices = (arr, n) => JSON.stringify(arr.map((c) => c.index).sort((a, b) => a - b)) === JSON.stringify([...Array(n).keys()]);

const models = await client.models.list();
const model = models.data[0] && models.data[0].id;
check(models.data.length >= 1 && typeof model === 'string' && models.data[0].object === 'model', 'GET /v1/models lists the model', models.data);

const golden = JSON.parse(readFileSync(`${goldens}/stories260K.json`, 'utf8'));
const fromBos = JSON.parse(readFileSync(`${goldens}/stories260K-from-bos.json`, 'utf8'));
// A case's continuation as text: what detokenizing prompt + continuation ids
// as one sequence adds after the prompt's own text (so the first generated
// token keeps its leading space, as llama-server streams it).
const goldenText = (c) => {
    const head = detok(c.prompt_ids);
    const whole = detok(c.prompt_ids.concat(c.continuation_ids));
    if (!whole.startsWith(head)) throw new Error(`detokenize of prompt + continuation does not start with the prompt's text (${c.prompt})`);
    return whole.slice(head.length);
};
// `lmpipe run` (in-process, no HTTP) prints the text and one newline.
function runText(p, n) {
    const out = execFileSync(lmpipe, ['run', '--model', modelPath, '--prompt', p, '--temperature', '0', '--max-tokens', String(n)]).toString();
    return out.endsWith('\n') ? out.slice(0, -1) : out;
}

// Greedy through the SDK equals the goldens (llama.cpp's and llama2.c's ids).
await section('greedy goldens', async () => {
    for (const c of golden.cases) {
        const want = goldenText(c);
        const r = await client.completions.create({ model, prompt: c.prompt, max_tokens: c.continuation_ids.length, temperature: 0 });
        check(r.choices[0].text === want, `greedy completion of "${c.prompt}" equals the golden`, { got: r.choices[0].text, want });
        const run = runText(c.prompt, c.continuation_ids.length);
        check(r.choices[0].text === run, `greedy completion of "${c.prompt}" equals lmpipe run's`, { got: r.choices[0].text, run });
        check(r.usage.completion_tokens === c.continuation_ids.length && r.usage.prompt_tokens === c.prompt_ids.length,
              `usage of "${c.prompt}" counts ${c.prompt_ids.length} prompt and ${c.continuation_ids.length} generated tokens`, r.usage);
        // the same through the stream, chunk by chunk
        const s = await client.completions.create({ model, prompt: c.prompt, max_tokens: c.continuation_ids.length, temperature: 0, stream: true });
        let text = '', fin = null;
        for await (const ch of s) { text += ch.choices[0]?.text ?? ''; fin = ch.choices[0]?.finish_reason ?? fin; }
        check(text === want, `streamed greedy completion of "${c.prompt}" equals the golden`, { got: text, want });
        check(fin === 'length', `streamed greedy "${c.prompt}" ends with finish_reason length`, fin);
    }
    const c = fromBos.cases[0];
    check(detok(c.continuation_ids) === fromBos.expected_text.slice(0, detok(c.continuation_ids).length) && detok(c.continuation_ids).length > 0,
          'lmpipe detokenize agrees with the from-BOS golden text');
    const r = await client.completions.create({ model, prompt: '', max_tokens: fromBos.n_predict, temperature: 0 });
    check(r.choices[0].text === fromBos.expected_text, `greedy ${fromBos.n_predict} tokens from BOS equal the llama2.c golden text`,
          { got: r.choices[0].text, want: fromBos.expected_text });
});

const prompt = golden.cases[0].prompt;

await section('completions shape', async () => {
    const r = await client.completions.create({ model, prompt, max_tokens: 5, temperature: 0 });
    check(r.object === 'text_completion' && typeof r.id === 'string' && typeof r.created === 'number' && r.model === model,
          'completion has object/id/created/model', { object: r.object, id: r.id, created: r.created, model: r.model });
    check(r.choices.length === 1 && r.choices[0].index === 0 && r.choices[0].finish_reason === 'length',
          'max_tokens 5: one choice, finish_reason length', r.choices);
    check(r.usage.completion_tokens === 5 && r.usage.total_tokens === r.usage.prompt_tokens + 5, 'max_tokens 5: 5 completion tokens in usage', r.usage);
});

await section('chat', async () => {
    const messages = [{ role: 'system', content: 'You tell short stories.' }, { role: 'user', content: 'Tell me about Lily.' }];
    const r = await client.chat.completions.create({ model, messages, max_tokens: 12, temperature: 0 });
    const m = r.choices[0].message;
    check(r.object === 'chat.completion' && m.role === 'assistant' && typeof m.content === 'string' && m.content.length > 0,
          'chat completion: assistant message with content', r);
    check(r.choices[0].finish_reason === 'length' && r.usage.completion_tokens === 12, 'chat max_tokens 12: finish_reason length, 12 tokens', r);
    // max_completion_tokens is the newer name of the same limit
    const r2 = await client.chat.completions.create({ model, messages, max_completion_tokens: 12, temperature: 0 });
    check(r2.choices[0].message.content === m.content && r2.usage.completion_tokens === 12, 'max_completion_tokens acts as max_tokens', r2);
    const s = await client.chat.completions.create({ model, messages, max_tokens: 12, temperature: 0, stream: true, stream_options: { include_usage: true } });
    let text = '', role = null, fin = null, usage = null, nAfterUsage = 0, objects = new Set();
    for await (const ch of s) {
        objects.add(ch.object);
        if (usage) nAfterUsage++;
        if (ch.usage) { usage = ch.usage; check(ch.choices.length === 0, 'chat usage chunk has no choices', ch); continue; }
        const d = ch.choices[0].delta;
        if (d.role) role = d.role;
        text += d.content ?? '';
        fin = ch.choices[0].finish_reason ?? fin;
    }
    check(objects.size === 1 && objects.has('chat.completion.chunk'), 'chat chunks are chat.completion.chunk', [...objects]);
    check(role === 'assistant' && text === m.content && fin === 'length', 'streamed chat equals the unstreamed one', { role, text, fin });
    check(usage && usage.completion_tokens === 12 && usage.prompt_tokens === r.usage.prompt_tokens && nAfterUsage === 0,
          'include_usage: the last chunk carries the usage', { usage, want: r.usage, nAfterUsage });
});

await section('streaming completions with include_usage', async () => {
    const s = await client.completions.create({ model, prompt, max_tokens: 10, temperature: 0, stream: true, stream_options: { include_usage: true } });
    let usage = null, text = '', chunks = 0;
    for await (const ch of s) { chunks++; if (ch.usage) usage = ch.usage; else text += ch.choices[0].text; }
    check(usage && usage.completion_tokens === 10 && usage.total_tokens === usage.prompt_tokens + 10, 'completions include_usage chunk', usage);
    check(chunks >= 2, 'the completion streamed in several chunks', chunks);
    const s2 = await client.completions.create({ model, prompt, max_tokens: 10, temperature: 0, stream: true });
    let usage2 = null;
    for await (const ch of s2) if (ch.usage) usage2 = ch.usage;
    check(!usage2, 'no usage chunk without include_usage', usage2);
});

await section('n > 1', async () => {
    const r = await client.completions.create({ model, prompt, max_tokens: 16, temperature: 1, n: 3, seed: 7 });
    check(r.choices.length === 3 && sameIndices(r.choices, 3), 'completions n=3: three choices, indices 0..2', r.choices.map((c) => c.index));
    check(r.choices.every((c) => c.text.length > 0 && c.finish_reason), 'completions n=3: each choice has text and finish_reason', r.choices);
    const allLength = r.choices.every((c) => c.finish_reason === 'length');
    check(allLength ? r.usage.completion_tokens === 48 : r.usage.completion_tokens > 0 && r.usage.completion_tokens < 48,
          'completions n=3: usage counts the tokens of all choices', { usage: r.usage, fins: r.choices.map((c) => c.finish_reason) });
    const c = await client.chat.completions.create({ model, messages: [{ role: 'user', content: 'Hi' }], max_tokens: 8, temperature: 1, n: 2 });
    check(c.choices.length === 2 && sameIndices(c.choices, 2) && c.choices.every((x) => x.message.role === 'assistant'),
          'chat n=2: two assistant choices, indices 0..1', c.choices);
    const s = await client.completions.create({ model, prompt, max_tokens: 24, temperature: 1.5, n: 4, stream: true });
    const texts = new Map(), fins = new Map();
    for await (const ch of s)
        for (const x of ch.choices) {
            texts.set(x.index, (texts.get(x.index) ?? '') + x.text);
            if (x.finish_reason) fins.set(x.index, x.finish_reason);
        }
    const idx = [...texts.keys()].sort();
    check(JSON.stringify(idx) === '[0,1,2,3]' && fins.size === 4, 'streamed n=4: chunks for indices 0..3, each finished', { idx, fins: [...fins] });
    // four choices of 24 tokens at temperature 1.5: at least two differ (they
    // are sampled apart); four equal texts by chance are vanishingly unlikely
    check(new Set(texts.values()).size > 1, 'streamed n=4: the choices are sampled independently', [...texts.values()]);
});

await section('logprobs', async () => {
    const r = await client.completions.create({ model, prompt, max_tokens: 6, temperature: 0, logprobs: 3 });
    const lp = r.choices[0].logprobs;
    const n = r.usage.completion_tokens;
    check(lp && [lp.tokens, lp.token_logprobs, lp.top_logprobs, lp.text_offset].every((a) => Array.isArray(a) && a.length === n),
          `completions logprobs: tokens/token_logprobs/top_logprobs/text_offset of ${n} entries`, lp);
    if (lp) {
        check(lp.tokens.join('') === r.choices[0].text, 'completions logprobs: the tokens spell the text', { tokens: lp.tokens, text: r.choices[0].text });
        check(lp.top_logprobs.every((t) => t && Object.keys(t).length >= 1 && Object.keys(t).length <= 3), 'completions logprobs 3: at most 3 alternatives each', lp.top_logprobs);
        check(lp.token_logprobs.every((v, i) => v <= 0 && Math.abs(v - Math.max(...Object.values(lp.top_logprobs[i]))) < 1e-4),
              'completions logprobs, greedy: the chosen token has the best logprob', lp);
        // the golden's top-1 logprobs (llama.cpp, f32) within float noise
        const g = golden.cases[0].steps;
        check(lp.token_logprobs.every((v, i) => Math.abs(v - g[i][0][1]) < 1e-3), 'completions logprobs match the golden top-1 logprobs (F32 eps 0.001)', { got: lp.token_logprobs, want: g.slice(0, n).map((s) => s[0][1]) });
        check(lp.text_offset.every((o, i) => i === 0 || o === lp.text_offset[i - 1] + lp.tokens[i - 1].length), 'completions logprobs: text_offset advances by token length', lp.text_offset);
    }
    const c = await client.chat.completions.create({ model, messages: [{ role: 'user', content: 'Hi' }], max_tokens: 5, temperature: 0, logprobs: true, top_logprobs: 2 });
    const content = c.choices[0].logprobs && c.choices[0].logprobs.content;
    check(Array.isArray(content) && content.length === c.usage.completion_tokens, 'chat logprobs.content: one entry per token', c.choices[0].logprobs);
    if (Array.isArray(content)) {
        check(content.every((e) => typeof e.token === 'string' && typeof e.logprob === 'number' && Array.isArray(e.bytes) &&
                                    Array.isArray(e.top_logprobs) && e.top_logprobs.length === 2 &&
                                    e.top_logprobs.every((t) => typeof t.token === 'string' && typeof t.logprob === 'number' && Array.isArray(t.bytes))),
              'chat logprobs: token/logprob/bytes and 2 top_logprobs each', content);
        check(Buffer.from(content.flatMap((e) => e.bytes)).toString() === c.choices[0].message.content, 'chat logprobs: the bytes spell the content',
              { content: c.choices[0].message.content });
    }
    const nolp = await client.chat.completions.create({ model, messages: [{ role: 'user', content: 'Hi' }], max_tokens: 3, temperature: 0 });
    check(!nolp.choices[0].logprobs, 'chat without logprobs: none sent', nolp.choices[0].logprobs);
    const s = await client.chat.completions.create({ model, messages: [{ role: 'user', content: 'Hi' }], max_tokens: 5, temperature: 0, logprobs: true, top_logprobs: 2, stream: true });
    const streamed = [];
    for await (const ch of s) for (const x of ch.choices) if (x.logprobs && x.logprobs.content) streamed.push(...x.logprobs.content);
    check(streamed.length === content.length && streamed.every((e, i) => e.token === content[i].token && Math.abs(e.logprob - content[i].logprob) < 1e-6),
          'streamed chat logprobs equal the unstreamed ones', { streamed, content });
});

await section('stop', async () => {
    const want = goldenText(golden.cases[0]);
    // a word well inside the golden continuation
    const word = want.split(' ').filter((w) => w.length >= 3)[3];
    const at = want.indexOf(word);
    const r = await client.completions.create({ model, prompt, max_tokens: 64, temperature: 0, stop: [word] });
    check(r.choices[0].text === want.slice(0, at) && r.choices[0].finish_reason === 'stop', `stop "${word}": text ends before it, finish_reason stop`,
          { got: r.choices[0].text, want: want.slice(0, at), fin: r.choices[0].finish_reason });
    const s = await client.completions.create({ model, prompt, max_tokens: 64, temperature: 0, stop: word, stream: true });
    let text = '', fin = null;
    for await (const ch of s) { text += ch.choices[0]?.text ?? ''; fin = ch.choices[0]?.finish_reason ?? fin; }
    check(text === want.slice(0, at) && fin === 'stop', `streamed stop "${word}" holds the stop string back`, { text, fin });
});

await section('seed', async () => {
    const a = await client.completions.create({ model, prompt, max_tokens: 48, temperature: 1, seed: 1234 });
    const b = await client.completions.create({ model, prompt, max_tokens: 48, temperature: 1, seed: 1234 });
    const c = await client.completions.create({ model, prompt, max_tokens: 48, temperature: 1, seed: 4321 });
    check(a.choices[0].text === b.choices[0].text, 'same seed, same text', [a.choices[0].text, b.choices[0].text]);
    check(a.choices[0].text !== c.choices[0].text, 'another seed, another text', [a.choices[0].text, c.choices[0].text]);
    const s = await client.chat.completions.create({ model, messages: [{ role: 'user', content: 'Hi' }], max_tokens: 24, temperature: 1, seed: 99, stream: true });
    let text = '';
    for await (const ch of s) text += ch.choices[0]?.delta?.content ?? '';
    const d = await client.chat.completions.create({ model, messages: [{ role: 'user', content: 'Hi' }], max_tokens: 24, temperature: 1, seed: 99 });
    check(text === d.choices[0].message.content, 'chat: same seed streamed and not, same text', [text, d.choices[0].message.content]);
});

await section('errors', async () => {
    const wrong = new OpenAI({ baseURL: `${base}/v1`, apiKey: `${key}-wrong`, maxRetries: 0 });
    try {
        await wrong.completions.create({ model, prompt, max_tokens: 2 });
        check(false, 'a wrong key is refused');
    } catch (e) {
        check(e instanceof OpenAI.AuthenticationError && e.status === 401 && typeof e.message === 'string',
              'a wrong key: AuthenticationError 401', { cls: e.constructor.name, status: e.status, msg: e.message });
    }
    const raw = await fetch(`${base}/v1/models`);
    const body = await raw.json().catch(() => null);
    check(raw.status === 401 && body && body.error && typeof body.error.message === 'string', 'no key: 401 with OpenAI error JSON', { status: raw.status, body });
    try {
        await client.completions.create({ model: 'no-such-model', prompt, max_tokens: 2 });
        check(false, 'an unknown model is refused');
    } catch (e) {
        check(e instanceof OpenAI.NotFoundError && e.status === 404 && /no-such-model|model/.test(e.message),
              'an unknown model: NotFoundError 404 naming it', { cls: e.constructor.name, status: e.status, msg: e.message });
    }
    for (const [field, body] of [['top_k', { top_k: -3 }], ['temperature', { temperature: 'hot' }], ['min_p', { min_p: 7 }], ['n', { n: 0 }]]) {
        try {
            await client.completions.create({ model, prompt, max_tokens: 2, ...body });
            check(false, `a bad ${field} is refused`);
        } catch (e) {
            check(e instanceof OpenAI.BadRequestError && e.status === 400 && e.message.includes(field),
                  `a bad ${field} (${JSON.stringify(body[field])}): BadRequestError 400 naming it`, { cls: e.constructor.name, status: e.status, msg: e.message, param: e.param });
        }
    }
    try {
        const s = await client.chat.completions.create({ model, messages: [{ role: 'user', content: 'Hi' }], max_tokens: 2, top_k: -3, stream: true });
        for await (const _ of s);
        check(false, 'a bad top_k in a stream is refused');
    } catch (e) {
        check(e instanceof OpenAI.BadRequestError && e.message.includes('top_k'), 'a bad top_k in a streamed chat: BadRequestError before the stream', { cls: e.constructor.name, msg: e.message });
    }
    // after all that, the gateway still serves
    const r = await client.completions.create({ model, prompt, max_tokens: 3, temperature: 0 });
    check(r.choices[0].text.length > 0, 'the gateway serves on after the refusals');
});

await section('concurrent streams', async () => {
    // eight streams at once each get the same greedy text as one alone
    const want = (await client.completions.create({ model, prompt, max_tokens: 24, temperature: 0 })).choices[0].text;
    const got = await Promise.all([...Array(8)].map(async () => {
        let t = '';
        for await (const ch of await client.completions.create({ model, prompt, max_tokens: 24, temperature: 0, stream: true })) t += ch.choices[0]?.text ?? '';
        return t;
    }));
    check(got.every((t) => t === want), '8 concurrent greedy streams equal the lone one', { want, got });
});

console.log(failures ? `openai-test: ${failures} failure(s)` : 'openai-test: all passed');
process.exit(failures ? 1 : 0);
