// lib.mjs - shared by the NATS bridge tests: a real `nats-server -js` on a
// free loopback port, the bridge as a child process (to kill and restart),
// the npm nats client, and the checks' bookkeeping.
// Environment: LMPIPE, LMPIPE_NATS, COORD (the coordinator endpoint of a
// running `lmpipe up`), MODEL, WORK (a scratch folder).
import { spawn, execFileSync } from 'node:child_process';
import { writeFileSync, mkdirSync, appendFileSync } from 'node:fs';
import { connect, headers, StringCodec } from 'nats';

export const env = {};
for (const k of ['LMPIPE', 'LMPIPE_NATS', 'COORD', 'MODEL', 'WORK']) {
    env[k] = process.env[k];
    if (!env[k]) { console.log(`FAIL: ${k} is not set`); process.exit(1); }
}
export const sc = StringCodec();
export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

let failed = 0;
export function check(ok, what, detail) {
    if (ok) console.log(`ok: ${what}`);
    else {
        failed++;
        console.log(`FAIL: ${what}${detail === undefined ? '' : ': ' + JSON.stringify(detail).slice(0, 600)}`);
    }
    return ok;
}
export function done() {
    console.log(failed ? `${failed} check(s) failed` : 'all checks passed');
    process.exit(failed ? 1 : 0);
}

// Below the ephemeral range (tests/free-ports.py), so that no client socket
// of a test beside this one takes the port before the server binds it.
export function freePort(n = 1) {
    const script = new URL('../free-ports.py', import.meta.url).pathname;
    return Promise.resolve(Number(execFileSync('python3', [script, String(n)]).toString().trim()));
}

async function waitFor(pred, ms, what) {
    const end = Date.now() + ms;
    while (Date.now() < end) {
        if (await pred()) return true;
        await sleep(50);
    }
    throw new Error(`timed out waiting for ${what}`);
}

// nats-server -js on 127.0.0.1:port with its store in WORK/name; `conf` is
// an optional config file text (then it names the port and store itself).
export async function natsServer(name, { port, conf } = {}) {
    port = port ?? await freePort();
    const dir = `${env.WORK}/${name}`;
    mkdirSync(dir, { recursive: true });
    let args = ['-js', '-a', '127.0.0.1', '-p', String(port), '-sd', dir];
    if (conf) {
        writeFileSync(`${dir}/server.conf`, conf.replaceAll('@PORT@', String(port)).replaceAll('@DIR@', dir));
        args = ['-c', `${dir}/server.conf`];
    }
    const srv = { port, url: `nats://127.0.0.1:${port}`, proc: null, log: '' };
    srv.start = async () => {
        srv.proc = spawn('nats-server', args, { stdio: ['ignore', 'pipe', 'pipe'] });
        srv.proc.stderr.on('data', (d) => { srv.log += d; });
        await waitFor(() => srv.log.includes('Server is ready'), 10000, `nats-server ${name}`);
    };
    srv.stop = async (sig = 'SIGTERM') => {
        if (!srv.proc || srv.proc.exitCode !== null) return;
        const p = srv.proc;
        const gone = new Promise((r) => p.once('exit', r));
        p.kill(sig);
        await gone;
        srv.log = '';
    };
    await srv.start();
    return srv;
}

// The bridge; `args` are extra flags.  Its stderr goes to WORK/bridge-<name>.log.
export function bridge(name, url, args = [], coord = env.COORD) {
    const br = { proc: null, log: '', starts: 0 };
    br.start = () => {
        br.starts++;
        br.proc = spawn(env.LMPIPE_NATS, ['--coordinator', coord, '--url', url, ...args],
                        { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, LMPIPE_LOG: 'info' } });
        br.proc.stderr.on('data', (d) => { br.log += d; appendFileSync(`${env.WORK}/bridge-${name}.log`, d); });
    };
    br.ready = () => waitFor(() => /consuming .* at most \d+ unacked/.test(br.log), 20000, `the bridge ${name} to consume`);
    br.kill = async (sig = 'SIGKILL') => {
        if (!br.proc || br.proc.exitCode !== null || br.proc.signalCode) return;
        const p = br.proc;
        const gone = new Promise((r) => p.once('exit', r));
        p.kill(sig);
        await gone;
    };
    br.start();
    return br;
}

export async function client(url, opts = {}) {
    return connect({ servers: url, maxReconnectAttempts: -1, reconnectTimeWait: 100, ...opts });
}

// Publish one request into the stream; returns the PubAck.
export async function request(js, body, { id, reply, subject = 'lmpipe.req.test', raw } = {}) {
    const h = headers();
    if (id) h.set('Nats-Msg-Id', id);
    if (reply) h.set('Lmpipe-Reply-To', reply);
    const data = raw !== undefined ? (typeof raw === 'string' ? sc.encode(raw) : raw) : sc.encode(JSON.stringify(body));
    return js.publish(subject, data, { headers: h });
}

// Collects events by request id, keeping the first of each seq and noting
// duplicates (a redelivered request's events come again from seq 0).
export class Collector {
    constructor() { this.reqs = new Map(); this.order = []; this.finals = 0; }
    add(e) {
        let r = this.reqs.get(e.id);
        if (!r) { r = { pieces: [], final: null, dups: 0, mismatch: 0, events: 0, finals: 0 }; this.reqs.set(e.id, r); }
        r.events++;
        if (r.pieces[e.seq] !== undefined || (e.final && r.final && r.final.seq === e.seq)) {
            r.dups++;
            const prev = e.final ? r.final.piece : r.pieces[e.seq];
            if (prev !== e.piece) r.mismatch++;
            if (e.final) r.finals++;
            return r;
        }
        if (e.final) { r.final = e; r.finals++; this.finals++; } else r.pieces[e.seq] = e.piece;
        return r;
    }
    text(id) {
        const r = this.reqs.get(id);
        if (!r || !r.final) return null;
        for (let i = 0; i < r.final.seq; i++) if (r.pieces[i] === undefined) return null; // a gap
        return r.pieces.slice(0, r.final.seq).join('') + (r.final.piece ?? '');
    }
    waitFinals(n, ms) { return waitFor(() => this.finals >= n, ms, `${n} final events (have ${this.finals})`); }
}

// `lmpipe run` (in-process, no bus): the text, without its newline.
export function runText(prompt, n) {
    const out = execFileSync(env.LMPIPE, ['run', '--model', env.MODEL, '--prompt', prompt, '--temperature', '0',
                                          '--max-tokens', String(n)]).toString();
    return out.endsWith('\n') ? out.slice(0, -1) : out;
}
export const detok = (ids) => execFileSync(env.LMPIPE, ['detokenize', '--model', env.MODEL], { input: ids.join(' ') }).toString();

// The stream's state: messages left and the consumer's unacked count.
export async function streamState(nc, stream = 'LMPIPE_REQ', durable = 'lmpipe-bridge') {
    const jsm = await nc.jetstreamManager();
    const si = await jsm.streams.info(stream);
    const ci = await jsm.consumers.info(stream, durable);
    return { msgs: si.state.messages, ackPending: ci.num_ack_pending, pending: ci.num_pending, redelivered: ci.num_redelivered, lastSeq: si.state.last_seq };
}
export { waitFor, headers };
