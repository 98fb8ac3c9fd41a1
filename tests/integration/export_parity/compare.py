"""Compare an export's candidate files and chunks with the oracle's JSON.

compare.py SITE CID ORACLE_DIR: ORACLE_DIR holds cands.txt (the oracle's
first statement over all ids: "id|json" lines) and r<N>.json (its second
statement for chunk N). Numbers must agree within 1e-9 (relative), all else
exactly (key order aside). Prints one line per difference; exits 1 on any.
"""
import glob, json, math, os, re, sys

site, cid, odir = sys.argv[1], sys.argv[2], sys.argv[3]


def load_js(path):
    """The JSON of a data file: kfarmData("KEY", JSON.parse('...'));"""
    s = open(path, encoding="utf-8").read()
    m = re.match(r"kfarmData\(\"([^\"]+)\", JSON.parse\('(.*)'\)\);\n$", s, re.S)
    if not m:
        raise SystemExit("%s: not a data file" % path)
    unq = {"n": "\n", "r": "\r", "t": "\t", "'": "'", "\\": "\\"}
    body = re.sub(r"\\(.)", lambda x: unq.get(x.group(1), "\\" + x.group(1)), m.group(2), flags=re.S)
    return json.loads(body)


diffs = []


def same(a, b, path):
    if isinstance(a, bool) or isinstance(b, bool):
        ok = a is b
    elif isinstance(a, (int, float)) and isinstance(b, (int, float)):
        ok = math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    elif isinstance(a, dict) and isinstance(b, dict):
        if set(a) != set(b):
            diffs.append("%s: keys differ: %s" % (path, sorted(set(a) ^ set(b))))
            return
        for k in a:
            same(a[k], b[k], path + "." + k)
        return
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            diffs.append("%s: %d items, the oracle %d" % (path, len(a), len(b)))
            return
        for i, (x, y) in enumerate(zip(a, b)):
            same(x, y, "%s[%d]" % (path, i))
        return
    else:
        ok = a == b
    if not ok:
        diffs.append("%s: %r, the oracle %r" % (path, a, b))


oracle = {}
for line in open(os.path.join(odir, "cands.txt"), encoding="utf-8"):
    if line.strip():
        k, j = line.rstrip("\n").split("|", 1)
        oracle[k] = json.loads(j)
got = {}
for f in glob.glob(os.path.join(site, "data", "c%s" % cid, "b*.js")):
    for k, v in load_js(f).items():
        if int(k) // 128 != int(re.search(r"b(\d+)\.js$", f).group(1)):
            diffs.append("%s: candidate %s in the wrong bucket" % (f, k))
        got[k] = v
if set(got) != set(oracle):
    diffs.append("candidates: %d exported, the oracle %d" % (len(got), len(oracle)))
for k in sorted(set(got) & set(oracle), key=int):
    same(got[k], oracle[k], "candidate " + k)
chunks = sorted(glob.glob(os.path.join(odir, "r*.json")))
for f in chunks:
    n = os.path.basename(f)[1:-5]
    same(load_js(os.path.join(site, "data", "c%s" % cid, "r%s.js" % n)), json.load(open(f, encoding="utf-8")), "chunk " + n)
for d in diffs[:40]:
    print(d)
print("%d candidates, %d chunks compared, %d differences" % (len(oracle), len(chunks), len(diffs)))
sys.exit(1 if diffs or not oracle or not chunks else 0)
