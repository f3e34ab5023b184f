// tools-test.mjs - tool calling and reasoning end to end through the npm
// `openai` SDK (and once over NATS with the npm nats client), on a
// random-weight model (synth-qwen2: the real Qwen2 vocabulary, which spells
// <tool_call> as its own token) served with Qwen 2.5's real template
// (tools-test.sh starts it with tokenizer.chat_template_file):
//   - an agent loop with two tools: tool_choice "required" gives calls,
//     their results go back (content null, tool messages), a named function
//     gives that function's call, then tool_choice "none" an answer; every
//     call's arguments parse and validate against its function's parameters
//     (python3-jsonschema); streamed, the tool_calls deltas add up to the
//     same calls as the unstreamed answer with the same seed;
//   - parallel_tool_calls with the end of text banned: several calls;
//   - reasoning: DeepSeek R1's template (given in the request) opens
//     <think> in the prompt, so the output is reasoning_content, equal to
//     the text reasoning_format "none" leaves in content; streamed as
//     reasoning_content deltas;
//   - over NATS (when NATS_OK=1): a named call, its deltas and final message.
import OpenAI from 'openai';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

const client = new OpenAI({ baseURL: `${process.env.LMPIPE_HTTP}/v1`, apiKey: process.env.LMPIPE_API_KEY, maxRetries: 0, timeout: 120000 });
const shared = process.env.SHARED;
let failures = 0;
function check(cond, what, detail) {
    if (cond) { console.log(`ok: ${what}`); return true; }
    failures++;
    console.log(`FAIL: ${what}: ${JSON.stringify(detail)?.slice(0, 800)}`);
    return false;
}

const tools = [
    { type: 'function', function: { name: 'get_weather', description: 'The weather in a city.',
        parameters: { type: 'object', properties: {
            city: { type: 'string', enum: ['Paris', 'Tokyo', 'Lima'] },
            unit: { type: 'string', enum: ['celsius', 'fahrenheit'] } },
        required: ['city'], additionalProperties: false } } },
    { type: 'function', function: { name: 'get_time', description: 'The time in a time zone, some hours ahead.',
        parameters: { type: 'object', properties: {
            timezone: { type: 'string', enum: ['UTC', 'CET', 'JST'] },
            hours_ahead: { type: 'integer', minimum: 0, maximum: 9 } },
        required: ['timezone', 'hours_ahead'], additionalProperties: false } } },
];
const schemaOf = Object.fromEntries(tools.map((t) => [t.function.name, t.function.parameters]));

// Each call's arguments against its function's schema, by python3-jsonschema.
function validate(calls) {
    const items = calls.map((c) => ({ schema: schemaOf[c.function?.name] ?? null, args: c.function?.arguments ?? null }));
    const py = `import json, sys, jsonschema
out = []
for it in json.load(sys.stdin):
    if it["schema"] is None: out.append("unknown function"); continue
    try: v = json.loads(it["args"])
    except Exception as e: out.append("not JSON: %s" % e); continue
    errs = [e.message for e in jsonschema.Draft202012Validator(it["schema"]).iter_errors(v)]
    out.append("; ".join(errs) if errs else "")
print(json.dumps(out))`;
    return JSON.parse(execFileSync('/usr/bin/python3', ['-c', py], { input: JSON.stringify(items) }).toString());
}

function checkCalls(calls, what, { name, min = 1 } = {}) {
    const errs = Array.isArray(calls) ? validate(calls) : ['no tool_calls'];
    return check(Array.isArray(calls) && calls.length >= min && errs.every((e) => e === '') &&
          calls.every((c) => c.type === 'function' && /^call_[A-Za-z0-9]+$/.test(c.id) && (!name || c.function.name === name)),
          `${what}: ${calls?.length ?? 0} call(s) whose arguments validate against the tool's parameters`, { calls, errs });
}

// A streamed chat: the tool_calls deltas put together by index, as an SDK user does.
async function streamed(body) {
    const s = await client.chat.completions.create({ ...body, stream: true });
    const calls = [];
    let content = '', reasoning = '', finish = null, firstDeltaIds = true;
    for await (const ch of s) {
        const c = ch.choices[0];
        if (!c) continue;
        if (c.finish_reason) finish = c.finish_reason;
        content += c.delta?.content ?? '';
        reasoning += c.delta?.reasoning_content ?? '';
        for (const d of c.delta?.tool_calls ?? []) {
            if (!calls[d.index]) {
                calls[d.index] = { id: d.id, type: d.type, function: { name: d.function?.name, arguments: '' } };
                firstDeltaIds &&= Boolean(d.id && d.function?.name);
            }
            calls[d.index].function.arguments += d.function?.arguments ?? '';
        }
    }
    return { calls, content, reasoning, finish, firstDeltaIds };
}

const same = (a, b) => JSON.stringify(a.map((c) => [c.function.name, c.function.arguments])) ===
    JSON.stringify(b.map((c) => [c.function.name, c.function.arguments]));

try {
    const model = (await client.models.list()).data[0].id;
    const base = { model, tools, max_tokens: 160, temperature: 1, seed: 7 };

    // ---- the agent loop: call, result, call, result, answer ----
    const messages = [{ role: 'system', content: 'You can look up the weather and the time.' },
                      { role: 'user', content: 'What is the weather in Paris, and what time is it there?' }];
    const r1 = await client.chat.completions.create({ ...base, messages, tool_choice: 'required', parallel_tool_calls: false });
    const m1 = r1.choices[0].message;
    check(r1.choices[0].finish_reason === 'tool_calls' && m1.content === null, 'required: finish_reason tool_calls, content null', r1.choices[0]);
    checkCalls(m1.tool_calls, 'required');
    check(m1.tool_calls?.length === 1, 'parallel_tool_calls false: one call', m1.tool_calls);
    const s1 = await streamed({ ...base, messages, tool_choice: 'required', parallel_tool_calls: false });
    check(s1.finish === 'tool_calls' && s1.firstDeltaIds && m1.tool_calls && same(s1.calls, m1.tool_calls),
          'required, streamed: the deltas add up to the same call (id and name on its first delta)', { s1, m1 });
    checkCalls(s1.calls, 'required, streamed');

    messages.push({ role: 'assistant', content: null, tool_calls: m1.tool_calls ?? [] });
    for (const c of m1.tool_calls ?? []) messages.push({ role: 'tool', tool_call_id: c.id, content: JSON.stringify({ ok: true, temp: 21 }) });
    const named = { type: 'function', function: { name: 'get_time' } };
    const r2 = await client.chat.completions.create({ ...base, seed: 8, messages, tool_choice: named, parallel_tool_calls: false });
    checkCalls(r2.choices[0].message.tool_calls, 'named get_time (after a tool result)', { name: 'get_time' });
    check(r2.choices[0].finish_reason === 'tool_calls', 'named: finish_reason tool_calls', r2.choices[0]);
    const s2 = await streamed({ ...base, seed: 8, messages, tool_choice: named, parallel_tool_calls: false });
    check(s2.finish === 'tool_calls' && r2.choices[0].message.tool_calls && same(s2.calls, r2.choices[0].message.tool_calls),
          'named, streamed: the same call', { s2, r2: r2.choices[0].message });
    checkCalls(s2.calls, 'named get_time, streamed', { name: 'get_time' });

    messages.push({ role: 'assistant', content: null, tool_calls: r2.choices[0].message.tool_calls ?? [] });
    for (const c of r2.choices[0].message.tool_calls ?? []) messages.push({ role: 'tool', tool_call_id: c.id, content: '{"time": "14:05"}' });
    const r3 = await client.chat.completions.create({ ...base, messages, tool_choice: 'none', max_tokens: 8 });
    check(typeof r3.choices[0].message.content === 'string' && !r3.choices[0].message.tool_calls &&
          r3.choices[0].finish_reason !== 'tool_calls', 'tool_choice none after the results: an answer, no calls', r3.choices[0]);

    // ---- parallel calls: the end of text banned, so calls follow calls ----
    const eog = JSON.parse(process.env.EOG_IDS);
    const bias = Object.fromEntries(eog.map((id) => [String(id), -100]));
    const rp = await client.chat.completions.create({ ...base, seed: 9, max_tokens: 200, messages: messages.slice(0, 2),
                                                       tool_choice: 'required', parallel_tool_calls: true, logit_bias: bias });
    const pc = rp.choices[0].message.tool_calls ?? [];
    // the last call may be cut by max_tokens: the ones before it are whole
    if (!checkCalls(rp.choices[0].finish_reason === 'length' ? pc.slice(0, -1) : pc, 'parallel_tool_calls true', { min: 2 }))
        console.log(JSON.stringify(rp.choices[0]));

    // ---- reasoning: a template whose prompt opens <think> ----
    const r1tmpl = readFileSync(`${shared}/templates/DeepSeek-R1-Distill-Qwen-32B.jinja`, 'utf8');
    const rb = { model, messages: [{ role: 'user', content: 'Think first.' }], chat_template: r1tmpl, max_tokens: 12, temperature: 0 };
    const ra = await client.chat.completions.create(rb);
    const rn = await client.chat.completions.create({ ...rb, reasoning_format: 'none' });
    const rm = ra.choices[0].message;
    check(typeof rm.reasoning_content === 'string' && rm.reasoning_content.length > 0 && rm.content === '' &&
          rm.reasoning_content === rn.choices[0].message.content.trim() && rn.choices[0].message.reasoning_content === undefined,
          'reasoning: the output goes to reasoning_content; with reasoning_format none it stays in content', { rm, rn: rn.choices[0].message });
    const rs = await client.chat.completions.create({ ...rb, stream: true });
    let rr = '', rc = '';
    for await (const ch of rs) { rr += ch.choices[0]?.delta?.reasoning_content ?? ''; rc += ch.choices[0]?.delta?.content ?? ''; }
    check(rr === rm.reasoning_content && rc === '', 'reasoning, streamed: reasoning_content deltas add up to it', { rr, rc });
    // an earlier turn's reasoning goes back to a template that shows it
    // (Qwen3 shows it for the turns after the last user message)
    const q3 = readFileSync(`${shared}/templates/Qwen3-0.6B.jinja`, 'utf8');
    const at = await fetch(`${process.env.LMPIPE_HTTP}/apply-template`, { method: 'POST',
        headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${process.env.LMPIPE_API_KEY}` },
        body: JSON.stringify({ chat_template: q3, messages: [{ role: 'user', content: 'Hi' },
            { role: 'assistant', content: 'Hello', reasoning_content: 'greet back' }] }) });
    const atj = await at.json();
    check(at.status === 200 && atj.prompt.includes('<think>\ngreet back\n</think>'), 'an earlier turn\'s reasoning_content reaches the template', atj);
} catch (e) {
    failures++;
    console.log(`FAIL: threw ${e.constructor.name} ${e.status ?? ''} ${e.message}`);
}

// ---- over NATS: one named call ----
if (process.env.NATS_OK === '1') {
    const { natsServer, bridge, client: natsClient, request, sc, sleep } = await import('../nats/lib.mjs');
    let srv, br, nc;
    try {
        srv = await natsServer('tools');
        br = bridge('tools', srv.url);
        await br.ready();
        nc = await natsClient(srv.url);
        const events = [];
        const sub = nc.subscribe('lmpipe.evt.tools.>');
        (async () => { for await (const m of sub) events.push(JSON.parse(sc.decode(m.data))); })();
        await request(nc.jetstream(), { messages: [{ role: 'user', content: 'Weather in Lima?' }], tools,
            tool_choice: { type: 'function', function: { name: 'get_weather' } }, max_tokens: 160, temperature: 1, seed: 7 },
            { id: 'n1', reply: 'lmpipe.evt.tools.n1' });
        for (let i = 0; i < 1200 && !events.some((e) => e.final); i++) await sleep(50);
        const fin = events.find((e) => e.final);
        const calls = fin?.message?.tool_calls;
        check(fin && fin.finish_reason === 'tool_calls', 'NATS: the final event has the message and finish_reason tool_calls', fin);
        checkCalls(calls, 'NATS: named get_weather', { name: 'get_weather' });
        let args = '';
        for (const e of events.sort((a, b) => a.seq - b.seq))
            for (const d of e.delta ?? []) for (const t of d.tool_calls ?? []) args += t.function?.arguments ?? '';
        check(calls && args === calls.map((c) => c.function.arguments).join(''), 'NATS: the events\' tool_calls deltas add up to the message', { args, calls });
    } catch (e) {
        failures++;
        console.log(`FAIL: NATS threw ${e.message}`);
    }
    await nc?.close();
    await br?.kill('SIGTERM');
    await srv?.stop();
} else {
    console.log('(NATS not checked: nats-server or lmpipe-nats is missing)');
}
console.log(`tools-test: ${failures ? `${failures} failure(s)` : 'all passed'}`);
process.exit(failures ? 1 : 0);
