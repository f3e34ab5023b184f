// structured-test.mjs - structured outputs over NATS (run by
// tests/http/structured-test.py, with `lmpipe up` running): the npm nats
// client publishes requests with response_format json_schema, llama.cpp's
// grammar and vLLM's guided_choice / structured_outputs.regex into a real
// nats-server -js; the bridge's events must give text that follows each
// constraint, and a refused schema an error event naming the field.
// Environment: lib.mjs's, and BIAS (a logit_bias object).
import { natsServer, bridge, client, request, sc, check, done, sleep, Collector } from './lib.mjs';

const bias = JSON.parse(process.env.BIAS || '{}');
const srv = await natsServer('structured');
const br = bridge('structured', srv.url);
await br.ready();
const nc = await client(srv.url);
const js = nc.jetstream();
const col = new Collector();
const sub = nc.subscribe('lmpipe.evt.so.>');
(async () => { for await (const m of sub) col.add(JSON.parse(sc.decode(m.data))); })();

const schema = { type: 'object', properties: { ok: { type: 'boolean' }, n: { type: 'integer', minimum: -5, maximum: 5 } },
                 required: ['ok', 'n'], additionalProperties: false };
const cases = [
    ['schema', { prompt: 'JSON:', max_tokens: 48, response_format: { type: 'json_schema', json_schema: { name: 's', schema, strict: true } } },
     (t) => { const v = JSON.parse(t); return typeof v.ok === 'boolean' && Number.isInteger(v.n) && v.n >= -5 && v.n <= 5 && Object.keys(v).length === 2; }],
    ['gbnf', { prompt: 'x', n_predict: 24, grammar: 'root ::= ("yes" | "no") " " [0-9]' }, (t) => /^(yes|no) [0-9]$/.test(t)],
    ['choice', { prompt: 'x', max_tokens: 24, guided_choice: ['red', 'green', 'blue'] }, (t) => ['red', 'green', 'blue'].includes(t)],
    ['regex', { prompt: 'x', max_tokens: 24, structured_outputs: { regex: '[A-Z][a-z]{1,4}[0-9]' } }, (t) => /^[A-Z][a-z]{1,4}[0-9]$/.test(t)],
    ['chat', { messages: [{ role: 'user', content: 'JSON please' }], max_tokens: 48, response_format: { type: 'json_object' } },
     (t) => { const v = JSON.parse(t); return v !== null && typeof v === 'object' && !Array.isArray(v); }],
];
const ids = [];
for (const [name, body] of cases)
    for (let seed = 0; seed < 3; seed++) {
        const id = `${name}-${seed}`;
        ids.push([id, name]);
        await request(js, { ...body, temperature: 1, seed, logit_bias: bias }, { id, reply: `lmpipe.evt.so.${id}` });
    }
await request(js, { prompt: 'x', max_tokens: 4, response_format: { type: 'json_schema', json_schema: { name: 'u', schema: { type: 'array', uniqueItems: true } } } },
              { id: 'refused', reply: 'lmpipe.evt.so.refused' });
await col.waitFinals(ids.length + 1, 120000);
let finished = 0;
for (const [id, name] of ids) {
    const f = col.reqs.get(id).final;
    if (f.reason === 'length') continue;
    const text = col.text(id);
    let good = false;
    try { good = f.reason === 'eos' && cases.find((c) => c[0] === name)[2](text); } catch { good = false; }
    if (check(good, `NATS ${id}: the text follows the constraint`, { reason: f.reason, text, error: f.error })) finished++;
}
check(finished >= 10, `NATS: at least 10 of ${ids.length} constrained outputs finished (${finished})`);
const r = col.reqs.get('refused').final;
check(r.reason === 'error' && r.error?.code === 'invalid_request' && r.error.param === 'response_format' &&
      /uniqueItems/.test(r.error.message), 'NATS: a refused schema is an error event naming response_format and uniqueItems', r);
await nc.close();
await br.kill('SIGTERM');
await srv.stop();
done();
