// drain-test.mjs - 1,000 requests queued in the stream before the bridge
// starts drain with at most 16 in flight (MaxAckPending at the pipeline's
// 16 slots), each answered exactly once, its text equal to an undisturbed
// greedy run, and the stream empty at the end.  The first 16 in the stream
// are long, so that all 16 slots are seen generating at once however slowly
// the bridge ramps up (with 4 tokens each, one could end first under ASan).
import { check, done, sc, natsServer, bridge, client, request, Collector, runText, streamState, waitFor } from './lib.mjs';

const N = 1000, N_PREDICT = 4, N_LONG = 16, N_PREDICT_LONG = 48;
const nPredict = (i) => (i < N_LONG ? N_PREDICT_LONG : N_PREDICT);
const prompts = ['Once upon a time', 'Lily and Tom went to the park', 'One day, a little boy named Tim', 'The cat'];
const want = prompts.map((p) => runText(p, N_PREDICT));
const wantLong = prompts.map((p) => runText(p, N_PREDICT_LONG));
const srv = await natsServer('drain');
const nc = await client(srv.url);
const js = nc.jetstream();
const col = new Collector();
let running = new Set(), maxRunning = 0;
nc.subscribe('lmpipe.test.drain.>', {
    callback: (err, m) => {
        const e = JSON.parse(sc.decode(m.data));
        col.add(e);
        if (e.final) running.delete(e.id);
        else running.add(e.id);
        maxRunning = Math.max(maxRunning, running.size);
    },
});
// The bridge creates the stream; it starts once, is stopped, and the queue fills while it is away.
let br = bridge('drain-setup', srv.url);
try {
    await br.ready();
    await br.kill('SIGTERM');
    const t0 = Date.now();
    const acks = [];
    for (let i = 0; i < N; i++)
        acks.push(request(js, { prompt: prompts[i % prompts.length], n_predict: nPredict(i), temperature: 0 },
                          { id: `d${i}`, reply: `lmpipe.test.drain.d${i}` }));
    await Promise.all(acks);
    const st0 = await streamState(nc);
    check(st0.msgs === N, `${N} requests wait in the stream`, st0);
    br = bridge('drain', srv.url);
    // the consumer's unacked deliveries, sampled while the queue drains
    let maxAckPending = 0, samples = 0, sampling = true;
    const jsm = await nc.jetstreamManager();
    const sampler = (async () => {
        while (sampling) {
            const ci = await jsm.consumers.info('LMPIPE_REQ', 'lmpipe-bridge').catch(() => null);
            if (ci) { maxAckPending = Math.max(maxAckPending, ci.num_ack_pending); samples++; }
            await new Promise((r) => setTimeout(r, 5));
        }
    })();
    await col.waitFinals(N, 240000);
    sampling = false;
    await sampler;
    const secs = (Date.now() - t0) / 1000;
    console.log(`drained ${N} requests in ${secs.toFixed(1)} s`);
    let once = 0, right = 0;
    for (let i = 0; i < N; i++) {
        const r = col.reqs.get(`d${i}`);
        if (r && r.finals === 1 && r.dups === 0 && r.events === nPredict(i) + 1) once++;
        if (col.text(`d${i}`) === (i < N_LONG ? wantLong : want)[i % prompts.length]) right++;
    }
    check(once === N, `each of the ${N} requests is answered exactly once (its n_predict token events and one final)`, { once });
    check(right === N, `each text equals lmpipe run's`, { right });
    check(maxRunning <= 16 && maxRunning >= 16, `at most 16 requests generating at once, and 16 reached (max seen ${maxRunning})`, maxRunning);
    check(maxAckPending === 16, `at most 16 requests delivered and unacked (MaxAckPending), and 16 reached (max of ${samples} samples: ${maxAckPending})`, maxAckPending);
    await waitFor(async () => (await streamState(nc)).msgs === 0, 10000, 'an empty stream').catch(() => {});
    const st = await streamState(nc);
    check(st.msgs === 0 && st.ackPending === 0 && st.redelivered === 0, 'the stream is empty, nothing unacked or redelivered', st);
} catch (e) {
    check(false, 'drain-test ran to the end', String(e.stack || e));
}
await nc.close();
await br.kill('SIGTERM');
await srv.stop();
done();
