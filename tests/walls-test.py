#!/usr/bin/env python3
"""The walls between the services: a service may share only lib/ and proto/;
the two edges (gateway/http, gateway/nats) are walled the same way, and
share only lib/, proto/ and gateway/common/.

usage: walls-test.py BUILD_DIR SOURCE_DIR

1. Every C file in a service folder, compiled with its own flags from
   compile_commands.json, is asked for its header dependencies (-MM): a
   header in another service's folder fails, also when it is reached by a
   relative path ("../engine-svc/engine.h") or through a lib/ header.  Its
   -I flags may not name another service's folder either.
2. Each service executable links no library built in another service's
   folder (ninja's inputs for the target), and sampler-svc links no cudart.
3. meson's introspection: no sampler-svc target is compiled with the
   engine's or tokenizer-svc's folder on its include path.
"""
import concurrent.futures
import json
import os
import shlex
import shutil
import subprocess
import sys

SERVICES = ("tokenizer-svc", "engine-svc", "sampler-svc", "coordinator", "gateway/http", "gateway/nats")
# each service's executable, under its folder in the build tree
EXES = {"tokenizer-svc": "tokenizer-svc", "engine-svc": "engine-svc", "sampler-svc": "sampler-svc",
        "coordinator": "coordinator", "gateway/http": "lmpipe-http", "gateway/nats": "lmpipe-nats"}


def owner(path, roots):
    """The service folder path lies in (under the source or build tree), or None."""
    path = os.path.realpath(path)
    for root in roots:
        rel = os.path.relpath(path, root)
        if rel.startswith(".."):
            continue
        parts = rel.split(os.sep)
        for svc in SERVICES:
            n = svc.count("/") + 1
            if "/".join(parts[:n]) == svc:
                return svc
    return None


def entry_args(e):
    return list(e["arguments"]) if "arguments" in e else shlex.split(e["command"])


def deps_args(args):
    """The compile command turned into a dependency listing to stdout."""
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
            continue
        if a in ("-o", "-MF", "-MQ", "-MT"):
            skip = True
            continue
        if a in ("-MD", "-MMD", "-c"):
            continue
        out.append(a)
    # -MG: a header the flags cannot find is still listed, so a wrong include
    # is named rather than failing the listing
    return out + ["-MM", "-MG", "-fdiagnostics-color=never"]


def include_dirs(args, cwd):
    dirs, it = [], iter(args)
    for a in it:
        if a in ("-I", "-isystem", "-iquote", "-idirafter"):
            dirs.append(next(it, ""))
        elif a.startswith("-I"):
            dirs.append(a[2:])
        elif a.startswith("-isystem") or a.startswith("-iquote"):
            dirs.append(a[8:] if a.startswith("-isystem") else a[7:])
    return [os.path.join(cwd, d) for d in dirs if d]


def check_entry(e, roots):
    cwd = e.get("directory", ".")
    src = os.path.join(cwd, e["file"])
    mine = owner(src, roots)
    args = entry_args(e)
    errs = []
    name = os.path.relpath(os.path.realpath(src), roots[0])
    for d in include_dirs(args, cwd):
        o = owner(d, roots)
        if o and o != mine:
            errs.append(f"{name} ({mine}) is compiled with -I{os.path.realpath(d)}, "
                        f"{o}'s folder")
    r = subprocess.run(deps_args(args), cwd=cwd, capture_output=True, text=True)
    if r.returncode != 0:
        return errs + [f"{name}: the compiler could not list its headers:\n{r.stderr}"]
    text = r.stdout.replace("\\\n", " ")
    deps = text.split(":", 1)[1].split() if ":" in text else []
    for d in deps:
        o = owner(os.path.join(cwd, d), roots)
        if o and o != mine:
            hdr = os.path.relpath(os.path.realpath(os.path.join(cwd, d)), roots[0])
            errs.append(f"{name} ({mine}) includes {hdr}, a header of {o}")
    return errs


def ninja_prog():
    for n in ("ninja", "samu"):
        p = shutil.which(n)
        if p:
            return p
    return None


def link_inputs(ninja, build, target):
    r = subprocess.run([ninja, "-C", build, "-t", "query", target], capture_output=True,
                       text=True)
    if r.returncode != 0:
        return None
    ins, on = [], False
    for line in r.stdout.splitlines():
        s = line.strip()
        if s.startswith("input:"):
            on = True
            continue
        if s.startswith("outputs:"):
            on = False
        if on and s and s not in ("|", "||"):
            ins.append(s.lstrip("| "))
    return ins


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    build, source = (os.path.realpath(p) for p in sys.argv[1:3])
    roots = [source, build]
    with open(os.path.join(build, "compile_commands.json")) as f:
        entries = json.load(f)
    svc_entries = [e for e in entries
                   if e["file"].endswith(".c")
                   and owner(os.path.join(e.get("directory", "."), e["file"]), [source])]
    if not svc_entries:
        print("walls: no service C file in compile_commands.json", file=sys.stderr)
        return 1
    errs = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as ex:
        for r in ex.map(lambda e: check_entry(e, roots), svc_entries):
            errs += r

    ninja = ninja_prog()
    if not ninja:
        errs.append("ninja not found: cannot check what the services link")
    else:
        for svc in SERVICES:
            exe = f"{svc}/{EXES[svc]}"
            ins = link_inputs(ninja, build, exe)
            if ins is None:
                if svc == "gateway/nats":  # built only where libnats-dev is (-Dnats=auto)
                    continue
                errs.append(f"ninja does not know the target {exe}")
                continue
            for i in ins:
                o = owner(os.path.join(build, i), [build])
                if o and o != svc:
                    errs.append(f"{exe} links {i}, built in {o}'s folder")
        r = subprocess.run([ninja, "-C", build, "-t", "commands", "sampler-svc/sampler-svc"],
                           capture_output=True, text=True)
        lines = r.stdout.strip().splitlines()
        if r.returncode != 0 or not lines:
            errs.append("ninja cannot show sampler-svc's link command")
        elif "cudart" in lines[-1]:
            errs.append("sampler-svc links cudart")

    with open(os.path.join(build, "meson-info", "intro-targets.json")) as f:
        targets = json.load(f)
    seen = 0
    for t in targets:
        if not t["defined_in"].startswith(os.path.join(source, "sampler-svc") + os.sep):
            continue
        if t["name"] not in ("sampler-svc", "lp_sampler_svc", "lp_sampler"):
            continue
        seen += 1
        for ts in t["target_sources"]:
            for d in include_dirs(ts.get("parameters", []), build):
                o = owner(d, roots)
                if o and o != "sampler-svc":
                    errs.append(f"meson introspect: target {t['name']} has -I{d} ({o})")
    if seen != 3:
        errs.append(f"meson introspect: found {seen} of sampler-svc's 3 service targets")

    for e in errs:
        print("walls:", e, file=sys.stderr)
    print(f"walls: {len(svc_entries)} service compile commands checked, "
          f"{len(errs)} breaches")
    return 1 if errs else 0


if __name__ == "__main__":
    sys.exit(main())
