// structured-sdk-test.mjs - the npm `openai` SDK's response_format against
// lmpipe's HTTP gateway (run by structured-test.py, which starts `lmpipe up
// --http`): json_schema (strict) and json_object on chat and completions,
// streamed and not; each output must parse and follow the schema (checked
// here by hand for this small schema; structured-test.py judges the
// MaskBench ones with python3-jsonschema); a refused schema is the SDK's
// BadRequestError naming the keyword.
// Environment: LMPIPE_HTTP, LMPIPE_API_KEY, BIAS (a logit_bias object).
import OpenAI from 'openai';

const client = new OpenAI({ baseURL: `${process.env.LMPIPE_HTTP}/v1`, apiKey: process.env.LMPIPE_API_KEY,
                            maxRetries: 0, timeout: 120000 });
const bias = JSON.parse(process.env.BIAS || '{}');
let failures = 0, finished = 0;
function check(cond, what, detail) {
    if (cond) { console.log(`ok: ${what}`); return true; }
    failures++;
    console.log(`FAIL: ${what}${detail === undefined ? '' : `: ${JSON.stringify(detail).slice(0, 500)}`}`);
    return false;
}
const schema = {
    type: 'object',
    properties: { name: { type: 'string', maxLength: 10 }, n: { type: 'integer', minimum: 0, maximum: 99 },
                  tags: { type: 'array', items: { enum: ['a', 'b'] }, maxItems: 3 } },
    required: ['name', 'n', 'tags'], additionalProperties: false,
};
const follows = (v) => v && typeof v === 'object' && !Array.isArray(v) &&
    Object.keys(v).sort().join() === 'n,name,tags' && typeof v.name === 'string' && [...v.name].length <= 10 &&
    Number.isInteger(v.n) && v.n >= 0 && v.n <= 99 && Array.isArray(v.tags) && v.tags.length <= 3 &&
    v.tags.every((t) => t === 'a' || t === 'b');
const formats = {
    schema: { type: 'json_schema', json_schema: { name: 'thing', schema, strict: true } },
    object: { type: 'json_object' },
};
const models = await client.models.list();
const model = models.data[0].id;

async function one(kind, fmt, stream, seed) {
    const common = { model, max_tokens: 120, temperature: 1, seed, response_format: formats[fmt], logit_bias: bias };
    let text = '', reason = null;
    if (kind === 'chat') {
        const body = { ...common, messages: [{ role: 'user', content: 'Give me a thing as JSON.' }] };
        if (stream) {
            for await (const ch of await client.chat.completions.create({ ...body, stream: true })) {
                text += ch.choices[0]?.delta?.content ?? '';
                reason = ch.choices[0]?.finish_reason ?? reason;
            }
        } else {
            const r = await client.chat.completions.create(body);
            text = r.choices[0].message.content;
            reason = r.choices[0].finish_reason;
        }
    } else {
        const body = { ...common, prompt: 'A thing as JSON:' };
        if (stream) {
            for await (const ch of await client.completions.create({ ...body, stream: true })) {
                text += ch.choices[0]?.text ?? '';
                reason = ch.choices[0]?.finish_reason ?? reason;
            }
        } else {
            const r = await client.completions.create(body);
            text = r.choices[0].text;
            reason = r.choices[0].finish_reason;
        }
    }
    const what = `${kind} ${fmt} ${stream ? 'streamed' : 'whole'} seed ${seed}`;
    if (reason === 'length') { console.log(`(${what}: cut by max_tokens)`); return; }
    let v;
    try { v = JSON.parse(text); } catch (e) { check(false, `${what}: parseable JSON`, text); return; }
    finished++;
    if (fmt === 'schema') check(follows(v) && !/^\s|\s$/.test(text), `${what}: valid JSON for the schema`, text);
    else check(v && typeof v === 'object' && !Array.isArray(v), `${what}: a JSON object`, text);
}
for (const kind of ['chat', 'completions'])
    for (const fmt of ['schema', 'object'])
        for (const stream of [false, true])
            for (const seed of [1, 2, 3])
                try { await one(kind, fmt, stream, seed); } catch (e) {
                    check(false, `${kind} ${fmt} ${stream}: threw`, `${e.constructor.name} ${e.status} ${e.message}`);
                }
check(finished >= 16, `at least 16 of 24 SDK outputs finished (${finished})`);

try {
    await client.chat.completions.create({ model, max_tokens: 4, messages: [{ role: 'user', content: 'hi' }],
        response_format: { type: 'json_schema', json_schema: { name: 'u', schema: { type: 'array', uniqueItems: true } } } });
    check(false, 'a refused schema: BadRequestError');
} catch (e) {
    check(e instanceof OpenAI.BadRequestError && e.status === 400 && e.param === 'response_format' &&
          /uniqueItems/.test(e.message), 'a refused schema: BadRequestError 400 naming response_format and uniqueItems',
          { status: e.status, param: e.param, message: e.message });
}
console.log(failures ? `${failures} check(s) failed` : 'all SDK checks passed');
process.exit(failures ? 1 : 0);
