// Drives Debian's chromium, headless, over the DevTools protocol (on a pipe,
// nothing downloaded) through the gateway's page at /: a streamed
// two-turn chat, a live strategy swap from the page's panel in the middle of
// the second turn, and a screenshot.
// usage: node browser-driver.mjs URL API_KEY ADMIN_KEY SCREENSHOT PACE_PLUGIN
// Prints "ok: ..." lines; any failed check prints "FAIL: ..." and exits 1.
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const [url, apiKey, adminKey, shotPath, pacePlugin] = process.argv.slice(2);
if (!pacePlugin) {
  console.error("usage: browser-driver.mjs URL API_KEY ADMIN_KEY SCREENSHOT PACE_PLUGIN");
  process.exit(2);
}
const chromiumBin = process.env.CHROMIUM || "/usr/bin/chromium";
let failed = 0;
const fail = (msg) => { console.log("FAIL: " + msg); failed = 1; };
const ok = (msg) => console.log("ok: " + msg);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// ---- chromium and the DevTools connection ----
// --remote-debugging-pipe: DevTools messages on the child's fds 3 (to
// chromium) and 4 (from it), each JSON text ended by a NUL byte; no port, no
// WebSocket, so any node from Debian's 18 on drives it.
const profile = mkdtempSync(join(tmpdir(), "lmpipe-chromium-"));
const chrome = spawn(chromiumBin, [
  "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
  "--disable-background-networking", "--disable-component-update", "--disable-sync",
  "--user-data-dir=" + profile, "--remote-debugging-pipe", "--window-size=1280,1000",
  "about:blank",
], { stdio: ["ignore", "ignore", "pipe", "pipe", "pipe"], detached: true });
let chromeLog = "";
chrome.stderr.on("data", (d) => { chromeLog = (chromeLog + d).slice(-4000); });
function cleanup() {
  try { process.kill(-chrome.pid, "SIGKILL"); } catch (e) { /* already gone */ }
  rmSync(profile, { recursive: true, force: true });
}
process.on("exit", cleanup);
const toChrome = chrome.stdio[3], fromChrome = chrome.stdio[4];

let nextId = 1;
const pending = new Map();
const listeners = [];
let inbuf = Buffer.alloc(0);
fromChrome.on("data", (d) => {
  inbuf = Buffer.concat([inbuf, d]);
  let z;
  while ((z = inbuf.indexOf(0)) >= 0) {
    const m = JSON.parse(inbuf.subarray(0, z).toString("utf8"));
    inbuf = inbuf.subarray(z + 1);
    if (m.id && pending.has(m.id)) {
      const p = pending.get(m.id);
      pending.delete(m.id);
      if (m.error) p.reject(new Error(p.method + ": " + m.error.message));
      else p.resolve(m.result);
    } else if (m.method) {
      for (const l of listeners) l(m);
    }
  }
});
chrome.on("exit", (code, sig) => {
  for (const p of pending.values()) p.reject(new Error(`chromium exited (${code ?? sig}):\n${chromeLog}`));
  pending.clear();
});
let session;
function cdp(method, params = {}) {
  const id = nextId++;
  const msg = { id, method, params };
  if (session) msg.sessionId = session;
  toChrome.write(JSON.stringify(msg) + "\0");
  return new Promise((resolve, reject) => pending.set(id, { resolve, reject, method }));
}

const { targetId } = await cdp("Target.createTarget", { url: "about:blank" });
session = (await cdp("Target.attachToTarget", { targetId, flatten: true })).sessionId;

const exceptions = [];
const requests = []; // {url, method, headers, postData} of the page's requests
listeners.push((m) => {
  if (m.method === "Runtime.exceptionThrown") {
    const d = m.params.exceptionDetails;
    exceptions.push((d.exception && d.exception.description) || d.text);
  } else if (m.method === "Network.requestWillBeSent") {
    requests.push(m.params.request);
  }
});
await cdp("Runtime.enable");
await cdp("Network.enable");
await cdp("Page.enable");
await cdp("Emulation.setDeviceMetricsOverride", { width: 1280, height: 1000, deviceScaleFactor: 1, mobile: false });

// Evaluates an expression in the page and returns its value (awaited).
async function page(expr) {
  const r = await cdp("Runtime.evaluate", { expression: expr, returnByValue: true, awaitPromise: true });
  if (r.exceptionDetails) throw new Error("in the page: " + (r.exceptionDetails.exception?.description || r.exceptionDetails.text));
  return r.result.value;
}
async function waitFor(expr, what, ms = 30000) {
  const end = Date.now() + ms;
  for (;;) {
    const v = await page(expr);
    if (v) return v;
    if (Date.now() > end) throw new Error("timed out waiting for " + what);
    await sleep(20);
  }
}
// Types into a field the way a person does: the value, then input and change.
const fill = (id, value) => page(`(() => { const e = document.getElementById(${JSON.stringify(id)});
  e.value = ${JSON.stringify(value)};
  e.dispatchEvent(new Event("input", { bubbles: true }));
  e.dispatchEvent(new Event("change", { bubbles: true })); })()`);
const click = (id) => page(`document.getElementById(${JSON.stringify(id)}).click()`);
const text = (id) => page(`document.getElementById(${JSON.stringify(id)}).textContent`);

// Records, at each change of the last reply, how many token spans it holds,
// so the test sees the text grow rather than only its end state.  With
// swapAt, clicks the panel's "Set strategy" once that many tokens are shown.
const RECORD = (swapAt) => `(() => {
  const log = document.getElementById("log");
  window.__rec = { counts: [], swapAt: ${swapAt}, clickedAt: -1 };
  const obs = new MutationObserver(() => {
    const last = [...log.querySelectorAll(".msg.assistant")].pop();
    if (!last) return;
    const n = last.querySelectorAll(".tok").length;
    const r = window.__rec;
    if (n && r.counts[r.counts.length - 1] !== n) r.counts.push(n);
    if (r.swapAt > 0 && r.clickedAt < 0 && n >= r.swapAt) {
      r.clickedAt = n;
      document.getElementById("sv-set").click();
    }
  });
  obs.observe(log, { childList: true, subtree: true });
  window.__obs = obs;
})()`;
const REPLY = `(() => {
  const last = [...document.querySelectorAll("#log .msg.assistant")].pop();
  const toks = [...last.querySelectorAll(".tok")];
  window.__obs.disconnect();
  return { text: last.querySelector(".text").textContent, toks: toks.map((t) => t.textContent),
           versions: toks.map((t) => t.dataset.v === undefined ? null : Number(t.dataset.v)),
           badges: toks.flatMap((t, i) => t.classList.contains("vstart") ? [i] : []),
           finish: last.dataset.finish, tokens: Number(last.dataset.tokens),
           meta: last.querySelector(".meta").textContent, error: last.classList.contains("error"),
           counts: window.__rec.counts, clickedAt: window.__rec.clickedAt };
})()`;
const idle = `!document.getElementById("send").disabled && document.querySelectorAll("#log .msg.assistant").length`;

async function turn(prompt, nth, swapAt) {
  await page(RECORD(swapAt));
  await fill("prompt", prompt);
  await click("send");
  await waitFor(`document.querySelectorAll("#log .msg.assistant").length === ${nth} && ${idle}`, "reply " + nth);
  return page(REPLY);
}

// Checks one reply: finished, one span per streamed token, the text is the
// spans in order, and it was seen to grow while it streamed.
function checkReply(r, name, minSteps) {
  if (r.error) return fail(`${name}: the page shows an error: ${r.meta}`);
  if (!r.text.length) return fail(`${name}: no text`);
  if (r.toks.join("") !== r.text) fail(`${name}: the token spans do not make up the text`);
  if (r.tokens !== r.toks.length)
    fail(`${name}: ${r.toks.length} token spans but usage says ${r.tokens} completion tokens`);
  if (r.versions.some((v) => v === null || !Number.isInteger(v)))
    fail(`${name}: a token without a strategy version`);
  const grows = r.counts.every((c, i) => i === 0 || c > r.counts[i - 1]);
  if (!grows || r.counts.length < minSteps || r.counts[r.counts.length - 1] !== r.toks.length)
    fail(`${name}: the reply did not grow token by token as it streamed (span counts seen: ${r.counts.join(",")})`);
  else ok(`${name}: ${r.toks.length} tokens streamed, seen growing in ${r.counts.length} steps, finish_reason ${r.finish}`);
}

function chatBodies() {
  return requests.filter((q) => q.url.endsWith("/v1/chat/completions") && q.method === "POST")
    .map((q) => ({ headers: q.headers, body: JSON.parse(q.postData) }));
}

try {
  await cdp("Page.navigate", { url });
  await waitFor(`document.readyState === "complete" && document.getElementById("send") !== null`, "the page");
  ok("page loaded");

  // Without the key the page says why it cannot list the model.
  await waitFor(`/401/.test(document.getElementById("model-name").textContent)`, "the 401 without an API key");
  ok("without an API key the page shows the 401");
  await fill("apikey", apiKey);
  await waitFor(`document.getElementById("model").options.length > 0`, "the model list");
  await waitFor(`/^v\\d+$/.test(document.getElementById("sv-version").textContent)`, "the running strategy version");

  // stories260K makes thousands of tokens a second: the pace plugin, loaded
  // from the panel, holds each for 3 ms so that the stream can be watched
  await fill("adminkey", adminKey);
  await fill("pl-path", pacePlugin);
  await fill("pl-config", "3000");
  await click("pl-load");
  await waitFor(`/^load: now v\\d+/.test(document.getElementById("sv-result").textContent)`, "the plugin load");
  const plugins = await page(`[...document.querySelectorAll("#sv-plugins li")].map((li) => li.textContent)`);
  if (JSON.stringify(plugins) !== JSON.stringify(["pace (3000)Unload"])) fail("plugins shown after the load: " + JSON.stringify(plugins));
  const v0 = Number((await text("sv-version")).slice(1));
  ok(`model ${await page(`document.getElementById("model").value`)}, strategy v${v0}, health: ${await text("health")}`);

  // ---- a refused chat: stories260K has no chat template ----
  await fill("max_tokens", "8");
  const r0 = await turn("Hello", 1, 0);
  if (!r0.error || !/HTTP 400/.test(r0.meta) || !/chat_template/.test(r0.meta))
    fail("a chat without a template: the page shows " + JSON.stringify(r0.meta) + ", not the 400 naming chat_template");
  else ok("the page shows the gateway's refusal: " + r0.meta);
  await click("clear");

  // ---- turn 1: greedy ----
  // name a chat template in the page's free JSON field
  await fill("extra", '{"chat_template": "chatml"}');
  await fill("temperature", "0");
  await fill("max_tokens", "48");
  const r1 = await turn("Once upon a time", 1, 0);
  checkReply(r1, "turn 1", 2);
  if (r1.versions.some((v) => v !== v0)) fail(`turn 1: versions ${[...new Set(r1.versions)]} but the strategy is v${v0}`);

  // ---- a refused swap: wrong admin key ----
  await fill("adminkey", "not-the-admin-key");
  await click("sv-set");
  await waitFor(`/refused/.test(document.getElementById("sv-result").textContent)`, "the refused swap");
  const refused = await text("sv-result");
  if (!/401/.test(refused)) fail("a wrong admin key: the panel says " + JSON.stringify(refused) + ", not 401");
  else ok("a wrong admin key is refused in the panel: " + refused);
  if ((await text("sv-version")) !== "v" + v0) fail("a refused swap changed the shown version");

  // ---- turn 2: long, with a swap from the panel after the 3rd token ----
  await fill("adminkey", adminKey);
  await fill("extra", '{"chat_template": "chatml", "ignore_eos": true}');
  await fill("max_tokens", "300");
  await fill("sv-json", '{"temperature": 0.5, "top_k": 20}');
  const r2 = await turn("What happened next?", 2, 3);
  checkReply(r2, "turn 2", 5);
  await waitFor(`/^set: now v\\d+/.test(document.getElementById("sv-result").textContent)`, "the swap's reply");
  const v1 = Number(/v(\d+)/.exec(await text("sv-result"))[1]);
  if (!(v1 > v0)) fail(`the swap gave v${v1}, not newer than v${v0}`);
  // the panel is re-read after the reply; it must show the new strategy
  await waitFor(`document.getElementById("sv-version").textContent === "v${v1}"`, `the panel to show v${v1}`);
  const shown = JSON.parse(await text("sv-params"));
  if (shown.temperature !== 0.5 || shown.top_k !== 20)
    fail("the panel's parameters after the swap: " + JSON.stringify(shown));
  const vs = r2.versions;
  const firstNew = vs.indexOf(v1);
  if (r2.clickedAt < 3) fail("the swap was not clicked during the reply");
  else if (vs.slice(0, r2.clickedAt).some((v) => v !== v0))
    fail(`tokens before the swap carry ${[...new Set(vs.slice(0, r2.clickedAt))]}, not v${v0}`);
  else if (firstNew < 0) fail(`no token after the swap shows v${v1} (versions: ${[...new Set(vs)]})`);
  else if (vs.slice(firstNew).some((v) => v !== v1))
    fail(`after the first v${v1} token another version shows: ${[...new Set(vs.slice(firstNew))]}`);
  else if (vs.slice(0, firstNew).some((v) => v !== v0))
    fail(`between v${v0} and v${v1} tokens: ${[...new Set(vs.slice(0, firstNew))]}`);
  else ok(`swap mid-reply: tokens 1-${firstNew} show v${v0}, tokens ${firstNew + 1}-${vs.length} show v${v1} (clicked at token ${r2.clickedAt})`);
  if (JSON.stringify(r2.badges) !== JSON.stringify([0, firstNew]))
    fail(`version badges at tokens ${r2.badges}, not at 0 and ${firstNew}`);
  const legend = await page(`[...document.querySelectorAll("#legend li")].map((li) => li.textContent)`);
  const want = [`v${v0}: ${r1.toks.length + firstNew} tokens`, `v${v1}: ${vs.length - firstNew} tokens`];
  if (JSON.stringify(legend) !== JSON.stringify(want))
    fail(`legend ${JSON.stringify(legend)}, want ${JSON.stringify(want)}`);
  else ok("legend: " + legend.join("; "));

  // ---- what the page sent ----
  const chats = chatBodies().slice(1); // after the refused one
  if (chats.length !== 2) fail(`${chats.length + 1} chat requests, not 3`);
  else {
    const [a, b] = chats;
    const auth = (h) => h.Authorization || h.authorization;
    if (auth(a.headers) !== "Bearer " + apiKey || auth(b.headers) !== "Bearer " + apiKey)
      fail("a chat request without the API key as Authorization: Bearer");
    if (a.body.stream !== true || a.body.temperature !== 0 || a.body.max_tokens !== 48 ||
        a.body.chat_template !== "chatml")
      fail("turn 1's body: " + JSON.stringify(a.body));
    const m = b.body.messages.map((x) => x.role + ":" + x.content);
    const wantM = ["user:Once upon a time", "assistant:" + r1.text, "user:What happened next?"];
    if (JSON.stringify(m) !== JSON.stringify(wantM))
      fail("turn 2 did not carry the conversation: " + JSON.stringify(b.body.messages));
    else if (b.body.ignore_eos !== true || b.body.max_tokens !== 300)
      fail("turn 2's body lacks the other fields: " + JSON.stringify(b.body));
    else ok("turn 2 sent the whole conversation (3 messages) with the other fields");
  }
  const swaps = requests.filter((q) => q.url.endsWith("/sampler") && q.method === "POST");
  const good = swaps.find((q) => (q.headers.Authorization || q.headers.authorization) === "Bearer " + adminKey &&
                                 JSON.parse(q.postData).op === "set");
  if (!good) fail("no POST /sampler set with the admin key");
  else if (JSON.stringify(JSON.parse(good.postData)) !== JSON.stringify({ op: "set", params: { temperature: 0.5, top_k: 20 } }))
    fail("POST /sampler body: " + good.postData);

  // ---- the screenshot ----
  await page(`document.getElementById("log").scrollTop = 0`);
  const { cssContentSize: size } = await cdp("Page.getLayoutMetrics");
  const shot = await cdp("Page.captureScreenshot", {
    format: "png", captureBeyondViewport: true,
    clip: { x: 0, y: 0, width: size.width, height: size.height, scale: 1 },
  });
  writeFileSync(shotPath, Buffer.from(shot.data, "base64"));
  ok("screenshot " + shotPath);

  // ---- "New chat" starts an empty conversation ----
  await click("clear");
  await fill("extra", '{"chat_template": "chatml"}');
  await fill("max_tokens", "8");
  const r3 = await turn("Hello", 1, 0);
  checkReply(r3, "new chat", 1);
  const last = chatBodies().pop().body.messages;
  if (last.length !== 1 || last[0].content !== "Hello")
    fail("after New chat the request carried " + JSON.stringify(last));
  const legend3 = await page(`[...document.querySelectorAll("#legend li")].map((li) => li.textContent)`);
  if (legend3.length !== 1 || !legend3[0].startsWith(`v${v1}: `)) fail("legend after New chat: " + JSON.stringify(legend3));
  else ok("New chat sent only the new message");

  // ---- unloading the plugin from its button in the panel ----
  await page(`document.querySelector('#sv-plugins li[data-name="pace"] button').click()`);
  await waitFor(`/^unload: now v\\d+/.test(document.getElementById("sv-result").textContent)`, "the plugin unload");
  const after = await page(`[...document.querySelectorAll("#sv-plugins li")].map((li) => li.textContent)`);
  if (JSON.stringify(after) !== JSON.stringify(["none loaded"])) fail("plugins shown after the unload: " + JSON.stringify(after));
  else ok("the plugin was loaded and unloaded from the panel: " + await text("sv-result"));
} catch (e) {
  fail(e.message);
}
if (exceptions.length) fail("JavaScript exceptions in the page: " + exceptions.join(" | "));
process.exit(failed);
