#!/usr/bin/env python3
"""deploy/k8s: every manifest parses, and the fields that matter are there:

- the kustomization lists every manifest, and they exist;
- the engine group is a StatefulSet behind a headless Service, one pod with
  an engine and a sampler container that both mount one emptyDir of medium
  Memory at /dev/shm, and the coordinator's config names every replica;
- tokenizer, coordinator and gateway are Deployments behind Services whose
  ports are the containers' ports;
- every pod gets its key from a Secret: the secret volume is mounted, and
  the config's curve.key lies in a volume every main container mounts and
  that is filled from the Secret;
- every container has cpu and memory requests and limits, runs as non-root
  without privilege escalation;
- the gateway's readiness and liveness probes are GETs of /health, and the
  other containers have probes too;
- the configs' keys are lmpipe's: keys of the services' parameter tables
  (`lmpipe schema --config`, what lmpipe up checks a config against).

usage: deploy-k8s-test.py SOURCE_DIR LMPIPE"""
import glob
import json
import os
import re
import subprocess
import sys

try:
    import yaml
except ImportError:
    sys.exit("deploy-k8s-test: no yaml module: install python3-yaml (deploy/setup-debian.sh)")

src = sys.argv[1]
k8s = os.path.join(src, "deploy", "k8s")
fails = []


def check(cond, msg):
    if not cond:
        fails.append(msg)
    return cond


docs = []
for path in sorted(glob.glob(os.path.join(k8s, "*.yaml"))):
    try:
        docs += [(os.path.basename(path), d) for d in yaml.safe_load_all(open(path)) if d]
    except yaml.YAMLError as e:
        check(False, "%s: %s" % (path, e))
by_kind = {}
for f, d in docs:
    check("kind" in d and "apiVersion" in d, "%s: a document without kind/apiVersion" % f)
    by_kind.setdefault(d.get("kind"), []).append(d)

kust = by_kind.get("Kustomization", [{}])[0]
listed = set(kust.get("resources", []))
present = {os.path.basename(p) for p in glob.glob(os.path.join(k8s, "*.yaml"))} - {"kustomization.yaml"}
check(listed == present, "kustomization resources %s != files %s" % (sorted(listed), sorted(present)))
secret_names = {g["name"] for g in kust.get("secretGenerator", [])}
check(secret_names, "no secretGenerator for the keys")

cms = {d["metadata"]["name"]: d for d in by_kind.get("ConfigMap", [])}
confs = cms.get("lmpipe-config", {}).get("data", {})
check(confs, "no ConfigMap lmpipe-config with the config files")


def conf_keys(text):
    out = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            k, _, v = line.partition("=")
            out[k.strip()] = v.strip()
    return out


# The keys lmpipe knows: every service's parameter table ('*' a name).
tables = json.loads(subprocess.run([sys.argv[2], "schema", "--config"], check=True, capture_output=True,
                                   text=True).stdout)["tables"]
patterns = [re.compile("^" + re.escape(r["key"]).replace(r"\*", "[a-z0-9_-]+") + "$")
            for t in tables for r in t["params"] if r["key"]]
check(len(patterns) > 60, "lmpipe schema --config lists the tables' keys")
for name, text in confs.items():
    for k in conf_keys(text):
        check(any(p.match(k) for p in patterns), "%s: unknown config key '%s'" % (name, k))

services = by_kind.get("Service", [])


def service_for(labels):
    return [s for s in services
            if s["spec"].get("selector") and all(labels.get(k) == v for k, v in s["spec"]["selector"].items())]


def check_pod(kind, name, pod):
    spec = pod["spec"]
    psec = spec.get("securityContext", {})
    check(psec.get("runAsNonRoot") is True, "%s %s: not runAsNonRoot" % (kind, name))
    vols = {v["name"]: v for v in spec.get("volumes", [])}
    everyone = spec.get("initContainers", []) + spec["containers"]
    for c in everyone:
        where = "%s %s container %s" % (kind, name, c["name"])
        res = c.get("resources", {})
        for part in ("requests", "limits"):
            for r in ("cpu", "memory"):
                check(r in res.get(part, {}), "%s: no %s %s" % (where, r, part))
        csec = c.get("securityContext", {})
        check(csec.get("allowPrivilegeEscalation") is False, "%s: privilege escalation allowed" % where)
        for m in c.get("volumeMounts", []):
            check(m["name"] in vols, "%s: mounts unknown volume %s" % (where, m["name"]))
    # The key: a Secret volume, mounted, copied into the volume that holds
    # the config's curve.key in every main container.
    secret_vols = [n for n, v in vols.items() if v.get("secret", {}).get("secretName") in secret_names]
    check(secret_vols, "%s %s: no volume from a key Secret (%s)" % (kind, name, sorted(secret_names)))
    fillers = [c for c in everyone if any(m["name"] in secret_vols for m in c.get("volumeMounts", []))]
    check(fillers, "%s %s: the key Secret is not mounted" % (kind, name))
    for c in spec["containers"]:
        where = "%s %s container %s" % (kind, name, c["name"])
        args = c.get("args", [])
        check("--config" in args and "--only" in args, "%s: not 'up --config F --only ROLE': %s" % (where, args))
        if "--config" not in args:
            continue
        conf = args[args.index("--config") + 1]
        mounts = {m["mountPath"]: m for m in c.get("volumeMounts", [])}
        cdir, cfile = os.path.split(conf)
        check(cdir in mounts and vols.get(mounts[cdir]["name"], {}).get("configMap", {}).get("name")
              == "lmpipe-config" and cfile in confs, "%s: %s is not from ConfigMap lmpipe-config" % (where, conf))
        key = conf_keys(confs.get(cfile, "")).get("curve.key")
        if check(key, "%s: %s has no curve.key" % (where, cfile)):
            kdir = os.path.dirname(key)
            kvol = mounts.get(kdir, {}).get("name")
            check(kvol and any(kvol in [m["name"] for m in f.get("volumeMounts", [])] for f in fillers),
                  "%s: curve.key %s is not in a volume filled from the key Secret" % (where, key))
        check(c.get("readinessProbe") and c.get("livenessProbe"), "%s: no readiness/liveness probe" % where)
        ports = [p["containerPort"] for p in c.get("ports", [])]
        check(ports, "%s: no port" % where)


workloads = [(k, d) for k in ("Deployment", "StatefulSet") for d in by_kind.get(k, [])]
names = {d["metadata"]["name"]: (k, d) for k, d in workloads}
for want in ("lmpipe-tokenizer", "lmpipe-coordinator", "lmpipe-http"):
    if check(want in names, "no workload %s" % want):
        check(names[want][0] == "Deployment", "%s is a %s, not a Deployment" % (want, names[want][0]))
for kind, d in workloads:
    name = d["metadata"]["name"]
    pod = d["spec"]["template"]
    check_pod(kind, name, pod)
    svcs = service_for(pod["metadata"]["labels"])
    if check(svcs, "%s %s: no Service selects it" % (kind, name)):
        cports = {p["containerPort"] for c in pod["spec"]["containers"] for p in c.get("ports", [])}
        sports = {p.get("targetPort", p["port"]) for s in svcs for p in s["spec"]["ports"]}
        check(cports == sports, "%s %s: Service ports %s != container ports %s" % (kind, name, sports, cports))

# The engine group.
groups = [d for d in by_kind.get("StatefulSet", []) if d["metadata"]["name"] == "lmpipe-group"]
if check(groups, "no StatefulSet lmpipe-group"):
    g = groups[0]
    spec = g["spec"]["template"]["spec"]
    cs = {c["name"]: c for c in spec["containers"]}
    check(set(cs) == {"engine", "sampler"}, "the group pod holds %s, not engine and sampler" % sorted(cs))
    for role, c in cs.items():
        args = c.get("args", [])
        check("--only" in args and args[args.index("--only") + 1] == role,
              "group container %s does not run --only %s: %s" % (role, role, args))
    mem = {v["name"] for v in spec.get("volumes", []) if (v.get("emptyDir") or {}).get("medium") == "Memory"}
    shm = [{m["name"] for m in c.get("volumeMounts", []) if m["mountPath"] == "/dev/shm"} for c in cs.values()]
    check(len(shm) == 2 and shm[0] and shm[0] == shm[1] and shm[0] <= mem,
          "engine and sampler do not mount one emptyDir of medium Memory at /dev/shm: %s (memory: %s)" % (shm, mem))
    headless = [s for s in services if s["metadata"]["name"] == g["spec"].get("serviceName")]
    check(headless and headless[0]["spec"].get("clusterIP") == "None",
          "the StatefulSet's serviceName is not a headless Service")
    coord = conf_keys(confs.get("coordinator.conf", ""))
    for i in range(g["spec"].get("replicas", 1)):
        host = "lmpipe-group-%d.%s" % (i, g["spec"].get("serviceName"))
        check(any(k.startswith("group.") and k.endswith(".engine") and host in v for k, v in coord.items()),
              "coordinator.conf names no group on replica %s" % host)

# The gateway's probes.
http = names.get("lmpipe-http", (None, None))[1]
if http:
    for c in http["spec"]["template"]["spec"]["containers"]:
        for p in ("readinessProbe", "livenessProbe"):
            get = (c.get(p) or {}).get("httpGet", {})
            port = get.get("port")
            check(get.get("path") == "/health" and port in [x["containerPort"] for x in c.get("ports", [])],
                  "lmpipe-http %s is not a GET of /health on its port: %s" % (p, c.get(p)))

for f in fails:
    print("FAIL:", f)
if not fails:
    print("ok: %d manifests, %d workloads" % (len(docs), len(workloads)))
sys.exit(1 if fails else 0)
