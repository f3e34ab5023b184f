// fault-test.mjs - no request is lost or answered without its final event:
//   1. ten rounds: a batch of requests, SIGKILL of the bridge at a random
//      moment of their generations, a restart; after each restart every
//      request is answered, and a consumer that drops duplicate seqs sees
//      each request's text exactly once, equal to `lmpipe run`.  Watching
//      the acks ($JS.ACK.>) on the wire: no request is acked (+ACK or
//      +TERM) before its final event was delivered.
//   2. nats-server stopped and restarted mid-run: the bridge reconnects,
//      the requests in flight finish and are answered, and their events
//      reach the output stream (--events-stream) for a consumer that
//      reconnects later than the bridge.
//   3. the pipeline (lmpipe up) stopped mid-run and started again: the
//      bridge naks requests with a delay while it is away, and every
//      request is answered once it is back.
import { spawn } from 'node:child_process';
import { env, check, done, sc, sleep, natsServer, bridge, client, request, Collector, runText, streamState, waitFor } from './lib.mjs';

const ROUNDS = 10, PER_ROUND = 24, N_PREDICT = 64;
const prompts = ['Once upon a time', 'Lily and Tom went to the park', 'One day, a little boy named Tim', 'The cat'];
const want = prompts.map((p) => runText(p, N_PREDICT));
const srv = await natsServer('fault');
const nc = await client(srv.url);
const js = nc.jetstream();
const col = new Collector();
const idOfSeq = new Map(); // stream sequence -> request id
let acks = 0, naks = 0, early = [];
const naked = new Map(); // request id -> -NAKs
let trigger = null; // {ids, k, n, resolve}: resolves at the k-th token event of a round
nc.subscribe('lmpipe.test.fault.>', {
    callback: (err, m) => {
        const e = JSON.parse(sc.decode(m.data));
        col.add(e);
        if (trigger && trigger.ids.has(e.id) && ++trigger.n >= trigger.k && !e.final) { trigger.resolve(); trigger = null; }
    },
});
nc.subscribe('$JS.ACK.LMPIPE_REQ.>', {
    callback: (err, m) => {
        const what = sc.decode(m.data);
        const t = m.subject.split('.');
        const sseq = Number(t.length === 9 ? t[5] : t[7]);
        if (what.startsWith('-NAK')) { naks++; naked.set(idOfSeq.get(sseq), (naked.get(idOfSeq.get(sseq)) ?? 0) + 1); }
        if (!what.startsWith('+ACK') && !what.startsWith('+TERM')) return;
        const id = idOfSeq.get(sseq);
        acks++;
        if (!id || !col.reqs.get(id)?.final) early.push({ sseq, id, what });
    },
});
await nc.flush();
const args = ['--ack-wait-ms', '1000', '--nak-delay-ms', '200'];
let br = bridge('fault', srv.url, args);
const rnd = (lo, hi) => lo + Math.floor(Math.random() * (hi - lo));
try {
    await br.ready();
    let n = 0, midKills = 0;
    for (let round = 0; round < ROUNDS; round++) {
        const ids = [];
        // a random moment of the round's generations: its k-th token event
        const t = { ids: new Set(), k: rnd(1, Math.floor(PER_ROUND * N_PREDICT * 0.7)), n: 0 };
        const hit = new Promise((resolve) => { t.resolve = resolve; });
        trigger = t;
        for (let i = 0; i < PER_ROUND; i++, n++) {
            const id = `f${n}`;
            ids.push(id);
            t.ids.add(id);
            const pa = await request(js, { prompt: prompts[n % prompts.length], n_predict: N_PREDICT, temperature: 0 },
                                     { id, reply: `lmpipe.test.fault.${id}` });
            idOfSeq.set(pa.seq, id);
        }
        await hit;
        const started = ids.filter((id) => col.reqs.get(id) && !col.reqs.get(id).final).length;
        await br.kill('SIGKILL');
        if (started > 0) midKills++;
        br.start();
        await br.ready();
        await waitFor(() => ids.every((id) => col.reqs.get(id)?.final), 60000, `round ${round}'s answers`).catch(() => {});
        const answered = ids.filter((id) => col.reqs.get(id)?.final).length;
        let right = 0;
        ids.forEach((id) => { if (col.text(id) === want[Number(id.slice(1)) % prompts.length]) right++; });
        check(answered === ids.length && right === ids.length,
              `round ${round + 1}: SIGKILL with ${started} generations running; after the restart all ${ids.length} answered, texts equal lmpipe run's`,
              { answered, right });
    }
    check(midKills === ROUNDS, `every kill hit running generations (${midKills} of ${ROUNDS})`);
    let dups = 0, mismatch = 0, multiFinal = 0;
    for (const r of col.reqs.values()) { dups += r.dups; mismatch += r.mismatch; if (r.finals > 1) multiFinal++; }
    console.log(`duplicate events dropped by seq: ${dups}; requests with their final event more than once: ${multiFinal}`);
    check(dups > 0, 'redeliveries after the kills sent events again (dropped by seq)', dups);
    check(mismatch === 0, 'a duplicate seq always repeats the same piece', mismatch);
    await sleep(300);
    check(acks >= ROUNDS * PER_ROUND, `acks seen on the wire (${acks})`, acks);
    check(early.length === 0, 'no request was acked before its final event', early.slice(0, 5));
    await waitFor(async () => (await streamState(nc)).msgs === 0, 10000, 'an empty stream').catch(() => {});
    const st = await streamState(nc);
    check(st.msgs === 0 && st.ackPending === 0, 'the request stream is empty at the end', st);
} catch (e) {
    check(false, 'the SIGKILL part ran to the end', String(e.stack || e));
}
await br.kill('SIGTERM');

// ---- 2: nats-server goes away and comes back ----
try {
    br = bridge('outage', srv.url, [...args, '--events-stream', 'LMPIPE_EVT', '--events-subjects', 'lmpipe.evt.>',
                                    '--events-max-age-s', '600']);
    await br.ready();
    const ids = [];
    for (let i = 0; i < 32; i++) {
        const id = `o${i}`;
        ids.push(id);
        await request(js, { prompt: prompts[i % prompts.length], n_predict: N_PREDICT, temperature: 0 }, { id, reply: `lmpipe.evt.${id}` });
    }
    await sleep(rnd(50, 200));
    await srv.stop();
    await sleep(1500);
    await srv.start();
    await waitFor(() => /reconnected to NATS/.test(br.log), 20000, 'the bridge to reconnect');
    check(true, 'the bridge reconnected after nats-server came back');
    // A late consumer reads the output stream from its start.
    const out = new Collector();
    await waitFor(async () => {
        const c = new Collector();
        try {
            const oc = await js.consumers.get('LMPIPE_EVT');
            const it = await oc.fetch({ max_messages: 100000, expires: 1000 });
            for await (const m of it) c.add(JSON.parse(sc.decode(m.data)));
        } catch (e) {
            return false; // the client may still be reconnecting, or JetStream starting: again
        }
        out.reqs = c.reqs;
        return ids.every((id) => c.reqs.get(id)?.final);
    }, 60000, 'every request in the output stream').catch((e) => console.log(String(e)));
    let right = 0;
    ids.forEach((id, i) => { if (out.text(id) === want[i % prompts.length]) right++; });
    check(right === ids.length, `after the outage all ${ids.length} requests are answered in the output stream, texts equal lmpipe run's`, { right });
    await waitFor(async () => (await streamState(nc)).msgs === 0, 10000, 'an empty stream').catch(() => {});
    const st = await streamState(nc);
    check(st.msgs === 0 && st.ackPending === 0, 'the request stream is empty after the outage', st);
} catch (e) {
    check(false, 'the outage part ran to the end', String(e.stack || e));
}
await br.kill('SIGTERM');

// ---- 3: the pipeline goes away and comes back: requests wait, naked with a delay ----
let up = null;
try {
    const ep = `ipc://${env.WORK}/p3.sock`;
    const startUp = async () => {
        // No drain grace: SIGTERM takes the pipeline away in mid-run.
        const p = spawn(env.LMPIPE, ['up', '--model', env.MODEL, '--endpoint', ep, '--drain-grace-ms', '0'], { stdio: ['ignore', 'pipe', 'ignore'] });
        let out = '';
        p.stdout.on('data', (d) => { out += d; });
        await waitFor(() => /ready on/.test(out), 30000, 'lmpipe up');
        return p;
    };
    up = await startUp();
    br = bridge('pipeline', srv.url, args, ep);
    await br.ready();
    const ids = [];
    const t = { ids: new Set(), k: rnd(1, 16 * N_PREDICT / 2), n: 0 };
    const hit = new Promise((resolve) => { t.resolve = resolve; });
    trigger = t;
    for (let i = 0; i < 24; i++) {
        const id = `p${i}`;
        ids.push(id);
        t.ids.add(id);
        const pa = await request(js, { prompt: prompts[i % prompts.length], n_predict: N_PREDICT, temperature: 0 }, { id, reply: `lmpipe.test.fault.${id}` });
        idOfSeq.set(pa.seq, id);
    }
    await hit;
    const running = ids.filter((id) => col.reqs.get(id) && !col.reqs.get(id).final);
    const exited = new Promise((r) => up.once('exit', r));
    up.kill('SIGTERM');
    await exited;
    const naks0 = naks;
    const late = [];
    for (let i = 24; i < 32; i++) {
        const id = `p${i}`;
        ids.push(id);
        late.push(id);
        const pa = await request(js, { prompt: prompts[i % prompts.length], n_predict: N_PREDICT, temperature: 0 }, { id, reply: `lmpipe.test.fault.${id}` });
        idOfSeq.set(pa.seq, id);
    }
    // The running ones end at once with a retryable error (FinalEvent.retryable),
    // are naked, and come back every 200 ms (--nak-delay-ms) to be naked again.
    const nakedOften = () => running.every((id) => (naked.get(id) ?? 0) >= 3);
    await waitFor(nakedOften, 20000, 'naks while the pipeline is away').catch(() => {});
    check(running.length > 0 && nakedOften() && late.every((id) => !col.reqs.get(id)) && running.every((id) => !col.reqs.get(id).final),
          `while the pipeline is away the bridge naks the ${running.length} requests it was running, again and again (${naks - naks0} -NAK), answering none`,
          running.map((id) => naked.get(id) ?? 0));
    up = await startUp();
    await waitFor(() => ids.every((id) => col.reqs.get(id)?.final), 60000, 'the answers after the pipeline came back').catch(() => {});
    let right = 0;
    ids.forEach((id, i) => { if (col.text(id) === want[i % prompts.length]) right++; });
    check(right === ids.length, `after the pipeline came back all ${ids.length} requests are answered, texts equal lmpipe run's`, { right });
    await waitFor(async () => (await streamState(nc)).msgs === 0, 10000, 'an empty stream').catch(() => {});
    const st = await streamState(nc);
    check(st.msgs === 0 && st.ackPending === 0, 'the request stream is empty after the pipeline restart', st);
} catch (e) {
    check(false, 'the pipeline part ran to the end', String(e.stack || e));
}
if (up) up.kill('SIGTERM');
await nc.close();
await br.kill('SIGTERM');
await srv.stop();
done();
