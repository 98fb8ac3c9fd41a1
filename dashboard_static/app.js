/*
 * app.js -- the kernelfarm static dashboard (plain JS, no framework, no build).
 *
 * Data. `kfarm export` writes data files that are scripts calling
 * kfarmData(KEY, object) (coordinator/export.h): data/index.js (campaign
 * summaries, the fleet), data/c<ID>.js (one campaign: settings, counts,
 * bests, proposals, and the list of its chunks), data/c<ID>/r<N>.js (the
 * rows of candidates N*8192..N*8192+8191 and their results and attempts,
 * as arrays under columns), data/c<ID>/b<N>.js (candidates N*128..N*128+127 with their
 * sources, logs, metrics, prompts) and data/c<ID>/p<N>.js (proposals that
 * made no candidate, with their prompts and replies). load(KEY) inserts a <script> element and
 * resolves when the file has called kfarmData: this works from file://
 * (where fetch() of local files is refused) and from any static web server.
 * A page loads only what it shows. Served over http, the page re-reads
 * data/index.js every REFRESH_MS and, when the export is newer, reloads and
 * re-renders the current page, keeping each table's sort, search and page.
 *
 * Routing by location.hash (deep links):
 *   #                 campaign list
 *   #c/NAME           one campaign: attempts over time, best so far per
 *                     target, failures per round, tunables, leaderboard,
 *                     results, model proposals
 *   #c/NAME/ID        one candidate: results, timing per shape, profile,
 *                     verdict history, prompt and reply, source, diff to
 *                     its parent, compile logs
 *   #c/NAME/p/ID      a model proposal that made no candidate: why, prompt,
 *                     reply
 *   #fleet            the workers
 *
 * Libraries (vendor/, from npm through tools/dashboard-vendor): uPlot for
 * every plot, highlight.js for sources, jsdiff + diff2html for diffs.
 * Every text from the database reaches the page through textContent (el()
 * below); the only HTML inserted is what highlight.js and diff2html produce,
 * and both escape their input. Candidate sources, details, logs and prompts
 * are untrusted.
 */
(function () {
  "use strict";
  /* candidates per candidate file, proposals per proposal file: as
   * coordinator/export.c writes them (KF_EXPORT_BUCKET, KF_EXPORT_PROP_BUCKET) */
  var PAGE = 50, BUCKET = 128, PROP_BUCKET = 32;
  /* index.html?refresh=MS changes the refresh period over http (default 10 s) */
  var REFRESH_MS = Number(new URLSearchParams(location.search).get("refresh")) || 10000;
  var main = document.getElementById("main");
  var HTTP = /^https?:$/.test(location.protocol);
  var COLORS = { ok: "#16a34a", compile_error: "#dc2626", load_error: "#9f1239",
    runtime_error: "#f97316", timeout: "#eab308", incorrect: "#e11d48",
    rejected_cheat: "#7c3aed", unsupported: "#a3a3a3", infra_error: "#0891b2",
    queued: "#cbd5e1", leased: "#94a3b8" };
  var SERIES = ["#2563eb", "#16a34a", "#d97706", "#7c3aed", "#dc2626", "#0891b2", "#db2777"];

  /* ---- data loading ---- */
  var cache = {}, waiting = {}; /* waiting[key]: {script, list of {resolve, reject}} */
  window.kfarmData = function (key, data) {
    cache[key] = data;
    var w = waiting[key];
    delete waiting[key];
    if (w) w.list.forEach(function (p) { p.resolve(data); });
  };
  /* load(key[, fresh]) -> Promise of the object in data/KEY.js. */
  function load(key, fresh) {
    if (cache[key] && !fresh) return Promise.resolve(cache[key]);
    return new Promise(function (resolve, reject) {
      if (waiting[key]) { waiting[key].list.push({ resolve: resolve, reject: reject }); return; }
      var s = document.createElement("script"), w = { script: s, list: [{ resolve: resolve, reject: reject }] };
      waiting[key] = w;
      s.src = "data/" + key + ".js" + (HTTP ? "?t=" + Date.now() : "");
      function fail(msg) {
        /* only this script's waiters: a later load of the same key has its own */
        if (waiting[key] !== w) return;
        delete waiting[key];
        w.list.forEach(function (p) { p.reject(new Error(msg)); });
      }
      s.onload = function () { s.remove(); fail("data/" + key + ".js did not call kfarmData"); };
      s.onerror = function () {
        s.remove();
        fail("cannot load data/" + key + ".js (run `kfarm export --out DIR` and open DIR/index.html)");
      };
      document.head.appendChild(s);
    });
  }

  /* loadLib(path) -> Promise: a vendored library, loaded once, when a page
   * first needs it (the campaign pages need only uPlot). */
  var libs = {};
  function loadLib(path) {
    return libs[path] || (libs[path] = new Promise(function (resolve, reject) {
      var s = document.createElement("script");
      s.src = path;
      s.onload = resolve;
      s.onerror = function () { delete libs[path]; reject(new Error("cannot load " + path)); };
      document.head.appendChild(s);
    }));
  }
  var CANDIDATE_LIBS = ["vendor/highlight.min.js", "vendor/diff.min.js", "vendor/diff2html.min.js"];

  /* ---- small DOM helpers ---- */
  /* el("tag", {attr}, child...) -- children: strings become text nodes. */
  function el(tag, attrs) {
    var e = document.createElement(tag);
    if (attrs) for (var k in attrs) {
      if (attrs[k] === undefined || attrs[k] === null) continue;
      if (k === "class") e.className = attrs[k];
      else if (k === "text") e.textContent = attrs[k];
      else if (k.slice(0, 2) === "on") e[k] = attrs[k];
      else e.setAttribute(k, attrs[k]);
    }
    for (var i = 2; i < arguments.length; i++) add(e, arguments[i]);
    return e;
  }
  function add(e, c) {
    if (c === null || c === undefined || c === false) return;
    if (Array.isArray(c)) { c.forEach(function (x) { add(e, x); }); return; }
    e.appendChild(typeof c === "object" ? c : document.createTextNode(String(c)));
  }
  function nz(x) { return x !== null && x !== undefined && x === x; }
  function fmt(x, p) { return nz(x) ? Number(x).toFixed(p) : "-"; }
  function speed(x) { return nz(x) ? Number(x).toFixed(3) + "x" : "-"; }
  function pct(x) { return nz(x) ? (100 * x).toFixed(1) + "%" : "-"; }
  function when(t) { return t ? String(t).replace("T", " ").replace(/\..*$/, "").replace(/\+00(:00)?$/, "") : "-"; }
  function whenEpoch(s) { return nz(s) ? new Date(s * 1000).toISOString().replace("T", " ").replace(/\..*$/, "") : "-"; }
  function defs(d) {
    var k = Object.keys(d || {});
    return k.length ? k.map(function (n) { return n + "=" + d[n]; }).join(" ") : "-";
  }
  function verdict(v) { return el("span", { "class": "v v-" + (v || "queued"), text: v || "queued" }); }
  function link(href, text) { return el("a", { href: href, text: text }); }
  function enc(s) { return encodeURIComponent(s); }
  function sum(o) { var s = 0; for (var k in (o || {})) s += o[k]; return s; }
  function card(label, value, id) {
    return el("div", { "class": "card" }, el("div", { "class": "muted", text: label }),
      el("div", { "class": "big", "data-k": id, text: value }));
  }
  function section(title, id) { return el("h2", { id: id, text: title }); }
  function muted(t) { return el("p", { "class": "muted", text: t }); }
  function pre(text, cls) { return el("pre", { "class": cls, text: text }); }
  function conf(v) {
    if (!nz(v)) return "-";
    if (v === true) return "confirmed";
    if (v === false) return "unconfirmed";
    return typeof v === "object" ? (v.state || JSON.stringify(v)) : String(v);
  }

  /* ---- tables: sortable, searchable, paged ----
   * cols: [{name, get(row) -> sort value, find(row) -> search text (default
   * get), show(row) -> node|text (default get), num, wide}]. Only the rows of
   * the page shown become DOM. State per table id survives re-renders. */
  var tableState = {};
  function dataTable(id, cols, rows, opts) {
    opts = opts || {};
    var st = tableState[id] || (tableState[id] = { sort: opts.sort === undefined ? -1 : opts.sort,
      desc: !!opts.desc, q: "", page: 0, filters: {} });
    var wrap = el("div", { "class": "dt", id: id });
    var search = el("input", { type: "search", placeholder: "search…", value: st.q, "aria-label": "search " + id });
    var info = el("span", { "class": "muted dt-info" });
    var pager = el("span", { "class": "dt-pager" });
    var tbl = el("table"), thead = el("thead"), tbody = el("tbody");
    var filters = (opts.filters || []).map(function (f) {
      var s = el("select", { "aria-label": f.name });
      ["all"].concat(f.values).forEach(function (v) { s.appendChild(el("option", { value: v, text: v })); });
      s.value = st.filters[f.name] || "all";
      s.onchange = function () { st.filters[f.name] = s.value; st.page = 0; refresh(); };
      return el("label", null, f.name + " ", s);
    });
    wrap.appendChild(el("div", { "class": "dt-bar" }, search, filters, info, pager));
    var htr = el("tr");
    cols.forEach(function (c, i) {
      var th = el("th", { "class": (c.num ? "num " : "") + "sortable", title: "sort by " + c.name, text: c.name });
      th.onclick = function () {
        if (st.sort === i) st.desc = !st.desc; else { st.sort = i; st.desc = !!c.num; }
        st.page = 0; refresh();
      };
      htr.appendChild(th);
    });
    thead.appendChild(htr);
    tbl.appendChild(thead); tbl.appendChild(tbody);
    wrap.appendChild(el("div", { "class": "dt-scroll" }, tbl));
    var text = null, view = rows;
    function rowText(r) {
      return cols.map(function (c) { var v = (c.find || c.get)(r); return nz(v) ? String(v) : ""; }).join("\u0001").toLowerCase();
    }
    function refresh() {
      view = rows;
      (opts.filters || []).forEach(function (f) {
        var want = st.filters[f.name];
        if (want && want !== "all") view = view.filter(function (r) { return String(f.get(r)) === want; });
      });
      if (st.q) {
        if (!text) { text = new Map(); rows.forEach(function (r) { text.set(r, rowText(r)); }); }
        var q = st.q.toLowerCase();
        view = view.filter(function (r) { return text.get(r).indexOf(q) >= 0; });
      }
      if (st.sort >= 0 && cols[st.sort]) {
        var g = cols[st.sort].get, d = st.desc ? -1 : 1;
        var keyed = view.map(function (r, i) { return [g(r), i, r]; });
        keyed.sort(function (a, b) {
          var x = a[0], y = b[0], nx = !nz(x) || x === "", ny = !nz(y) || y === "";
          if (nx || ny) return nx === ny ? a[1] - b[1] : nx ? 1 : -1; /* blanks last */
          if (x < y) return -d;
          if (x > y) return d;
          return a[1] - b[1];
        });
        view = keyed.map(function (k) { return k[2]; });
      }
      var pages = Math.max(1, Math.ceil(view.length / PAGE));
      if (st.page >= pages) st.page = pages - 1;
      Array.prototype.forEach.call(htr.children, function (th, i) {
        th.setAttribute("aria-sort", i === st.sort ? (st.desc ? "descending" : "ascending") : "none");
      });
      tbody.textContent = "";
      view.slice(st.page * PAGE, st.page * PAGE + PAGE).forEach(function (r) {
        var tr = el("tr");
        cols.forEach(function (c) {
          var td = el("td", { "class": (c.num ? "num" : "") + (c.wide ? " detail" : "") });
          var v = c.show ? c.show(r) : c.get(r);
          add(td, nz(v) ? v : "-");
          if (c.wide && typeof v === "string") td.title = v;
          tr.appendChild(td);
        });
        tbody.appendChild(tr);
      });
      info.textContent = view.length + (view.length === rows.length ? "" : " of " + rows.length) + " rows";
      pager.textContent = "";
      var prev = el("button", { type: "button", text: "\u2039 prev", onclick: function () { st.page--; refresh(); } });
      var next = el("button", { type: "button", text: "next \u203a", onclick: function () { st.page++; refresh(); } });
      prev.disabled = st.page <= 0; next.disabled = st.page >= pages - 1;
      add(pager, [prev, " page " + (st.page + 1) + " of " + pages + " ", next]);
    }
    var timer = null;
    search.oninput = function () {
      clearTimeout(timer);
      timer = setTimeout(function () { st.q = search.value; st.page = 0; refresh(); }, 150);
    };
    refresh();
    return wrap;
  }

  /* ---- plots (uPlot) ---- */
  function plotWidth() { return Math.max(480, Math.min(main.clientWidth - 40, 1300)); }
  function plot(opts, data) {
    var box = el("div", { "class": "plot" });
    opts.width = opts.width || plotWidth();
    opts.height = opts.height || 280;
    /* uPlot measures its container: build it once the box is in the page */
    requestAnimationFrame(function () { if (box.isConnected) new uPlot(opts, data, box); });
    return box;
  }
  var timeAxis = { values: function (u, ticks) { return ticks.map(function (t) { return whenEpoch(t).slice(5, 16); }); } };

  /* ---- campaign tables: one array per column -> row objects ---- */
  var NONE = [];
  function cols(T, names) { /* the column arrays (an empty one when absent) */
    var o = {};
    names.forEach(function (n) { o[n] = (T && Array.isArray(T[n])) ? T[n] : NONE; });
    return o;
  }
  /* Campaign file and its chunks -> model used by the pages (computed once
   * per file). C.parts: the chunk files (data/c<ID>/r<N>.js), each with the
   * rows of its candidates and its own lists of details, workers and
   * define sets; an older export had the rows in C itself. Row objects are
   * built with fixed keys in a fixed order (one shape each). */
  function model(C) {
    if (C._m) return C._m;
    var vn = C.verdict_names || [], sn = C.state_names || [], tg = C.targets || [], t0 = C.t0 || 0;
    function name(list, x) { return typeof x === "number" ? list[x] : x; }
    function at(a, i) { return i < a.length ? a[i] : null; }
    var cands = [], byId = new Map(), res = [], evs = [], i;
    (C.parts || [C]).forEach(function (P) {
      var det = P.details || [], wn = P.worker_names || [], dn = P.define_sets || [];
      var K = cols(P.cands, ["id", "parent", "proposer", "defines", "t", "round", "proposal"]);
      for (i = 0; i < K.id.length; i++) {
        var k = { id: K.id[i], parent: at(K.parent, i), proposer: at(K.proposer, i), defines: name(dn, at(K.defines, i)),
          t: at(K.t, i), round: at(K.round, i), proposal: at(K.proposal, i), results: [] };
        cands.push(k);
        byId.set(k.id, k);
      }
      var R = cols(P.res, ["k", "target", "state", "verdict", "speedup", "cand_us", "base_us", "cv", "lo", "hi", "noisy",
        "tries", "worker", "t", "detail", "conf"]);
      for (i = 0; i < R.k.length; i++) {
        var t = at(R.t, i), d = at(R.detail, i), kk = R.k[i];
        var r = { k: kk, cand: byId.get(kk), target: tg[at(R.target, i)], state: name(sn, at(R.state, i)),
          verdict: name(vn, at(R.verdict, i)), speedup: at(R.speedup, i), cand_us: at(R.cand_us, i),
          base_us: at(R.base_us, i), cv: at(R.cv, i), lo: at(R.lo, i), hi: at(R.hi, i),
          noisy: at(R.noisy, i), tries: at(R.tries, i), worker: name(wn, at(R.worker, i)),
          tabs: t !== null ? t0 + t : null, detail: d !== null ? det[d] : null, conf: at(R.conf, i) };
        res.push(r);
        if (r.cand) r.cand.results.push(r);
      }
      var E = cols(P.evs, ["t", "k", "target", "verdict", "speedup", "worker", "detail"]);
      for (i = 0; i < E.t.length; i++)
        evs.push({ tabs: t0 + E.t[i], k: at(E.k, i), target: tg[at(E.target, i)], verdict: name(vn, at(E.verdict, i)),
          speedup: at(E.speedup, i), worker: at(E.worker, i), detail: at(E.detail, i) });
    });
    var Q = cols(C.props, ["id", "round", "state", "model", "tokens_in", "tokens_out", "finish", "candidate", "latency_s", "reason"]);
    var props = new Array(Q.id.length);
    for (i = 0; i < props.length; i++)
      props[i] = { id: Q.id[i], round: at(Q.round, i), state: at(Q.state, i), model: at(Q.model, i),
        tokens_in: at(Q.tokens_in, i), tokens_out: at(Q.tokens_out, i), finish: at(Q.finish, i),
        candidate: at(Q.candidate, i), latency_s: at(Q.latency_s, i), reason: at(Q.reason, i) };
    var hasConf = res.some(function (r) { return nz(r.conf); });
    C._m = { cands: cands, byId: byId, res: res, evs: evs, props: props, hasConf: hasConf };
    return C._m;
  }

  /* ---- campaign list ---- */
  function bestText(best) {
    return (best || []).map(function (b) { return speed(b.speedup) + " " + b.target; }).join(", ") || "-";
  }
  function verdictBar(counts) {
    var total = sum(counts), bar = el("div", { "class": "bar" });
    Object.keys(counts || {}).sort().forEach(function (v) {
      var s = el("span", { title: v + ": " + counts[v] });
      s.style.width = (100 * counts[v] / total) + "%";
      s.style.background = COLORS[v] || "#888";
      bar.appendChild(s);
    });
    return total ? bar : null;
  }
  function verdictList(counts) {
    return Object.keys(counts || {}).sort(function (a, b) { return counts[b] - counts[a]; })
      .map(function (v) { return el("span", { "class": "vl" }, verdict(v), " " + counts[v]); });
  }
  function viewList(I) {
    var cs = I.campaigns || [];
    if (!cs.length) return [el("h1", { text: "Campaigns" }), muted("No campaigns yet.")];
    return [el("h1", { text: "Campaigns" }), dataTable("campaigns", [
      { name: "campaign", get: function (c) { return c.name; }, show: function (c) { return link("#c/" + enc(c.name), c.name); } },
      { name: "task", get: function (c) { return c.task; } },
      { name: "strategy", get: function (c) { return c.strategy; } },
      { name: "state", get: function (c) { return c.state; } },
      { name: "targets", get: function (c) { return (c.targets || []).join(", "); } },
      { name: "candidates", num: true, get: function (c) { return c.candidates; } },
      { name: "jobs done", num: true, get: function (c) { return (c.jobs || {}).done || 0; },
        show: function (c) { return ((c.jobs || {}).done || 0) + " / " + sum(c.jobs); } },
      { name: "best", num: true, get: function (c) { return Math.max.apply(null, (c.best || []).map(function (b) { return b.speedup; }).concat([-1])); },
        show: function (c) { return bestText(c.best); } },
      { name: "verdicts", get: function (c) { return sum(c.verdicts); },
        show: function (c) { return el("div", null, verdictBar(c.verdicts), el("div", { "class": "small" }, verdictList(c.verdicts))); } },
      { name: "created", get: function (c) { return c.created_at; }, show: function (c) { return when(c.created_at); } }
    ], cs)];
  }

  /* ---- one campaign ---- */
  function scatterPlot(C, M) {
    /* every attempt: ok ones at their speedup, failures in one lane per verdict below zero */
    var pts = [];
    M.res.forEach(function (r) { if (r.verdict && nz(r.tabs)) pts.push([r.tabs, r.verdict, r.speedup]); });
    M.evs.forEach(function (e) { pts.push([e.tabs, e.verdict, e.speedup]); });
    if (!pts.length) return muted("No attempt finished yet.");
    pts.sort(function (a, b) { return a[0] - b[0]; });
    var verdicts = [], seen = {};
    pts.forEach(function (p) { if (!seen[p[1]]) { seen[p[1]] = 1; verdicts.push(p[1]); } });
    verdicts.sort(function (a, b) { return a === "ok" ? -1 : b === "ok" ? 1 : a < b ? -1 : 1; });
    var fails = verdicts.filter(function (v) { return v !== "ok"; });
    var ymax = 1;
    pts.forEach(function (p) { if (p[1] === "ok" && nz(p[2]) && p[2] > ymax) ymax = p[2]; });
    var lane = ymax / 12, laneY = {};
    fails.forEach(function (v, i) { laneY[v] = -lane * (i + 1); });
    var n = pts.length, xs = new Float64Array(n), cols = verdicts.map(function () { return new Array(n).fill(null); });
    pts.forEach(function (p, i) {
      xs[i] = p[0];
      var vi = verdicts.indexOf(p[1]);
      /* spread a lane's points vertically a little so that dense runs show their density */
      cols[vi][i] = p[1] === "ok" ? (nz(p[2]) ? p[2] : 0) : laneY[p[1]] + lane * 0.35 * (((i * 7919) % 100) / 100 - 0.5);
    });
    var counts = {};
    pts.forEach(function (p) { counts[p[1]] = (counts[p[1]] || 0) + 1; });
    var series = [{}].concat(verdicts.map(function (v) {
      return { label: v + " (" + counts[v] + ")", stroke: COLORS[v] || "#888", fill: COLORS[v] || "#888",
        paths: function () { return null; }, points: { show: true, size: 3, width: 0, fill: COLORS[v] || "#888" } };
    }));
    return plot({ title: "Every attempt over time (" + n + "), ok at its speedup, failures in lanes by verdict",
      scales: { x: { time: false } }, series: series, legend: { live: false },
      cursor: { drag: { x: true, y: true } },
      axes: [timeAxis, { label: "speedup / verdict", size: 110,
        splits: function (u, ax, min, max) {
          var s = fails.map(function (v) { return laneY[v]; }), step = ymax > 4 ? 1 : 0.5;
          for (var y = 0; y <= max; y += step) s.push(y);
          return s;
        },
        values: function (u, ticks) {
          return ticks.map(function (t) {
            if (t >= 0) return t.toFixed(1) + "x";
            for (var v in laneY) if (Math.abs(laneY[v] - t) < lane / 2) return v;
            return "";
          });
        } }] }, [xs].concat(cols));
  }
  function bestSoFarPlot(C, M) {
    var ok = M.res.filter(function (r) { return r.verdict === "ok" && nz(r.speedup) && nz(r.tabs); })
      .sort(function (a, b) { return a.tabs - b.tabs; });
    if (!ok.length) return muted("No passing candidate yet.");
    var targets = C.targets, best = targets.map(function () { return null; });
    var xs = [], cols = targets.map(function () { return []; });
    ok.forEach(function (r) {
      var ti = targets.indexOf(r.target);
      if (best[ti] !== null && r.speedup <= best[ti]) return;
      best[ti] = r.speedup;
      xs.push(r.tabs);
      targets.forEach(function (t, j) { cols[j].push(best[j]); });
    });
    var end = Math.max(ok[ok.length - 1].tabs, C.finished_at ? Date.parse(C.finished_at) / 1000 : 0);
    if (end > xs[xs.length - 1]) { xs.push(end); targets.forEach(function (t, j) { cols[j].push(best[j]); }); }
    return plot({ title: "Best so far per target", height: 240, scales: { x: { time: false } },
      series: [{}].concat(targets.map(function (t, j) {
        return { label: t, stroke: SERIES[j % SERIES.length], width: 2, paths: uPlot.paths.stepped({ align: 1 }),
          value: function (u, v) { return speed(v); } };
      })),
      axes: [timeAxis, { label: "speedup", values: function (u, t) { return t.map(function (x) { return x.toFixed(2) + "x"; }); } }]
    }, [xs].concat(cols));
  }
  /* Failure rate per round: the LLM's rounds when most candidates come from
   * one; otherwise batches of candidates in creation order. */
  var reasons = new Map();
  function reasonOf(v, d) { /* "verdict: first line of the detail", memoized (details repeat) */
    var key = v + "\u0001" + (d || ""), r = reasons.get(key);
    if (r === undefined) { r = v + (d ? ": " + d.split("\n")[0].slice(0, 80) : ""); reasons.set(key, r); }
    return r;
  }
  function roundsOf(C, M) {
    var withRound = M.cands.filter(function (k) { return nz(k.round); }).length;
    var byRound = new Map(), useRound = withRound > 0 && withRound * 2 >= M.cands.length;
    var batch = Math.max(1, Math.ceil(M.cands.length / 40 / 10) * 10);
    M.cands.forEach(function (k, i) {
      var r = useRound ? (nz(k.round) ? k.round : -1) : Math.floor(i / batch);
      var g = byRound.get(r);
      if (!g) byRound.set(r, g = { round: r, attempts: 0, failed: 0, reasons: {} });
      k.results.forEach(function (x) {
        if (!x.verdict) return;
        g.attempts++;
        if (x.verdict !== "ok") {
          g.failed++;
          var why = reasonOf(x.verdict, x.detail);
          g.reasons[why] = (g.reasons[why] || 0) + 1;
        }
      });
    });
    var rounds = Array.from(byRound.values()).filter(function (g) { return g.attempts; })
      .sort(function (a, b) { return a.round - b.round; });
    return { rounds: rounds, label: useRound ? "round" : "batch of " + batch };
  }
  function failurePanel(C, M) {
    var R = roundsOf(C, M), rounds = R.rounds;
    if (!rounds.length) return [muted("No attempt finished yet.")];
    var xs = rounds.map(function (g, i) { return i; });
    var p = plot({ title: "Failure rate per " + R.label, height: 200, scales: { x: { time: false }, y: { range: [0, 100] } },
      series: [{ value: function (u, i) { return nz(i) && rounds[i] ? String(rounds[i].round) : "-"; } },
        { label: "failed %", stroke: "#dc2626", fill: "rgba(220,38,38,.15)", width: 2,
          value: function (u, v) { return fmt(v, 1) + "%"; } }],
      axes: [{ values: function (u, t) { return t.map(function (i) { return rounds[i] ? String(rounds[i].round) : ""; }); } },
        { values: function (u, t) { return t.map(function (x) { return x + "%"; }); } }]
    }, [xs, rounds.map(function (g) { return 100 * g.failed / g.attempts; })]);
    var tbl = dataTable("rounds", [
      { name: R.label, num: true, get: function (g) { return g.round; } },
      { name: "results", num: true, get: function (g) { return g.attempts; } },
      { name: "failed", num: true, get: function (g) { return g.failed; } },
      { name: "failure rate", num: true, get: function (g) { return g.failed / g.attempts; }, show: function (g) { return pct(g.failed / g.attempts); } },
      { name: "top reasons", wide: true, get: function (g) {
        return Object.keys(g.reasons).sort(function (a, b) { return g.reasons[b] - g.reasons[a]; }).slice(0, 3)
          .map(function (k) { return g.reasons[k] + "\u00d7 " + k; }).join("; ");
      } }
    ], rounds, { sort: 0 });
    return [p, tbl];
  }
  function tunablesPanel(C, M) {
    var keys = {};
    M.cands.forEach(function (k) { for (var n in (k.defines || {})) keys[n] = 1; });
    var names = Object.keys(keys).sort();
    if (!names.length) return [muted("No tunables: the candidates define nothing.")];
    var out = [];
    C.targets.forEach(function (tg, ti) {
      names.forEach(function (n) {
        var byVal = {}, numeric = true, xs = [], ys = [];
        M.res.forEach(function (r) {
          if (r.target !== tg || !r.cand || !r.verdict) return;
          var v = (r.cand.defines || {})[n];
          if (v === undefined) return;
          var g = byVal[v] || (byVal[v] = { value: v, n: 0, ok: 0, sp: [] });
          g.n++;
          if (r.verdict === "ok" && nz(r.speedup)) { g.ok++; g.sp.push(r.speedup); }
          if (isNaN(Number(v))) numeric = false;
        });
        var vals = Object.keys(byVal).map(function (v) { return byVal[v]; });
        if (!vals.length) return;
        vals.forEach(function (g) { g.sp.sort(function (a, b) { return a - b; }); });
        var box = el("div", { "class": "tunable" }, el("h3", { text: n + " on " + tg }));
        if (numeric) {
          vals.sort(function (a, b) { return Number(a.value) - Number(b.value); });
          var pts = [];
          vals.forEach(function (g) { g.sp.forEach(function (s) { pts.push([Number(g.value), s]); }); });
          if (pts.length) {
            var x = pts.map(function (p) { return p[0]; }), y = pts.map(function (p) { return p[1]; });
            var med = vals.map(function (g) { return [Number(g.value), g.sp.length ? g.sp[g.sp.length >> 1] : null]; });
            /* aligned data: x = every distinct value; one series of all points per value is not
               expressible, so the scatter uses one x per point and the median a second series */
            var xs = x.concat(med.map(function (m) { return m[0]; }));
            var order = xs.map(function (v, i) { return i; }).sort(function (a, b) { return xs[a] - xs[b]; });
            var sx = order.map(function (i) { return xs[i]; });
            var sp = order.map(function (i) { return i < x.length ? y[i] : null; });
            var sm = order.map(function (i) { return i >= x.length ? med[i - x.length][1] : null; });
            add(box, plot({ width: Math.min(420, plotWidth()), height: 200, scales: { x: { time: false } },
              series: [{ label: n }, { label: "ok result", stroke: SERIES[ti % SERIES.length], paths: function () { return null; },
                points: { show: true, size: 3, width: 0, fill: SERIES[ti % SERIES.length] } },
                { label: "median", stroke: "#111827", width: 2, spanGaps: true }],
              axes: [{ label: n }, { label: "speedup", values: function (u, t) { return t.map(function (v) { return v.toFixed(1) + "x"; }); } }],
              legend: { live: false } }, [sx, sp, sm]));
          }
        }
        add(box, dataTable("tun-" + tg + "-" + n, [
          { name: n, num: numeric, get: function (g) { return numeric ? Number(g.value) : g.value; } },
          { name: "results", num: true, get: function (g) { return g.n; } },
          { name: "ok", num: true, get: function (g) { return g.ok; } },
          { name: "median speedup", num: true, get: function (g) { return g.sp.length ? g.sp[g.sp.length >> 1] : null; }, show: function (g) { return g.sp.length ? speed(g.sp[g.sp.length >> 1]) : "-"; } },
          { name: "best", num: true, get: function (g) { return g.sp.length ? g.sp[g.sp.length - 1] : null; }, show: function (g) { return g.sp.length ? speed(g.sp[g.sp.length - 1]) : "-"; } }
        ], vals, { sort: 0 }));
        out.push(box);
      });
    });
    return [el("div", { "class": "tunables" }, out)];
  }
  function resultCols(C, M, withCand) {
    var cn = enc(C.name), cols = [];
    if (withCand) cols.push(
      { name: "candidate", num: true, get: function (r) { return r.k; }, find: function (r) { return "#" + r.k; },
        show: function (r) { return link("#c/" + cn + "/" + r.k, "#" + r.k); } },
      { name: "parent", num: true, get: function (r) { return r.cand ? r.cand.parent : null; },
        find: function (r) { return r.cand && r.cand.parent ? "#" + r.cand.parent : ""; },
        show: function (r) { return r.cand && r.cand.parent ? link("#c/" + cn + "/" + r.cand.parent, "#" + r.cand.parent) : "-"; } },
      { name: "proposer", get: function (r) { return r.cand ? r.cand.proposer : null; } },
      { name: "defines", get: function (r) { return r.cand ? defs(r.cand.defines) : null; } });
    cols.push(
      { name: "target", get: function (r) { return r.target; } },
      { name: "verdict", get: function (r) { return r.verdict || r.state; }, show: function (r) { return verdict(r.verdict || r.state); } },
      { name: "speedup", num: true, get: function (r) { return r.speedup; }, show: function (r) { return speed(r.speedup); } },
      { name: "cand \u00b5s", num: true, get: function (r) { return r.cand_us; }, show: function (r) { return fmt(r.cand_us, 2); } },
      { name: "base \u00b5s", num: true, get: function (r) { return r.base_us; }, show: function (r) { return fmt(r.base_us, 2); } },
      { name: "CV", num: true, get: function (r) { return r.cv; }, show: function (r) { return nz(r.cv) ? pct(r.cv) + (r.noisy ? " noisy" : "") : "-"; } },
      { name: "interval (shapes)", num: true, get: function (r) { return r.lo; },
        show: function (r) { return nz(r.lo) ? fmt(r.lo, 2) + "\u2013" + fmt(r.hi, 2) + "x" : "-"; } });
    if (M.hasConf) cols.push({ name: "confirmation", get: function (r) { return conf(r.conf); } });
    cols.push(
      { name: "tries", num: true, get: function (r) { return r.tries; } },
      { name: "worker", get: function (r) { return r.worker; } },
      { name: "detail", wide: true, get: function (r) { return r.detail; } });
    return cols;
  }
  function viewCampaign(C) {
    var M = model(C), cn = enc(C.name), jobs = C.jobs || {};
    var att = sum(C.attempts), failed = att - ((C.attempts || {}).ok || 0);
    var out = [el("h1", null, link("#", "Campaigns"), " / ", C.name)];
    out.push(el("div", { "class": "cards" },
      card("state", C.state, "state"), card("task", C.task, "task"),
      card("strategy / targets", C.strategy + " / " + (C.targets || []).join(", "), "strategy"),
      card("candidates", String(M.cands.length), "candidates"),
      card("jobs done", (jobs.done || 0) + " / " + sum(jobs), "jobs"),
      card("attempts (failed)", att + " (" + pct(att ? failed / att : null) + ")", "attempts"),
      (C.best || []).map(function (b) { return card("best on " + b.target, speed(b.speedup) + " #" + b.candidate_id, "best-" + b.target); })));
    if (C.task_definition) out.push(muted(C.task_definition));
    /* why the campaign is not progressing (coordinator/health.c) */
    if (C.pause_reason) out.push(el("p", { "class": "error", text: "Paused: " + C.pause_reason }));
    if ((C.blockers || []).length) {
      out.push(el("div", { "class": "blockers" }, el("strong", { text: C.state === "done" ? "Warnings" : "Blocked" }),
        el("ul", null, C.blockers.map(function (b) { return el("li", { text: "[" + b.kind + "] " + b.text }); }))));
    }
    /* per-target bests with their noise and confirmation (coordinator/bests.c): what kfarm best names */
    var bests = C.bests || { targets: [], not_everywhere: [] };
    var brows = (bests.targets || []).filter(function (t) { return t.best; }).map(function (t) {
      var b = t.best;
      return [t.target, link("#c/" + cn + "/" + b.candidate, "#" + b.candidate), speed(b.speedup),
        nz(b.lo) ? fmt(b.lo, 2) + "\u2013" + fmt(b.hi, 2) + "x" : "-", nz(b.cv) ? pct(b.cv) : "-",
        String((t.ties || []).length), b.worker || "-",
        b.confirmation === "confirmed" ? "yes, by " + (b.confirmed_by || "?") : "not yet (" + (b.confirmation || "none") + ")"];
    });
    if (brows.length) {
      out.push(el("h2", { id: "s-bests", text: "Best per target (95% interval, ties, confirmation)" }),
        simpleTable(["target", "candidate", "speedup", "95% interval", "CV", "ties", "worker", "confirmed"], brows));
      if (bests.overall) out.push(el("p", null, "Best on every target: ", link("#c/" + cn + "/" + bests.overall.candidate,
        "#" + bests.overall.candidate), " " + speed(bests.overall.speedup) + " (geometric mean, " +
        fmt(bests.overall.lo, 2) + "\u2013" + fmt(bests.overall.hi, 2) + "x" + (bests.overall.confirmed ? ", confirmed" : ", not confirmed yet") + ")"));
      (bests.not_everywhere || []).forEach(function (n) {
        out.push(muted("Candidate #" + n.candidate + " is fastest on " + n.fast_on + " (" + speed(n.speedup) +
          ") but not ok on " + n.not_ok.map(function (x) { return x.target + " (" + x.verdict + ")"; }).join(", ")));
      });
    }
    out.push(el("nav", { "class": "toc" }, ["attempts", "best", "failures", "tunables", "leaderboard", "results", "proposals"].map(function (s) {
      return el("a", { href: "javascript:void 0", text: s, onclick: function () { var t = document.getElementById("s-" + s); if (t) t.scrollIntoView(); } });
    })));
    out.push(section("Every attempt", "s-attempts"), scatterPlot(C, M));
    out.push(el("p", null, "Final verdicts: ", verdictList(C.verdicts)));
    out.push(section("Best so far", "s-best"), bestSoFarPlot(C, M));
    out.push(section("Failures per round", "s-failures"), failurePanel(C, M));
    out.push(section("Tunables: speedup against each value", "s-tunables"), tunablesPanel(C, M));
    var ok = M.res.filter(function (r) { return r.verdict === "ok" && nz(r.speedup); });
    out.push(section("Leaderboard (ok results, per target)", "s-leaderboard"));
    var lbCols = resultCols(C, M, true).filter(function (c) { return c.name !== "verdict" && c.name !== "detail"; });
    if (M.hasConf) { /* confirmed results first, then by speedup */
      lbCols.unshift({ name: "rank", num: true, get: function (r) { return (conf(r.conf) === "confirmed" ? 0 : 1e6) - r.speedup; }, show: function () { return ""; } });
    }
    out.push(ok.length ? dataTable("leaderboard", lbCols, ok, { sort: M.hasConf ? 0 : lbCols.findIndex(function (c) { return c.name === "speedup"; }),
      desc: !M.hasConf, filters: [{ name: "target", values: C.targets, get: function (r) { return r.target; } }] })
      : muted("No passing candidate yet."));
    out.push(section("All results (" + M.res.length + ")", "s-results"));
    var verdictsSeen = Object.keys(C.verdicts || {}).concat(Object.keys(jobs).filter(function (s) { return s !== "done"; }));
    out.push(dataTable("results", resultCols(C, M, true), M.res, {
      filters: [{ name: "verdict", values: verdictsSeen, get: function (r) { return r.verdict || r.state; } },
        { name: "target", values: C.targets, get: function (r) { return r.target; } }] }));
    if (M.props.length) {
      var tin = 0, tout = 0;
      M.props.forEach(function (p) { tin += p.tokens_in || 0; tout += p.tokens_out || 0; });
      out.push(section("Model proposals (" + M.props.length + ")", "s-proposals"),
        muted(tin + " prompt + " + tout + " completion tokens"),
        dataTable("proposals", [
          { name: "id", num: true, get: function (p) { return p.id; }, find: function (p) { return "#" + p.id; },
            show: function (p) { return p.candidate ? "#" + p.id : link("#c/" + cn + "/p/" + p.id, "#" + p.id); } },
          { name: "round", num: true, get: function (p) { return p.round; } },
          { name: "state", get: function (p) { return p.state; } },
          { name: "model", get: function (p) { return p.model; } },
          { name: "tokens in/out", num: true, get: function (p) { return p.tokens_in; }, show: function (p) { return (p.tokens_in || 0) + "/" + (p.tokens_out || 0); } },
          { name: "finish", get: function (p) { return p.finish; } },
          { name: "latency s", num: true, get: function (p) { return p.latency_s; }, show: function (p) { return fmt(p.latency_s, 1); } },
          { name: "candidate", num: true, get: function (p) { return p.candidate; }, show: function (p) { return p.candidate ? link("#c/" + cn + "/" + p.candidate, "#" + p.candidate) : "-"; } },
          { name: "reason", wide: true, get: function (p) { return p.reason; } }
        ], M.props, { filters: [{ name: "state", values: Array.from(new Set(M.props.map(function (p) { return p.state; }))), get: function (p) { return p.state; } }] }));
    } else out.push(el("div", { id: "s-proposals" }));
    return out;
  }

  /* ---- one candidate ---- */
  function bucketKey(C, id) { return "c" + C.id + "/b" + Math.floor(id / BUCKET); }
  function sourceView(src) {
    var code = el("code", { "class": "hljs language-cpp" });
    try { code.innerHTML = hljs.highlight(src, { language: "cpp", ignoreIllegals: true }).value; } /* escaped by highlight.js */
    catch (e) { code.textContent = src; }
    var n = src.split("\n").length, nums = [];
    for (var i = 1; i <= n; i++) nums.push(i);
    return el("div", { "class": "src" }, el("pre", { "class": "ln", "aria-hidden": "true", text: nums.join("\n") }), el("pre", { "class": "code" }, code));
  }
  function diffView(a, b, an, bn) {
    var patch = Diff.createTwoFilesPatch("source", "source", a, b, an, bn, { context: 3 });
    var box = el("div", { "class": "diff" });
    box.innerHTML = Diff2Html.html(patch, { drawFileList: false, outputFormat: "line-by-line", matching: "lines" }); /* escaped by diff2html */
    return box;
  }
  function timingTable(m) {
    var shapes = ((m || {}).timing || {}).shapes;
    if (!Array.isArray(shapes) || !shapes.length) return null;
    var rows = shapes.map(function (s) {
      var c = s.candidate || {}, b = s.baseline || {};
      return [JSON.stringify(s.sizes || {}), String(s.calls || "-"), fmt(b.median_us, 2), fmt(c.median_us, 2), fmt(c.min_us, 2),
        nz(c.min_us) && nz(c.median_us) ? fmt(c.median_us - c.min_us, 2) : "-", pct(c.cv), pct(b.cv), speed(s.speedup),
        fmt(s.gbs, 1), fmt(s.gflops, 1), fmt(s.floor_us, 2),
        nz(s.floor_us) && nz(c.median_us) && c.median_us > 0 ? pct(s.floor_us / c.median_us) : "-",
        [s.noisy ? "noisy" : "", s.at_floor ? "at floor" : ""].join(" ").trim() || "-"];
    });
    return simpleTable(["shape", "calls", "base med \u00b5s", "cand med \u00b5s", "cand min \u00b5s", "spread \u00b5s",
      "cand CV", "base CV", "speedup", "GB/s", "GFLOP/s", "roofline floor \u00b5s", "of roofline", "flags"], rows,
      [0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0]);
  }
  function simpleTable(headers, rows, numeric) {
    var t = el("table"), tr = el("tr");
    headers.forEach(function (h, i) { tr.appendChild(el("th", { "class": numeric && numeric[i] ? "num" : "", text: h })); });
    t.appendChild(el("thead", null, tr));
    var tb = el("tbody");
    rows.forEach(function (r) {
      var row = el("tr");
      r.forEach(function (c, i) { row.appendChild(el("td", { "class": numeric && numeric[i] ? "num" : "" }, c)); });
      tb.appendChild(row);
    });
    t.appendChild(tb);
    return el("div", { "class": "dt-scroll" }, t);
  }
  function profileView(m) {
    var out = [], comp = (m || {}).compile || {};
    var ptx = [];
    ["candidate", "baseline"].forEach(function (who) {
      ((comp[who] || {}).ptxas || []).forEach(function (f) {
        ptx.push([who, f.name || "-", String(f.registers), String(f.smem_bytes), String(f.stack_bytes === undefined ? "-" : f.stack_bytes),
          (f.spill_stores || 0) + " / " + (f.spill_loads || 0)]);
      });
    });
    if (ptx.length) out.push(el("h4", { text: "Kernels (ptxas)" }),
      simpleTable(["build", "kernel", "registers", "shared mem B", "stack B", "spill st/ld"], ptx, [0, 0, 1, 1, 1, 1]));
    var dev = (m || {}).device;
    if (dev) out.push(el("p", { "class": "muted", text: "device: " + (dev.name || "") + (dev.arch ? " " + dev.arch : "") +
      (dev.peak_gbs ? ", peak " + dev.peak_gbs + " GB/s" : "") + (dev.peak_gflops ? ", " + dev.peak_gflops + " GFLOP/s" : "") }));
    var rest = {};
    ["bound", "roofline", "profile", "kernels"].forEach(function (k) { if (m && m[k] !== undefined) rest[k] = m[k]; });
    if (Object.keys(rest).length) out.push(pre(JSON.stringify(rest, null, 2)));
    return out;
  }
  /* Up to 12 ancestors of candidate d, nearest first, from their buckets:
   * -> Promise of {list, more} (more: the 12th has a parent too). */
  function ancestors(C, d, fresh) {
    var list = [];
    function step(x) {
      if (!x.parent_id) return { list: list, more: false };
      if (list.length >= 12) return { list: list, more: true };
      return load(bucketKey(C, x.parent_id), fresh).then(function (B) {
        var p = B[x.parent_id];
        if (!p) return { list: list, more: false };
        list.push(p);
        return step(p);
      }, function () { return { list: list, more: false }; });
    }
    return Promise.resolve(step(d));
  }
  /* C: the campaign's summary from the index (id, name); B: the bucket of
   * candidate id; L: its ancestors (ancestors()). The page needs neither the
   * campaign file nor any candidate but these. */
  function viewCandidate(C, id, B, L) {
    var cn = enc(C.name), d = (B || {})[id];
    var out = [el("h1", null, link("#", "Campaigns"), " / ", link("#c/" + cn, C.name), " / #" + id)];
    if (!d) { out.push(el("p", { "class": "error", text: "No candidate #" + id + " in campaign " + C.name + "." })); return out; }
    out.push(el("p", null, "proposer ", el("b", { text: d.proposer }), ", defines ", el("code", { text: defs(d.defines) }),
      ", created " + when(d.created_at), ", sha256 ", el("code", { text: String(d.sha256).slice(0, 12) })));
    var chain = L.list.slice().reverse().concat([d]);
    out.push(el("p", { "class": "lineage" }, "lineage: ", L.more ? "\u2026 " : null,
      chain.map(function (x, i) {
        return [i || L.more ? " \u2192 " : "", x.id === id ? "#" + x.id : link("#c/" + cn + "/" + x.id, "#" + x.id)];
      })));
    if ((d.children || []).length) out.push(el("p", null, "children: ", d.children.map(function (x) { return [link("#c/" + cn + "/" + x, "#" + x), " "]; })));
    if (d.note) out.push(muted(d.note));

    out.push(section("Results", "s-results"));
    if (!(d.results || []).length) out.push(muted("Not evaluated (no jobs)."));
    (d.results || []).forEach(function (r) {
      var evs = r.evaluations || [], fin = evs.filter(function (e) { return e.final; })[0];
      out.push(el("h3", null, r.target + (r.purpose === "verify" ? " (verification of a best)" : "") + " ",
        verdict(fin ? fin.verdict : r.state)));
      if (fin) out.push(el("p", { "class": "res-line", "data-target": r.target }, "speedup " + speed(fin.speedup) + ", candidate " + fmt(fin.candidate_us, 2) +
        " \u00b5s, baseline " + fmt(fin.baseline_us, 2) + " \u00b5s, worker " + (fin.worker || "-") + ", attempts " + r.attempts +
        (nz(r.conf) || nz(fin.conf) ? ", confirmation " + conf(nz(fin.conf) ? fin.conf : r.conf) +
          (fin.conf_by ? " by " + fin.conf_by : "") : "")));
      if (fin && fin.detail) out.push(pre(fin.detail, "detail"));
      var tt = fin ? timingTable(fin.metrics) : null;
      if (tt) out.push(el("h4", { text: "Timing per shape" }), tt);
      if (fin && fin.metrics) {
        out.push(profileView(fin.metrics));
        out.push(el("details", null, el("summary", { text: "all metrics (JSON)" }), pre(JSON.stringify(fin.metrics, null, 2))));
      }
      out.push(el("h4", { text: "Verdict history" }), simpleTable(["attempt", "time", "worker", "verdict", "speedup", "final", "detail"],
        evs.map(function (e) {
          return [String(e.attempt), when(e.t), e.worker || "-", verdict(e.verdict), speed(e.speedup), e.final ? "final" : (e.reported ? "retried" : "lease lost"), e.detail || ""];
        }), [1, 0, 0, 0, 1, 0, 0]));
      evs.forEach(function (e) {
        if (e.compile_log) out.push(el("details", null, el("summary", { text: "compile log (attempt " + e.attempt + ")" }), pre(e.compile_log, "log")));
      });
    });

    var prop = d.proposal;
    if (prop) {
      out.push(section("Model proposal #" + prop.id, "s-proposal"));
      out.push(el("p", null, (prop.model || "-") + ", round " + prop.round + ", temperature " + fmt(prop.temperature, 2) +
        ", tokens " + (prop.prompt_tokens || 0) + " in / " + (prop.completion_tokens || 0) + " out, finish " +
        (prop.finish_reason || "-") + ", " + fmt(prop.latency_s, 1) + " s" + (prop.reviewer_note ? ", review: " + prop.reviewer_note : "")));
      out.push(el("details", { "class": "prompt" }, el("summary", { text: "prompt" }), pre(prop.prompt || "")));
      out.push(el("details", { "class": "reply" }, el("summary", { text: "reply" }), pre(prop.reply || "")));
    }
    out.push(section("Source", "s-source"), sourceView(d.source || ""));
    if (d.parent_id) {
      var pd = L.list[0];
      out.push(section("Diff to parent #" + d.parent_id, "s-diff"));
      if (!pd) out.push(muted("Parent #" + d.parent_id + " is not in this export."));
      else if (pd.source === d.source) out.push(muted("Same source; defines differ: " + defs(pd.defines) + " \u2192 " + defs(d.defines)));
      else out.push(diffView(pd.source || "", d.source || "", "#" + d.parent_id, "#" + id));
    }
    return out;
  }

  /* ---- a model proposal that made no candidate ---- */
  function viewProposal(C, id, p) {
    var cn = enc(C.name);
    var out = [el("h1", null, link("#", "Campaigns"), " / ", link("#c/" + cn, C.name), " / proposal #" + id)];
    if (!p) { out.push(el("p", { "class": "error", text: "No proposal #" + id + " without a candidate in campaign " + C.name + "." })); return out; }
    out.push(el("p", null, "state ", el("b", { text: p.state }), ", " + (p.model || "-") + ", round " + p.round +
      ", temperature " + fmt(p.temperature, 2) + ", tokens " + (p.prompt_tokens || 0) + " in / " + (p.completion_tokens || 0) +
      " out, finish " + (p.finish_reason || "-") + ", HTTP " + (p.http_status || "-") + ", " + p.attempts + " attempts, " +
      fmt(p.latency_s, 1) + " s", p.parent_id ? [", parent ", link("#c/" + cn + "/" + p.parent_id, "#" + p.parent_id)] : null));
    if (p.reason) out.push(el("p", null, "why no candidate: ", el("span", { "class": "reason", text: p.reason })));
    if (p.reviewer_note) out.push(muted("review: " + p.reviewer_note));
    out.push(section("Prompt", "s-prompt"), pre(p.prompt || "", "prompt"));
    out.push(section("Reply", "s-reply"), pre(p.reply || "", "reply"));
    if (p.code) out.push(section("Extracted code", "s-code"), pre(p.code, "code"));
    return out;
  }

  /* ---- fleet ---- */
  function workerState(w) {
    if (w.quarantined) return "quarantined";
    if (w.offline === true || w.offline === false) return w.offline ? "offline" : "online"; /* the coordinator's rule */
    return w.seen_s_ago < 120 ? "online" : "offline";
  }
  function viewFleet(I) {
    var ws = I.workers || [];
    var n = { online: 0, offline: 0, quarantined: 0 }, classes = {}, models = {};
    ws.forEach(function (w) {
      n[workerState(w)]++;
      (w.classes || []).forEach(function (c) { classes[c] = classes[c] || { online: 0, all: 0 }; classes[c].all++; if (workerState(w) === "online") classes[c].online++; });
      (w.devices || []).forEach(function (d) { var m = d.name || "?"; models[m] = (models[m] || 0) + 1; });
    });
    return [el("h1", { text: "Fleet" }),
      el("div", { "class": "cards" }, card("online", String(n.online), "online"), card("offline", String(n.offline), "offline"),
        card("quarantined", String(n.quarantined), "quarantined")),
      el("p", { "class": "muted" }, "Routing classes: ", Object.keys(classes).sort().map(function (c) {
        return el("span", { "class": "vl", text: c + " " + classes[c].online + "/" + classes[c].all + " online" });
      })),
      muted("Device models: " + (Object.keys(models).map(function (m) { return m + " \u00d7" + models[m]; }).join(", ") || "none")),
      ws.length ? dataTable("workers", [
        { name: "worker", get: function (w) { return w.id; } },
        { name: "host", get: function (w) { return w.hostname; } },
        { name: "state", get: function (w) { return workerState(w); },
          show: function (w) { var s = workerState(w); return el("span", { "class": "ws ws-" + s, text: s + (w.quarantined && w.quarantine_reason ? ": " + w.quarantine_reason : "") }); } },
        { name: "classes", get: function (w) { return (w.classes || []).join(", "); } },
        { name: "devices", get: function (w) { return (w.devices || []).map(function (d) { return d.name || d.arch || "?"; }).join(", "); } },
        { name: "backend", get: function (w) { return w.backend; } },
        { name: "last seen", get: function (w) { return w.last_seen; }, show: function (w) { return when(w.last_seen); } },
        { name: "evaluations", num: true, get: function (w) { return w.evaluations; } },
        { name: "last hour", num: true, get: function (w) { return w.last_hour; } },
        { name: "ok", num: true, get: function (w) { return w.evaluations ? w.ok / w.evaluations : null; }, show: function (w) { return w.evaluations ? pct(w.ok / w.evaluations) : "-"; } },
        { name: "failed", num: true, get: function (w) { return w.evaluations ? 1 - w.ok / w.evaluations : null; }, show: function (w) { return w.evaluations ? pct(1 - w.ok / w.evaluations) : "-"; } },
        { name: "infra errors", num: true, get: function (w) { return w.infra; }, show: function (w) { return w.infra + " (" + w.infra_errors + " in a row)"; } },
        { name: "verifications", num: true, get: function (w) { return (w.disputes || 0) - (w.agreements || 0); },
          show: function (w) {
            return (w.agreements || 0) + " agreed / " + (w.disputes || 0) + " disputed" +
              (w.disputed_by && Object.keys(w.disputed_by).length ? " (by " + Object.keys(w.disputed_by).sort().map(function (k) {
                return k + " \u00d7" + w.disputed_by[k]; }).join(", ") + ")" : "");
          } },
        { name: "leased", num: true, get: function (w) { return w.leased; } },
        { name: "driver / toolkit", get: function (w) { return (w.driver_version || "-") + " / " + (w.toolkit_version || "-"); } }
      ], ws, { sort: 0 }) : muted("No workers registered.")];
  }

  /* ---- routing ---- */
  var lastIndex = null, renderSeq = 0;
  function campaignByName(I, name) {
    for (var i = 0; i < (I.campaigns || []).length; i++) if (I.campaigns[i].name === name) return I.campaigns[i];
    return null;
  }
  function parts() {
    return location.hash.replace(/^#/, "").split("/").map(function (x) {
      try { return decodeURIComponent(x); } catch (e) { return x; }
    });
  }
  /* Render the page for the current hash; fresh: re-read its data files. */
  function route(fresh) {
    var seq = ++renderSeq, P = parts(), hash = location.hash;
    var t0 = performance.now();
    return load("index", fresh).then(function (I) {
      lastIndex = I;
      document.getElementById("generated").textContent = "data from " + when(I.generated_at) + (HTTP ? " (refreshes)" : "");
      if (P[0] === "fleet" || P[0] === "workers") return viewFleet(I);
      if (P[0] === "c" && P.length >= 2) {
        var c = campaignByName(I, P[1]);
        if (!c) return [el("p", { "class": "error", text: "No campaign " + P[1] + "." })];
        if (P[2] === "p" && P.length >= 4) {
          var pid = Number(P[3]);
          return load("c" + c.id + "/p" + Math.floor(pid / PROP_BUCKET), fresh).then(function (B) {
            return viewProposal(c, pid, B[pid]);
          }, function () { return viewProposal(c, pid, null); });
        }
        if (P.length >= 3 && P[2] !== "") {
          var id = Number(P[2]), missing = [el("h1", null, link("#", "Campaigns"), " / ", link("#c/" + enc(c.name), c.name)),
            el("p", { "class": "error", text: "No candidate #" + P[2] + " in campaign " + c.name + "." })];
          /* outside the campaign's ids there is no bucket to ask for */
          if (!Number.isInteger(id) || !(id >= c.first_id && id <= c.last_id)) return missing;
          return Promise.all([load(bucketKey(c, id), fresh)].concat(CANDIDATE_LIBS.map(loadLib))).then(function (bs) {
            if (!bs[0][id]) return missing;
            return ancestors(c, bs[0][id], fresh).then(function (L) { return viewCandidate(c, id, bs[0], L); });
          }, function () { return missing; });
        }
        return load("c" + c.id, fresh).then(function (C) {
          /* the campaign's tables come in chunks of candidate ids (export.c) */
          return Promise.all((C.chunks || []).map(function (n) { return load("c" + c.id + "/r" + n, fresh); }))
            .then(function (parts) { if (C.chunks) C.parts = parts; return C; });
        }).then(function (C) {
          var t1 = performance.now();
          model(C);
          window.kfarmTiming = { load_ms: t1 - t0, model_ms: performance.now() - t1 };
          return viewCampaign(C);
        });
      }
      return viewList(I);
    }).then(function (view) {
      if (seq !== renderSeq) return; /* a newer navigation won */
      var y = window.scrollY;
      main.textContent = "";
      add(main, view);
      main.setAttribute("data-route", hash);
      main.setAttribute("data-ready", String(seq));
      window.kfarmRenderMs = performance.now() - t0;
      window.kfarmReadyAt = performance.now(); /* ms since the navigation began */
      if (fresh) window.scrollTo(0, y); else window.scrollTo(0, 0);
    }).catch(function (e) {
      if (seq !== renderSeq) return;
      main.textContent = "";
      add(main, el("p", { "class": "error", text: String(e.message || e) }));
      main.setAttribute("data-route", hash);
      main.setAttribute("data-ready", String(seq));
    });
  }
  window.addEventListener("hashchange", function () { route(false); });
  route(false);
  if (HTTP) setInterval(function () {
    var before = lastIndex && lastIndex.generated_at;
    load("index", true).then(function (I) {
      if (I.generated_at === before) return;
      for (var k in cache) if (k !== "index") delete cache[k];
      route(true);
    }).catch(function () { /* the export is being rewritten: next time */ });
  }, REFRESH_MS);
})();
