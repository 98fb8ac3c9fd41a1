#!/usr/bin/env python3
"""run_cases_served.py -- every field case through ONE serving judge.

A serving judge (worker/judge.c, kf_judge_serve) keeps its device context
and the task's reference and baseline runners alive from one evaluation to
the next; only the candidate's runner is new. That is only sound if nothing
a hostile candidate does can reach the next evaluation. So this test runs
every case of tests/cases (its first seed) through a single
`kfarm-worker eval --each -` process, and after each one evaluates the
task's known-good candidate on the same warm runners:

  - the case must get the verdict run_cases.sh expects of it (cases.py);
  - the good candidate right after it must be ok, within its own case's
    speedup bounds (an attack that poisoned the warm reference or baseline,
    or left the judge in a bad state, shows up here);
  - the task runners must really have been reused (metrics.setup.
    warm_task_runners) after every case whose judge kept them (metrics.
    task_runners_kept: it ended on the candidate, with the task's runners
    owing no answer), never kept after a failure blamed on the task or the
    worker, and reused at least once, or the test would prove nothing about
    the serving path;
  - the worker process must survive to the end and no kfcase-daemon
    (I10) may be left.

Cases that need their own environment ("env", "secrets") or a broken task
("task_dir_valid": false) are left to run_cases.sh.

Env: KFARM_BIN (build dir with kfarm-worker), KFARM_SRC (repo root),
CASES="a b" (a subset), CASES_DIR (default tests/cases; tests/cases_cuda on
a GPU: its cases with an "arch" of their own are left to tools/gpu-check,
and its per-case checks beyond cases.py -- mincand_us, baseline_like,
candidate_like -- are not applied here).
"""
import json, os, subprocess, sys, tempfile, time

SRC = os.environ.get("KFARM_SRC") or os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("KFARM_BIN") or os.path.join(SRC, "build")
sys.path.insert(0, os.path.join(SRC, "tests", "cases"))
import cases  # noqa: E402

# The known-good candidate of each task (a case folder whose verdict is "ok").
GOOD = {"tests/tasks/softmax_rows_f32": "good", "tests/tasks/axpy_f32": "good_axpy", "tests/cases_cuda/task": "good"}


def main():
    worker = os.path.join(BIN, "kfarm-worker")
    if not os.access(worker, os.X_OK):
        print("run_cases_served: %s not found (set KFARM_BIN)" % worker)
        return 2
    only = set((os.environ.get("CASES") or "").split())
    cdir = os.path.join(SRC, os.environ.get("CASES_DIR") or "tests/cases")
    no_process = {"kfcase-daemon"}
    plan = []  # (label, case.json path, line, is_follow_up)
    for name in sorted(os.listdir(cdir)):
        cj = os.path.join(cdir, name, "case.json")
        if not os.path.isfile(cj) or (only and name not in only):
            continue
        c = cases.load(cj)
        if c.get("env") or c.get("secrets") or c.get("task_dir_valid") is False or c.get("arch"):
            continue
        if c.get("no_process"):
            no_process.add(c["no_process"])
        src = os.path.join(SRC, c["candidate"]) if c.get("candidate") else os.path.join(cdir, name, "candidate.c")
        if not os.path.exists(src):
            src = src[:-2] + ".cu"
        defs = ["%s=%s" % kv for kv in sorted((c.get("defines") or {}).items())]
        for seed in (c.get("seeds") or [7])[:1]:  # every seed runs in run_cases.sh
            opts = ["--seed=%d" % int(seed)]
            if c.get("timeout") is not None:
                opts.append("--timeout=%s" % c["timeout"])
            label = name
            plan.append((label, cj, " ".join([os.path.join(SRC, c["task"]), src] + defs + opts), False))
            good = GOOD.get(c["task"])
            if good and good != name:
                gj = os.path.join(cdir, good, "case.json")
                gsrc = os.path.join(cdir, good, "candidate.c")
                if not os.path.exists(gsrc):
                    gsrc = gsrc[:-2] + ".cu"
                plan.append(("%s>%s" % (label, good), gj,
                             "%s %s --seed=%d" % (os.path.join(SRC, c["task"]), gsrc, int(seed) + 1), True))
    if not plan:
        print("run_cases_served: no cases")
        return 2
    tmp = tempfile.mkdtemp(prefix="kfarm-served.")
    ticks0 = int(float(open("/proc/uptime").read().split()[0]) * os.sysconf("SC_CLK_TCK"))
    args = [worker, "eval", "--each", "-", "--quick", "--json", "--work-dir", os.path.join(tmp, "work"),
            "--cache-dir", os.path.join(tmp, "cache")]
    os.makedirs(os.path.join(tmp, "work"))
    t0 = time.time()
    p = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=open(os.path.join(tmp, "err"), "w"),
                         text=True)
    p.stdin.write("".join(line + "\n" for _, _, line, _ in plan))
    p.stdin.close()
    fail, passed, reused, prestarted, prev_warmable, why_not = [], 0, 0, 0, False, {}
    for label, cj, line, follow in plan:
        t = time.time()
        out = p.stdout.readline()
        if not out:
            fail.append(label)
            print("FAIL %s: kfarm-worker ended before answering (exit %s); stderr: %s" % (
                label, p.wait(), open(os.path.join(tmp, "err")).read()[-400:]))
            break
        path = os.path.join(tmp, "r.json")
        with open(path, "w") as f:
            f.write(out)
        err = os.path.join(tmp, "empty.err")
        open(err, "w").close()
        if cases.judge(cj, path, err, 0, label, "%.1f" % (time.time() - t)) != 0:
            fail.append(label)
        else:
            passed += 1
        try:
            d = json.loads(out)
        except ValueError:
            d = {}
        setup = (d.get("metrics") or {}).get("setup") or {}
        if follow and prev_warmable and d.get("verdict") != "usage":
            # the case ended on its candidate: the task's runners must have served this one
            if setup.get("warm_task_runners") is True:
                reused += 1
                prestarted += setup.get("candidate_prestarted") is True
                if setup.get("candidate_not_prestarted"):
                    why_not[setup["candidate_not_prestarted"]] = why_not.get(setup["candidate_not_prestarted"], 0) + 1
            else:
                fail.append(label + ":not_reused")
                print("FAIL %s: the task's runners were not reused after a case that ended on the candidate "
                      "(setup: %s)" % (label, json.dumps(setup)))
        m = d.get("metrics") or {}
        # the judge kept the task's runners (it ended on the candidate, with the task's runners
        # owing no answer) and ran with the timing arena (a static rejection's validation-only
        # run has a smaller one, which the next evaluation does not match)
        if m.get("task_runners_kept") is True and m.get("blame") not in ("candidate", "none"):
            fail.append(label + ":kept_after_blame")
            print("FAIL %s: the judge kept the task's runners after an evaluation blamed on %s" % (label, m.get("blame")))
        prev_warmable = m.get("task_runners_kept") is True and "forbidden" not in m
    rc = p.wait()
    if rc != 0:
        fail.append("exit")
        print("FAIL kfarm-worker eval --each exited %d: %s" % (rc, open(os.path.join(tmp, "err")).read()[-400:]))
    time.sleep(0.5)
    left = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            st = open("/proc/%s/stat" % pid).read()
        except OSError:
            continue
        comm = st[st.index("(") + 1:st.rindex(")")]
        fields = st[st.rindex(")") + 2:].split()
        if comm in no_process and fields[0] not in "ZX" and int(fields[19]) + 1 >= ticks0:
            left.append(pid)
    if left:
        fail.append("procs_left")
        print("FAIL procs_left: %s outlived its evaluation (pids %s)" % ("/".join(sorted(no_process)), " ".join(left)))
        for pid in left:
            try:
                os.kill(int(pid), 9)
            except OSError:
                pass
    if reused and not prestarted:
        fail.append("never_prestarted")
        print("FAIL never_prestarted: no candidate ran in a runner started after the last report (why: %s)" %
              json.dumps(why_not))
    if reused == 0:
        fail.append("never_reused")
        print("FAIL never_reused: no evaluation ran on warm task runners: the serving path was not exercised")
    subprocess.run(["rm", "-rf", tmp])
    print("run_cases_served: %d evaluations in %.0f s, %d on reused task runners after a hostile case (%d of them "
          "in a candidate runner started in advance)" % (len(plan), time.time() - t0, reused, prestarted))
    if fail:
        print("failed: " + " ".join(fail))
    print("%d passed, %d failed" % (passed, len(fail)))
    return 1 if fail else 0


if __name__ == "__main__":
    sys.exit(main())
