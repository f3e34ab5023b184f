// up-test.mjs - `lmpipe up --config` with nats.* keys starts lmpipe-nats
// with them (nats.max_inflight, nats.control_users), restarts it when it
// is killed, hands the bridge the coordinator's CURVE key on tcp:// (and no
// key with allow_insecure_tcp), refuses a bad value before starting, naming
// its key, and fails with the bridge's message when a file is bad.
import { spawn, execFileSync } from 'node:child_process';
import { writeFileSync, readFileSync } from 'node:fs';
import { env, check, done, sc, sleep, natsServer, client, request, Collector, runText, waitFor, freePort } from './lib.mjs';

const srv = await natsServer('up');
const nc = await client(srv.url);
const js = nc.jetstream();
const col = new Collector();
nc.subscribe('lmpipe.test.up.>', { callback: (err, m) => col.add(JSON.parse(sc.decode(m.data))) });
const conf = `${env.WORK}/up.conf`;
writeFileSync(conf, `model = ${env.MODEL}\nendpoint = ipc://${env.WORK}/up.sock\nnats.url = ${srv.url}\n` +
                    `nats.max_inflight = 3\nnats.control_users = *\nnats.durable = up-bridge\n`);
let out = '', err = '';
const up = spawn(env.LMPIPE, ['up', '--config', conf], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, LMPIPE_LOG: 'info' } });
up.stdout.on('data', (d) => { out += d; });
up.stderr.on('data', (d) => { err += d; });
const bridgePid = () => {
    try { return Number(execFileSync('pgrep', ['-P', String(up.pid), '-x', 'lmpipe-nats']).toString().trim().split('\n')[0]); }
    catch { return 0; }
};
try {
    await waitFor(() => /NATS bridge to nats:/.test(out) && /at most 3 unacked/.test(err), 30000, 'lmpipe up and its bridge');
    check(true, 'lmpipe up --config with nats.url starts lmpipe-nats with nats.max_inflight = 3');
    const ask = async (id) => {
        await request(js, { prompt: 'Once upon a time', n_predict: 12, temperature: 0 }, { id, reply: `lmpipe.test.up.${id}` });
        await waitFor(() => col.reqs.get(id)?.final, 30000, `the answer to ${id}`);
        return col.text(id);
    };
    const want = runText('Once upon a time', 12);
    check(await ask('u1') === want, 'a request through the bridge lmpipe up started');
    const ctl = JSON.parse(sc.decode((await nc.request('lmpipe.control.sampler', sc.encode('{"op":"get"}'), { timeout: 5000 })).data));
    check(ctl.ok !== false, 'nats.control_users = * reached the bridge', ctl);
    const pid = bridgePid();
    check(pid > 0, 'lmpipe-nats is a child of lmpipe up', pid);
    if (pid > 0) process.kill(pid, 'SIGKILL');
    await waitFor(() => /lmpipe-nats exited .*restarting it/.test(err), 10000, 'the restart notice');
    await waitFor(() => bridgePid() > 0 && bridgePid() !== pid, 10000, 'a new lmpipe-nats');
    check(await ask('u2') === want, 'after a SIGKILL lmpipe up restarts the bridge, which answers');
} catch (e) {
    check(false, 'up-test ran to the end', String(e.stack || e) + '\n' + err.slice(-2000));
}
up.kill('SIGTERM');
await new Promise((r) => up.once('exit', r));

// The coordinator on tcp://: with curve.key the bridge connects with this
// host's key and the coordinator's; with allow_insecure_tcp, plainly.
execFileSync(env.LMPIPE, ['keygen', '-o', `${env.WORK}/host`], { stdio: 'ignore' });
for (const [what, keys] of [['curve.key', `curve.key = ${env.WORK}/host.key\n`], ['allow_insecure_tcp', 'allow_insecure_tcp = true\n']]) {
    const port = await freePort();
    writeFileSync(conf, `model = ${env.MODEL}\nendpoint = tcp://127.0.0.1:${port}\n${keys}nats.url = ${srv.url}\n` +
                        `nats.durable = up-bridge\n`);
    let o = '', e = '';
    const u = spawn(env.LMPIPE, ['up', '--config', conf], { stdio: ['ignore', 'pipe', 'pipe'] });
    u.stdout.on('data', (d) => { o += d; });
    u.stderr.on('data', (d) => { e += d; });
    try {
        await waitFor(() => /NATS bridge to nats:/.test(o), 30000, `lmpipe up with ${what} and its bridge`);
        const id = `t-${what.replace(/[^a-z]/g, '')}`;
        await request(js, { prompt: 'Once upon a time', n_predict: 12, temperature: 0 }, { id, reply: `lmpipe.test.up.${id}` });
        await waitFor(() => col.reqs.get(id)?.final, 30000, `the answer to ${id}`);
        check(col.text(id) === runText('Once upon a time', 12) && !/lmpipe-nats exited/.test(e),
              `coordinator on tcp:// with ${what}: the bridge lmpipe up started answers`, e.slice(-600));
    } catch (x) {
        check(false, `coordinator on tcp:// with ${what}`, String(x) + '\n' + e.slice(-1500));
    }
    u.kill('SIGTERM');
    await new Promise((r) => u.once('exit', r));
}

// bad bridge flags from the config: lmpipe up stops, naming the bridge
writeFileSync(conf, `model = ${env.MODEL}\nendpoint = ipc://${env.WORK}/up2.sock\nnats.url = ${srv.url}\nnats.max_inflight = lots\n`);
let rc = 0, err2 = '';
try { execFileSync(env.LMPIPE, ['up', '--config', conf], { timeout: 60000, stdio: ['ignore', 'pipe', 'pipe'] }); }
catch (e) { rc = e.status; err2 = String(e.stderr); }
// (checked once, against the bridge's parameter table, before anything starts)
check(rc !== 0 && /config key nats\.max_inflight: 'lots' is not an integer/.test(err2) && !/lmpipe up: ready/.test(err2),
      'nats.max_inflight = lots: lmpipe up refuses it before starting, naming the key', { rc, err: err2.slice(-600) });
// a credentials file that is not there: said at once, not retried forever
writeFileSync(conf, `model = ${env.MODEL}\nendpoint = ipc://${env.WORK}/up3.sock\nnats.url = ${srv.url}\nnats.creds = ${env.WORK}/none.creds\n`);
rc = 0; err2 = '';
try { execFileSync(env.LMPIPE, ['up', '--config', conf], { timeout: 60000, stdio: ['ignore', 'pipe', 'pipe'] }); }
catch (e) { rc = e.status; err2 = String(e.stderr); }
check(rc !== 0 && /lmpipe-nats: --creds .*none\.creds: No such file/.test(err2),
      'nats.creds naming a missing file: lmpipe up fails with the bridge\'s message', { rc, err: err2.slice(-600) });
await nc.close();
await srv.stop();
done();
