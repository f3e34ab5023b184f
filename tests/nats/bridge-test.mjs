// bridge-test.mjs - lmpipe-nats through the npm nats client on a real
// nats-server -js: greedy output over the bus equals `lmpipe run` and the
// stories260K goldens (llama.cpp /completion, OpenAI completions and chat
// bodies), every kind of bad request gets an error event and is terminated
// with the bridge unharmed, Nats-Msg-Id deduplicates, and sampler control
// is refused to users not named in the config, and a generation longer
// than AckWait is kept in progress.
// Environment: lib.mjs's, GOLDENS, and PACE (tests/http/pace-plugin.c built).
import { readFileSync } from 'node:fs';
import { env, check, done, sc, sleep, natsServer, bridge, client, request, Collector, runText, detok,
         streamState, waitFor } from './lib.mjs';

if (!process.env.PACE) { console.log('FAIL: PACE (the pace plugin) is not set'); process.exit(1); }
const golden = JSON.parse(readFileSync(`${process.env.GOLDENS}/stories260K.json`, 'utf8'));
const srv = await natsServer('main');
const br = bridge('main', srv.url, ['--max-body', '16384', '--control-user', '*', '--ack-wait-ms', '1000']);
const nc = await client(srv.url);
const js = nc.jetstream();
const col = new Collector();
const events = [];
// the acks on the wire: $JS.ACK.<stream>.<consumer>.<delivery count>.<stream seq>...
const deliveries = new Map(); // stream seq -> the highest delivery count acked
nc.subscribe('$JS.ACK.LMPIPE_REQ.>', { callback: (err, m) => {
    const t = m.subject.split('.');
    const sseq = Number(t[5]), n = Number(t[4]);
    deliveries.set(sseq, Math.max(n, deliveries.get(sseq) ?? 0));
} });
nc.subscribe('lmpipe.test.ev.>', { callback: (err, m) => { const e = JSON.parse(sc.decode(m.data)); events.push(e); col.add(e); } });
try {
    await br.ready();
    let n = 0;
    const ask = async (body, opts = {}) => {
        const id = opts.id ?? `r${++n}`;
        const pa = await request(js, body, { id, reply: `lmpipe.test.ev.${id}`, ...opts });
        return { id, pa };
    };
    const finalOf = async (id) => {
        await waitFor(() => col.reqs.get(id)?.final, 30000, `the final event of ${id}`);
        return col.reqs.get(id).final;
    };

    // ---- greedy goldens, in each accepted body form ----
    for (const c of golden.cases) {
        const nGen = c.continuation_ids.length;
        const head = detok(c.prompt_ids);
        const want = detok(c.prompt_ids.concat(c.continuation_ids)).slice(head.length);
        const run = runText(c.prompt, nGen);
        check(run === want, `lmpipe run of "${c.prompt}" equals the golden (the reference)`, { run, want });
        const forms = {
            'llama.cpp /completion': { v: 1, prompt: c.prompt, n_predict: nGen, temperature: 0 },
            'OpenAI completions': { prompt: c.prompt, max_tokens: nGen, temperature: 0, model: 'x', stream: true },
            'token ids': { prompt: c.prompt_ids, n_predict: nGen, temperature: 0, logprobs: true },
        };
        for (const [form, body] of Object.entries(forms)) {
            const { id } = await ask(body);
            const f = await finalOf(id);
            const r = col.reqs.get(id);
            check(col.text(id) === want, `${form}: greedy "${c.prompt}" over the bus equals lmpipe run and the golden`,
                  { got: col.text(id), want });
            const toks = r.pieces.length;
            check(f.reason === 'length' && f.usage.completion_tokens === nGen && f.usage.prompt_tokens === c.prompt_ids.length &&
                  f.seq === nGen && toks === nGen && r.dups === 0 && r.finals === 1,
                  `${form}: ${nGen} token events with seq 0..${nGen - 1}, then one final {reason, usage, timings}`, { f, toks });
            check(typeof f.timings?.predicted_ms === 'number' && f.v === 1 && f.id === id, `${form}: the final carries v, id and timings`, f);
        }
    }
    // token events: {v, id, seq, piece, token, logprob?}; ids equal the golden's
    {
        const c = golden.cases[0];
        const { id } = await ask({ prompt: c.prompt, n_predict: 8, temperature: 0, n_probs: 1 });
        await finalOf(id);
        const evs = events.filter((e) => e.id === id && !e.final).sort((a, b) => a.seq - b.seq);
        check(evs.length === 8 && evs.every((e, i) => e.seq === i && e.token === c.continuation_ids[i] && typeof e.piece === 'string'),
              'token events carry seq and the golden token ids', evs.map((e) => [e.seq, e.token]));
        check(evs.every((e, i) => Math.abs(e.logprob - c.steps[i][0][1]) < 1e-3), 'n_probs: each event has the golden logprob',
              evs.map((e) => e.logprob));
    }
    // chat: messages with a template by name (stories260K has none of its own)
    {
        const { id } = await ask({ messages: [{ role: 'user', content: 'Tell me a story.' }], chat_template: 'chatml', max_tokens: 6, temperature: 0 });
        const f = await finalOf(id);
        check(f.reason === 'length' && f.usage.completion_tokens === 6 && col.text(id).length > 0, 'OpenAI chat body: 6 tokens', f);
        const { id: id2 } = await ask({ messages: [{ role: 'user', content: 'Tell me a story.' }], max_tokens: 6 });
        const f2 = await finalOf(id2);
        check(f2.reason === 'error' && f2.error.code === 'invalid_request' && /chat_template/.test(f2.error.message),
              'chat with a model without a template: an invalid_request error event', f2);
    }

    // ---- bad requests: an error event each, the message terminated, the bridge unharmed ----
    const bad = [
        ['malformed JSON', { raw: '{"prompt": "Once", ' }, null, /not JSON/],
        ['not an object', { raw: '[1,2]' }, 'body', /object/],
        ['unknown schema version', { body: { v: 7, prompt: 'x' } }, 'v', /schema version/],
        ['a bad sampler value', { body: { prompt: 'x', top_k: -3 } }, 'top_k', /top_k/],
        ['a bad temperature type', { body: { prompt: 'x', temperature: 'hot' } }, 'temperature', /temperature/],
        ['no prompt', { body: { n_predict: 3 } }, 'prompt', /prompt/],
        ['oversized', { raw: JSON.stringify({ prompt: 'y'.repeat(20000) }) }, 'body', /over the bridge's limit/],
        ['n > 1', { body: { prompt: 'x', n: 2 } }, 'n', /only 1/],
        ['a prompt longer than the context', { body: { prompt: 'Once upon a time '.repeat(600), n_predict: 2 } }, null, /context/],
    ];
    const badIds = [];
    for (const [what, o, param, re] of bad) {
        const { id } = await ask(o.body ?? null, o.raw !== undefined ? { raw: o.raw } : {});
        badIds.push(id);
        const f = await finalOf(id);
        check(f.reason === 'error' && f.final === true && f.error && re.test(f.error.message) && (param === null || f.error.param === param) &&
              f.error.code === 'invalid_request',
              `${what}: an error event (${f.error?.message})`, f);
    }
    {
        const c = golden.cases[1];
        const { id } = await ask({ prompt: c.prompt, n_predict: 10, temperature: 0 });
        await finalOf(id);
        check(col.text(id) === runText(c.prompt, 10) && br.proc.exitCode === null, 'after every bad request the bridge still answers, alive');
    }
    await waitFor(async () => (await streamState(nc)).msgs === 0, 10000, 'an empty stream').catch(() => {});
    const st = await streamState(nc);
    check(st.msgs === 0 && st.ackPending === 0, 'every request, good or bad, was acked or terminated: the stream is empty', st);

    // ---- an event subject that would drive the JetStream API with the bridge's permissions ----
    {
        let onApi = 0;
        const spy = nc.subscribe('$JS.API.STREAM.DELETE.>', { callback: () => { onApi++; } });
        await nc.flush();
        await request(js, { prompt: 'x', n_predict: 2 }, { reply: '$JS.API.STREAM.DELETE.LMPIPE_REQ' });
        await request(js, { prompt: 'x', n_predict: 2 }, { reply: 'lmpipe.test.ev.*' });
        await sleep(500);
        spy.unsubscribe();
        const st = await streamState(nc).catch((e) => String(e));
        check(typeof st === 'object' && st.msgs === 0 && onApi === 0,
              'Lmpipe-Reply-To $JS.API.STREAM.DELETE... or a wildcard: terminated, nothing published there', { st, onApi });
    }

    // ---- an event subject that the bridge's own stream or control subject matches (#26):
    // events published there would come back as new requests (or control) ----
    {
        let ctl = 0;
        const spy = nc.subscribe('lmpipe.control.sampler', { callback: () => { ctl++; } });
        await nc.flush();
        const before = (await streamState(nc)).lastSeq ?? 0;
        await request(js, { prompt: 'Once upon a time', n_predict: 50 }, { reply: 'lmpipe.req.x' });
        await request(js, { prompt: 'Once upon a time', n_predict: 50 }, { reply: 'lmpipe.req.test' });
        await request(js, { prompt: 'x', n_predict: 5 }, { reply: 'lmpipe.control.sampler' });
        await sleep(1500);
        spy.unsubscribe();
        const st = await streamState(nc).catch((e) => String(e));
        const last = typeof st === 'object' ? st.lastSeq : -1;
        check(typeof st === 'object' && st.msgs === 0 && last - before === 3 && ctl === 0,
              'Lmpipe-Reply-To lmpipe.req.x, lmpipe.req.test or lmpipe.control.sampler: terminated, ' +
              'nothing published into the stream or the control subject', { st, before, ctl });
    }

    // ---- Nats-Msg-Id deduplication (the stream's duplicate window) ----
    {
        const body = { prompt: 'Lily', n_predict: 4, temperature: 0 };
        const a = await ask(body, { id: 'dedup-1' });
        const b = await ask(body, { id: 'dedup-1' });
        check(!a.pa.duplicate && b.pa.duplicate && a.pa.seq === b.pa.seq, 'a second publish with the same Nats-Msg-Id is a duplicate', [a.pa, b.pa]);
        await finalOf('dedup-1');
        await sleep(500);
        const r = col.reqs.get('dedup-1');
        check(r.finals === 1 && r.dups === 0, 'the deduplicated request is answered once', r);
    }

    // ---- sampler control: --control-user '*' leaves it to nats-server's permissions ----
    {
        const r = JSON.parse(sc.decode((await nc.request('lmpipe.control.sampler', sc.encode('{"op":"get"}'), { timeout: 5000 })).data));
        check(r.version !== undefined || r.params !== undefined || r.ok === true, 'control get with --control-user *: the strategy', r);
        const e = JSON.parse(sc.decode((await nc.request('lmpipe.control.sampler', sc.encode('nope'), { timeout: 5000 })).data));
        check(e.ok === false && e.error.code === 'invalid_request', 'control with a body that is not JSON: refused', e);
    }

    // ---- a generation many times AckWait (1 s) long: +WPI keeps it from redelivery ----
    {
        // stories260K makes thousands of tokens a second: tests/http/pace-plugin.c,
        // loaded over the bus, holds each token for 6 ms
        const ctl = async (o) => JSON.parse(sc.decode((await nc.request('lmpipe.control.sampler', sc.encode(JSON.stringify(o)), { timeout: 5000 })).data));
        const l = await ctl({ op: 'load', path: process.env.PACE, config: '6000' });
        check(l.ok === true, 'control load of the pace plugin over the bus', l);
        const t0 = Date.now();
        const { id, pa } = await ask({ prompt: 'Once upon a time', n_predict: 600, ignore_eos: true, temperature: 0 });
        const f = await finalOf(id);
        await sleep(200);
        const ms = Date.now() - t0;
        const st = await streamState(nc);
        check(f.usage.completion_tokens === 600 && ms > 3000 && deliveries.get(pa.seq) === 1 && st.redelivered === 0 &&
              col.reqs.get(id).dups === 0,
              `a ${ms} ms generation with AckWait 1000 ms is delivered once (+WPI)`,
              { ms, st, tokens: f.usage.completion_tokens, deliveries: deliveries.get(pa.seq) });
        const u = await ctl({ op: 'unload', name: 'pace' });
        check(u.ok === true, 'control unload of the pace plugin', u);
    }
} catch (e) {
    check(false, 'bridge-test ran to the end', String(e.stack || e));
}
await nc.close();
await br.kill('SIGTERM');
await srv.stop();

// ---- control between accounts: only the named users may swap the sampler ----
const conf = `listen: 127.0.0.1:@PORT@
jetstream { store_dir: "@DIR@" }
accounts {
  BRIDGE: {
    jetstream: enabled
    users: [{user: bridge, password: b}]
    exports: [{service: "lmpipe.control.sampler"}]
  }
  APP: {
    users: [
      {user: admin, password: a},
      {user: client, password: c},
      {user: viewer, password: v, permissions: {publish: {deny: ["lmpipe.control.>"]}}}
    ]
    imports: [{service: {account: BRIDGE, subject: "lmpipe.control.sampler"}, share: true}]
  }
}
`;
const srv2 = await natsServer('accounts', { conf });
const br2 = bridge('accounts', `nats://bridge:b@127.0.0.1:${srv2.port}`, ['--control-user', 'admin']);
try {
    await br2.ready();
    const as = async (user, pass, body, hdr) => {
        const c = await client(srv2.url, { user, pass });
        try {
            const opts = { timeout: 3000 };
            if (hdr) { const { headers } = await import('nats'); const h = headers(); h.set('Nats-Request-Info', hdr); opts.headers = h; }
            const m = await c.request('lmpipe.control.sampler', sc.encode(body), opts);
            return JSON.parse(sc.decode(m.data));
        } catch (e) {
            return { thrown: String(e.code || e.message) };
        } finally { await c.close(); }
    };
    const set = JSON.stringify({ op: 'set', params: { temperature: 0.5 } });
    const a = await as('admin', 'a', set);
    check(a.ok !== false && !a.thrown, 'admin (named in --control-user) swaps the sampler', a);
    const c = await as('client', 'c', set);
    check(c.ok === false && c.error?.code === 'forbidden' && /client/.test(c.error.message), 'client (not named) is refused by the bridge', c);
    const spoof = await as('client', 'c', set, JSON.stringify({ user: 'admin', acc: 'APP' }));
    check(spoof.ok === false && spoof.error?.code === 'forbidden', 'client claiming to be admin in its own Nats-Request-Info is refused', spoof);
    const v = await as('viewer', 'v', set);
    check(v.thrown !== undefined, 'viewer (no publish permission on lmpipe.control.>) is stopped by nats-server', v);
    const rb = await as('admin', 'a', JSON.stringify({ op: 'rollback' }));
    check(rb.ok !== false && !rb.thrown, 'admin rolls the swap back', rb);
} catch (e) {
    check(false, 'the accounts part ran to the end', String(e.stack || e));
}
await br2.kill('SIGTERM');
await srv2.stop();
done();
