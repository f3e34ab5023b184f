// tools-sdk-test.mjs - an agent loop's conversation as the npm `openai` SDK
// sends it (tools; the assistant's tool call with content null; the tool's
// result), streamed and not, against a model whose template renders tools
// (chat-template-test.sh starts it): such a conversation is taken and
// answered, the same streamed and not.  Tool calls in the output are checked
// on a model that can write them, in tools-test.mjs.
import OpenAI from 'openai';

const client = new OpenAI({ baseURL: `${process.env.LMPIPE_HTTP}/v1`, apiKey: process.env.LMPIPE_API_KEY, maxRetries: 0, timeout: 60000 });
let failures = 0;
function check(cond, what, detail) {
    if (cond) { console.log(`ok: ${what}`); return; }
    failures++;
    console.log(`FAIL: ${what}: ${JSON.stringify(detail)}`);
}
const tools = [{ type: 'function', function: { name: 'get_weather', description: 'The weather in a city.',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } }];
const messages = [
    { role: 'user', content: 'Weather in Paris?' },
    { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }] },
    { role: 'tool', tool_call_id: 'call_1', content: '{"temp": 21}' },
];
try {
    const model = (await client.models.list()).data[0].id;
    const r = await client.chat.completions.create({ model, messages, tools, tool_choice: 'auto', max_tokens: 5, temperature: 0 });
    check(r.choices.length === 1 && r.choices[0].message.role === 'assistant' && r.usage.completion_tokens === 5,
          'tools, a tool call with content null and its result: an answer', r);
    const s = await client.chat.completions.create({ model, messages, tools, max_tokens: 5, temperature: 0, stream: true });
    let text = '';
    for await (const ch of s) text += ch.choices[0]?.delta?.content ?? '';
    check(text === r.choices[0].message.content, 'streamed, the same answer', { text, whole: r.choices[0].message.content });
} catch (e) {
    failures++;
    console.log(`FAIL: threw ${e.constructor.name} ${e.status ?? ''} ${e.message}`);
}
console.log(`tools-sdk-test: ${failures ? `${failures} failure(s)` : 'all passed'}`);
process.exit(failures ? 1 : 0);
