#!/usr/bin/python3
"""GET /metrics of `lmpipe up --http` through a real Prometheus parser
(python3-prometheus-client's), then the counters against the requests run.

usage: metrics-test.py BASE_URL API_KEY  (metrics-test.sh starts the pipeline)
"""
import json
import sys
import urllib.error
import urllib.request

try:
    from prometheus_client.parser import text_string_to_metric_families
except ImportError as e:
    print(f"FAIL: python3-prometheus-client is missing ({e}): deploy/setup-debian.sh installs it")
    sys.exit(1)

BASE, KEY = sys.argv[1], sys.argv[2]
# why the group's prefix cache is off ("": on); recurrent_state for qwen35
OFF = sys.argv[3] if len(sys.argv) > 3 else ""
LAT = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80]
STEP = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 1, 2.5]
# http-spec.md's names (without the lmpipe: prefix), their types and buckets
GAUGES = ["num_requests_running", "num_requests_waiting", "shm_ring_slots", "shm_ring_slots_used",
          "sampler_strategy_version", "kv_cache_usage_perc", "kv_cache_blocks_used",
          "kv_cache_blocks_total", "kv_cache_blocks_cached", "prefix_cache_hit_rate"]
COUNTERS = ["prompt_tokens", "generation_tokens", "request_success", "errors", "http_requests",
            "prefix_cache_queries", "prefix_cache_hits", "num_preemptions"]
HISTOGRAMS = {"time_to_first_token_seconds": LAT, "e2e_request_latency_seconds": LAT,
              "request_queue_time_seconds": LAT, "inter_token_latency_seconds": STEP,
              "engine_step_seconds": STEP, "sampler_step_seconds": STEP,
              "pipeline_overhead_step_seconds": STEP}
fails = 0


def check(cond, what, detail=None):
    global fails
    if cond:
        print(f"ok: {what}")
    else:
        fails += 1
        print(f"FAIL: {what}" + ("" if detail is None else f": {detail}"))
    return cond


def http(method, path, body=None, key=KEY):
    req = urllib.request.Request(BASE + path, method=method,
                                 data=None if body is None else json.dumps(body).encode())
    if key:
        req.add_header("Authorization", f"Bearer {key}")
    if body is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, r.headers, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read().decode()


def scrape():
    """{family name: (type, help, [samples])}; the parse must not fail."""
    status, headers, text = http("GET", "/metrics", key=None)
    check(status == 200 and headers.get("Content-Type", "").startswith("text/plain"),
          "GET /metrics without a key: 200 text/plain", (status, headers.get("Content-Type")))
    fams = {}
    try:
        for f in text_string_to_metric_families(text):
            fams[f.name] = (f.type, f.documentation, f.samples)
    except Exception as e:  # the parser's own error is the finding
        check(False, "prometheus_client parses /metrics", f"{type(e).__name__}: {e}\n{text}")
        sys.exit(1)
    check(True, f"prometheus_client parses /metrics ({len(fams)} families)")
    return fams


def value(fams, fam, sample=None, **labels):
    """One sample's value; 0 for a labelled series not shown yet."""
    for s in fams[fam][2]:
        if s.name == (sample or fam) and all(s.labels.get(k) == v for k, v in labels.items()):
            return s.value
    return 0.0


def check_families(fams):
    for g in GAUGES:
        n = "lmpipe:" + g
        check(n in fams and fams[n][0] == "gauge" and fams[n][1], f"{n} is a gauge with help",
              fams.get(n, "missing")[:2])
    for c in COUNTERS:
        n = "lmpipe:" + c  # the parser names a counter's family without _total
        check(n in fams and fams[n][0] == "counter" and fams[n][1] and
              all(s.name == n + "_total" for s in fams[n][2] if not s.name.endswith("_created")),
              f"{n}_total is a counter with help", fams.get(n, "missing"))
    for h, bounds in HISTOGRAMS.items():
        n = "lmpipe:" + h
        if not check(n in fams and fams[n][0] == "histogram" and fams[n][1], f"{n} is a histogram with help",
                     fams.get(n, "missing")[:2]):
            continue
        buckets = [s for s in fams[n][2] if s.name == n + "_bucket"]
        les = [float(s.labels["le"]) for s in buckets]
        check(les == bounds + [float("inf")], f"{n}: the bucket bounds of http-spec.md and +Inf", les)
        vals = [s.value for s in buckets]
        check(all(a <= b for a, b in zip(vals, vals[1:])) and vals and
              vals[-1] == value(fams, n, n + "_count"), f"{n}: cumulative buckets, +Inf == _count", vals)
    kinds = {s.labels.get("finished_reason") for s in fams.get("lmpipe:request_success", ("", "", []))[2]}
    check({"stop", "length"} <= kinds, "request_success_total has finished_reason stop and length", kinds)


def main():
    status, _, body = http("GET", "/health", key=None)
    check(status == 200 and json.loads(body).get("status") == "ok", "GET /health: 200 ok", (status, body))
    before = scrape()
    check_families(before)

    # four generations, three whole and one streamed, and one refused
    runs = [("Once upon a time", 7, False), ("Lily and Tom went to the park", 5, False),
            ("One day, a little boy named Tim", 9, False), ("Once upon a time", 6, True)]
    # a prompt of several KV blocks, twice: the second takes its prefix from the cache
    longer = "Once upon a time there was a little girl named Lily who loved to play in the big green park with her dog"
    runs += [(longer, 4, False), (longer, 4, True)]
    prompt_tokens = gen_tokens = cached = 0
    for prompt, n, stream in runs:
        req = {"model": "m", "prompt": prompt, "max_tokens": n, "temperature": 0, "stream": stream}
        models = json.loads(http("GET", "/v1/models")[2])
        req["model"] = models["data"][0]["id"]
        if stream:
            req["stream_options"] = {"include_usage": True}
        status, _, body = http("POST", "/v1/completions", req)
        if stream:
            usage = [json.loads(l[6:])["usage"] for l in body.split("\n")
                     if l.startswith("data: {") and json.loads(l[6:]).get("usage")][-1]
        else:
            usage = json.loads(body)["usage"]
        check(status == 200 and usage["completion_tokens"] == n, f"completion of {n} tokens", (status, body[:300]))
        prompt_tokens += usage["prompt_tokens"]
        gen_tokens += usage["completion_tokens"]
        cached += usage["prompt_tokens_details"]["cached_tokens"]
    status, _, body = http("POST", "/v1/completions", {"model": req["model"], "prompt": "x", "top_k": -3})
    check(status == 400, "a bad top_k: 400", (status, body))

    after = scrape()
    check_families(after)
    d = lambda fam, sample=None, **kw: value(after, fam, sample, **kw) - value(before, fam, sample, **kw)
    nreq = len(runs)
    check(d("lmpipe:prompt_tokens", "lmpipe:prompt_tokens_total") == prompt_tokens,
          f"prompt_tokens_total grew by the {prompt_tokens} prompt tokens",
          d("lmpipe:prompt_tokens", "lmpipe:prompt_tokens_total"))
    check(d("lmpipe:generation_tokens", "lmpipe:generation_tokens_total") == gen_tokens,
          f"generation_tokens_total grew by the {gen_tokens} generated tokens",
          d("lmpipe:generation_tokens", "lmpipe:generation_tokens_total"))
    check(d("lmpipe:request_success", "lmpipe:request_success_total", finished_reason="length") == nreq,
          f"request_success_total{{finished_reason=\"length\"}} grew by {nreq}",
          d("lmpipe:request_success", "lmpipe:request_success_total", finished_reason="length"))
    check(d("lmpipe:request_success", "lmpipe:request_success_total", finished_reason="stop") == 0,
          "request_success_total{finished_reason=\"stop\"} did not move")
    for h in ["time_to_first_token_seconds", "e2e_request_latency_seconds", "request_queue_time_seconds"]:
        n = "lmpipe:" + h
        check(d(n, n + "_count") == nreq, f"{n}_count grew by {nreq}", d(n, n + "_count"))
        check(d(n, n + "_sum") > 0, f"{n}_sum grew", d(n, n + "_sum"))
    n = "lmpipe:inter_token_latency_seconds"
    check(d(n, n + "_count") == gen_tokens - nreq, f"{n}_count grew by {gen_tokens - nreq} (tokens after the first)",
          d(n, n + "_count"))
    for h in ["engine_step_seconds", "sampler_step_seconds", "pipeline_overhead_step_seconds"]:
        n = "lmpipe:" + h
        check(d(n, n + "_count") > 0, f"{n}_count grew", d(n, n + "_count"))
    check(d("lmpipe:errors", "lmpipe:errors_total", kind="bad_request") == 1,
          "errors_total{kind=\"bad_request\"} grew by 1", d("lmpipe:errors", "lmpipe:errors_total", kind="bad_request"))
    check(d("lmpipe:http_requests", "lmpipe:http_requests_total", code="400") == 1,
          "http_requests_total{code=\"400\"} grew by 1", d("lmpipe:http_requests", "lmpipe:http_requests_total", code="400"))
    # 4 completions, 4 /v1/models, /health and the first /metrics: 10 more 200s at least
    check(d("lmpipe:http_requests", "lmpipe:http_requests_total", code="200") >= 2 * nreq + 1,
          "http_requests_total{code=\"200\"} counts the requests", d("lmpipe:http_requests", "lmpipe:http_requests_total", code="200"))
    for g in ["num_requests_running", "num_requests_waiting", "shm_ring_slots_used"]:
        check(value(after, "lmpipe:" + g) == 0, f"lmpipe:{g} is back to 0 when idle", value(after, "lmpipe:" + g))
    check(value(after, "lmpipe:shm_ring_slots") > 0, "lmpipe:shm_ring_slots > 0 with shared memory on",
          value(after, "lmpipe:shm_ring_slots"))
    # The prefix cache's counters agree with the responses' cached tokens
    # (where the engine pages its KV; all 0 where it does not).
    q, h = d("lmpipe:prefix_cache_queries", "lmpipe:prefix_cache_queries_total"), \
        d("lmpipe:prefix_cache_hits", "lmpipe:prefix_cache_hits_total")
    total = value(after, "lmpipe:kv_cache_blocks_total")
    en = [s for s in after["lmpipe:group_prefix_cache_enabled"][2]]
    check(len(en) == 1 and en[0].labels.get("reason") == OFF and en[0].value == (0 if OFF else 1),
          f"group_prefix_cache_enabled: {0 if OFF else 1} with reason \"{OFF}\"",
          [(x.labels, x.value) for x in en])
    if OFF:
        check(q == 0 and h == 0 and cached == 0, f"prefix cache off ({OFF}): nothing looked up",
              (q, h, cached))
    elif total > 0:
        check(q == prompt_tokens and h == cached and cached > 0,
              "prefix_cache_queries grew by the prompt tokens, hits by the cached_tokens the responses gave",
              (q, h, prompt_tokens, cached))
    else:
        check(q == 0 and h == 0 and cached == 0, "no engine pages: nothing looked up", (q, h, cached))
    aq, ah = value(after, "lmpipe:prefix_cache_queries", "lmpipe:prefix_cache_queries_total"), \
        value(after, "lmpipe:prefix_cache_hits", "lmpipe:prefix_cache_hits_total")
    rate = value(after, "lmpipe:prefix_cache_hit_rate")
    check(abs(rate - (ah / aq if aq else 0)) < 1e-9, "prefix_cache_hit_rate is hits / queries", (rate, ah, aq))
    check(value(after, "lmpipe:kv_cache_blocks_used") == 0 and value(after, "lmpipe:kv_cache_usage_perc") == 0,
          "no KV block is held when idle", (value(after, "lmpipe:kv_cache_blocks_used"), total))
    check(value(after, "lmpipe:kv_cache_blocks_cached") <= total, "cached blocks <= total",
          (value(after, "lmpipe:kv_cache_blocks_cached"), total))
    check(value(after, "lmpipe:sampler_strategy_version") >= 1, "lmpipe:sampler_strategy_version >= 1",
          value(after, "lmpipe:sampler_strategy_version"))
    print(f"metrics-test: {fails} failure(s)" if fails else "metrics-test: all passed")
    sys.exit(1 if fails else 0)


main()
