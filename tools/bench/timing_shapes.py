#!/usr/bin/env python3
"""tools/bench/timing_shapes.py -- where an evaluation's timing time goes, per benchmark shape.

    tools/bench/timing_shapes.py DIR|FILE.json...

Reads the result JSONs that tools/bench/bench_gpu_eval (or `kfarm-worker eval
--json`) wrote and prints, per evaluation, the judge's phases (setup,
validation, timing and the timing loop's prep/calls/checks) and, per
benchmark shape, what the loop did: calls per doorbell (batch), batches per
side, checked calls, why it stopped (precision, cap, budget), both medians
(µs per call), their CV and the relative standard error of each median.
Ends with the means per task. Nothing is timed here; it only reads.
"""
import glob, json, os, statistics, sys


def load(paths):
    out = []
    for p in paths:
        files = sorted(glob.glob(os.path.join(p, "**", "*.json"), recursive=True)) if os.path.isdir(p) else [p]
        for f in files:
            if os.path.basename(f) == "summary.json":
                continue
            try:
                with open(f) as fh:
                    r = json.load(fh)
            except (OSError, ValueError):
                continue
            if isinstance(r, dict) and isinstance(r.get("metrics"), dict):
                r["_file"] = os.path.basename(f)
                out.append(r)
    return out


def task_of(r):
    v = r.get("_variant") or {}
    t = v.get("task") or r.get("task") or "?"
    return os.path.basename(str(t).rstrip("/"))


def main():
    if len(sys.argv) < 2:
        print(__doc__.strip().split("\n")[2].strip(), file=sys.stderr)
        return 2
    rs = load(sys.argv[1:])
    per_task = {}
    for r in rs:
        m = r["metrics"]
        tj = m.get("timing") if isinstance(m.get("timing"), dict) else {}
        task = task_of(r)
        row = {k: m.get(k) or 0 for k in ("setup_s", "validation_s", "timing_s", "judge_s")}
        row.update({k: tj.get(k) or 0 for k in ("loop_prep_s", "loop_calls_s", "loop_checks_s")})
        row["wall"] = r.get("_wall_s") or 0
        per_task.setdefault(task, []).append(row)
        print("%s %-22s %-12s wall=%.2f setup=%.3f val=%.3f timing=%.3f (prep %.3f calls %.3f checks %.3f) ov=%.0fus" % (
            r["_file"], task, r.get("verdict"), row["wall"], row["setup_s"], row["validation_s"], row["timing_s"],
            row["loop_prep_s"], row["loop_calls_s"], row["loop_checks_s"], tj.get("overhead_us") or 0))
        for s in tj.get("shapes") or []:
            b, c = s.get("baseline") or {}, s.get("candidate") or {}
            print("    %-28s kb=%-4s n=%-4s chk=%-3s p=%.2f stop=%-9s base %9.2fus cv %.3f rse %.4f | cand %9.2fus cv %.3f rse %.4f" % (
                json.dumps(s.get("sizes"), separators=(",", ":"))[:28], s.get("batch"), s.get("batches"),
                s.get("checked_calls"), s.get("check_probability") or 0, s.get("stopped_by"),
                b.get("median_us") or 0, b.get("cv") or 0, b.get("rse_median") or 0,
                c.get("median_us") or 0, c.get("cv") or 0, c.get("rse_median") or 0))
    print()
    print("| task | evals | wall | setup | validation | timing | prep | calls | checks |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for task, rows in sorted(per_task.items()):
        mean = lambda k: statistics.mean(x[k] for x in rows)
        print("| %s | %d | %.2f | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f |" % (
            task, len(rows), mean("wall"), mean("setup_s"), mean("validation_s"), mean("timing_s"),
            mean("loop_prep_s"), mean("loop_calls_s"), mean("loop_checks_s")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
