"""tests/cases/cases.py -- the case logic shared by run_cases.sh and
run_cases_served.sh (the fields of case.json are described in run_cases.sh).

    cases.py spec CASE_JSON        shell assignments for the runner
    cases.py judge CASE_JSON OUT ERR RC LABEL SECS [SECRETS_FILE]
                                   one ok/FAIL line; exit status 0 on pass
"""
import json, re, shlex, sys

VERDICTS = ["ok", "incorrect", "compile_error", "load_error", "runtime_error", "timeout",
            "rejected_cheat", "infra_error", "unsupported"]

def load(path):
    c = json.load(open(path))
    if not isinstance(c, dict) or not isinstance(c.get("task"), str):
        raise SystemExit("%s: needs a \"task\"" % path)
    return c

def cpu_flags():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()

def expected(c):
    want = c.get("verdict", "ok")
    lacks = c.get("verdict_if_cpu_lacks") or {}
    if lacks:
        flags = cpu_flags()
        for flag, v in sorted(lacks.items()):
            if flag not in flags:
                want = v
                break
    if want == "any":
        return list(VERDICTS)
    return [want] if isinstance(want, str) else list(want)

def spec(path):
    c = load(path)
    to = c.get("timeout")
    seeds = c.get("seeds") or [7]
    out = {
        "task": c["task"],
        "cand": c.get("candidate", ""),
        "to": "" if to is None else str(to),
        "outer": str(int(min(300, 3 * float(to) + 60)) if to is not None else 300),
        "seeds": " ".join(str(int(s)) for s in seeds),
        "secrets": "1" if c.get("secrets") else "",
        "task_invalid": "1" if c.get("task_dir_valid") is False else "",
    }
    for k, v in out.items():
        print("%s=%s" % (k, shlex.quote(v)))
    envs = ["%s=%s" % (k, v) for k, v in (c.get("env") or {}).items()]
    defs = ["%s=%s" % (k, v) for k, v in (c.get("defines") or {}).items()]
    print("envs=(%s)" % " ".join(shlex.quote(e) for e in envs))
    print("defs=(%s)" % " ".join(shlex.quote(d) for d in defs))

def judge(path, out, err, rc, label, secs, secrets_file=None):
    c = load(path)
    rc = int(rc)
    stdout = open(out, errors="replace").read()
    stderr = open(err, errors="replace").read()
    problems, summary = [], ""
    if c.get("task_dir_valid") is False:
        sub = c.get("detail_contains", "")
        lines = [l for l in stderr.splitlines()]
        if rc != 2:
            problems.append("exit status %d, expected 2 (the task must be refused)" % rc)
        if stdout.strip():
            problems.append("printed a verdict for a broken task: %s" % stdout.strip()[:160].replace("\n", " "))
        if len(lines) != 1:
            problems.append("%d lines on stderr, expected exactly one" % len(lines))
        if sub and sub not in stderr:
            problems.append("stderr lacks \"%s\"" % sub)
        summary = "exit %d, stderr: %s" % (rc, stderr.strip()[:160])
    else:
        want = expected(c)
        if rc != 0:
            problems.append("kfarm-worker exited %d (it must survive every candidate): %s"
                            % (rc, " | ".join(stderr.strip().splitlines()[-3:])[:300]))
        else:
            try:
                d = json.loads(stdout)
            except ValueError as e:
                d = None
                problems.append("stdout is not one JSON object (%s)" % e)
            if d is not None:
                got, detail = d.get("verdict"), d.get("detail") or ""
                sp = d.get("speedup") or 0
                summary = "%s%s -- %s" % (got, " %.2fx" % sp if got == "ok" and sp else "", detail)
                if got not in want:
                    problems.append("verdict %s, expected %s" % (got, " or ".join(want)))
                sub = c.get("detail_contains")
                if sub and sub not in detail:
                    problems.append("detail lacks \"%s\"" % sub)
                if got == "ok" and "speedup_max" in c and sp > float(c["speedup_max"]):
                    problems.append("speedup %.2f > speedup_max %s (an attack's speedup)" % (sp, c["speedup_max"]))
                if got == "ok" and "speedup_min" in c and sp < float(c["speedup_min"]):
                    problems.append("speedup %.2f < speedup_min %s" % (sp, c["speedup_min"]))
                if problems:
                    problems.append("detail: %s%s" % (detail[:300], " [speedup %.2fx]" % sp if sp else ""))
    both = stdout + "\n" + stderr
    for s in c.get("forbid_output") or []:
        if s in both:
            problems.append("output holds the forbidden marker \"%s\"" % s)
    if secrets_file:
        low = both.lower()
        for line in open(secrets_file).read().splitlines():
            what, sec = line.split(" ", 1)
            for form, how in ((sec, "raw"), (sec.encode().hex(), "hex-encoded")):
                if form.lower() in low:
                    problems.append("SECRET LEAKED: the %s (%s) appears in the output" % (what, how))
    # A speed bound missed while the judge flagged the timing noisy (a
    # shape's cv > 0.10: a loaded machine) proves nothing either way: the
    # honest path of i1_copy_from_maps_timing timed 0.28-1.40x against the
    # baseline (2.28x on one shape) with no copy made. Exit 3: run_cases.sh
    # runs it again.
    # (A forbidden marker or a leaked secret is a problem of its own: never
    # run again.)
    speed_only = problems and all(p.startswith(("speedup ", "detail:")) for p in problems)
    if speed_only:
        try:
            flags = ((json.loads(stdout).get("metrics") or {}).get("timing") or {}).get("flags") or []
        except (ValueError, AttributeError):
            flags = []
        if "noisy" in flags:
            print("noisy %s: %s, timing flagged noisy: running again (%ss)" % (label, problems[0], secs))
            return 3
    if problems:
        print("FAIL %s: %s (%ss)" % (label, problems[0], secs))
        for p in problems[1:]:
            print("    " + p)
        if summary and not any(p.startswith("detail:") for p in problems):
            print("    got: " + summary[:300])
        return 1
    print(("ok   %s: %s (%ss)" % (label, summary, secs))[:220])
    return 0

if __name__ == "__main__":
    if sys.argv[1] == "spec":
        spec(sys.argv[2])
    else:
        sys.exit(judge(*sys.argv[2:]))
