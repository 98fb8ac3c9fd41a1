/*
 * app.js -- the kernelfarm static dashboard (plain JS, no framework).
 *
 * Data: window.KFARM_DATA, written by `kfarm export` into data.js (a script,
 * so the page works from file:// where fetch() of local files is refused).
 * Routing by location.hash:
 *   #                       campaign list
 *   #c/NAME                 one campaign: summary, verdicts, best per target,
 *                           best-so-far over time, leaderboard, candidates,
 *                           model proposals (tokens, failures and why)
 *   #c/NAME/ID              one candidate: results per target, attempts,
 *                           lineage, the model's prompt and reply, source,
 *                           diff to its parent, logs
 *   #workers                the fleet
 * Every text from the database goes into the page through textContent (el()
 * below), never innerHTML: candidate sources and worker details are
 * untrusted.
 */
(function () {
  "use strict";
  var D = window.KFARM_DATA || { campaigns: [], workers: [] };
  var main = document.getElementById("main");
  var COLORS = { ok: "#16a34a", compile_error: "#dc2626", load_error: "#b91c1c",
    runtime_error: "#ef4444", timeout: "#f97316", incorrect: "#e11d48",
    rejected_cheat: "#7c3aed", unsupported: "#a3a3a3", infra_error: "#d97706",
    queued: "#cbd5e1", leased: "#94a3b8" };
  var SERIES = ["#2563eb", "#16a34a", "#d97706", "#7c3aed", "#dc2626", "#0891b2", "#db2777"];

  /* el("tag", {attr}, child...) -- children: strings become text nodes. */
  function el(tag, attrs) {
    var e = document.createElement(tag);
    if (attrs) for (var k in attrs) {
      if (k === "class") e.className = attrs[k];
      else if (k === "text") e.textContent = attrs[k];
      else e.setAttribute(k, attrs[k]);
    }
    for (var i = 2; i < arguments.length; i++) add(e, arguments[i]);
    return e;
  }
  function add(e, c) {
    if (c === null || c === undefined) return;
    if (Array.isArray(c)) { c.forEach(function (x) { add(e, x); }); return; }
    e.appendChild(typeof c === "object" ? c : document.createTextNode(String(c)));
  }
  function fmt(x, p) { return x === null || x === undefined ? "-" : Number(x).toFixed(p); }
  function speed(x) { return x === null || x === undefined ? "-" : Number(x).toFixed(3) + "x"; }
  function interval(lo, hi) { return lo == null || hi == null ? "-" : Number(lo).toFixed(2) + "\u2013" + Number(hi).toFixed(2) + "x"; }
  function when(t) { return t ? String(t).replace("T", " ").replace(/\..*$/, "") : "-"; }
  function defs(d) {
    var k = Object.keys(d || {});
    return k.length ? k.map(function (n) { return n + "=" + d[n]; }).join(" ") : "-";
  }
  function verdict(v) { return el("span", { "class": "v v-" + (v || "queued"), text: v || "queued" }); }
  function link(href, text) { return el("a", { href: href, text: text }); }
  function enc(s) { return encodeURIComponent(s); }
  function campaign(name) {
    for (var i = 0; i < D.campaigns.length; i++) if (D.campaigns[i].name === name) return D.campaigns[i];
    return null;
  }
  function sum(o) { var s = 0; for (var k in (o || {})) s += o[k]; return s; }
  function bestOf(c) {
    var b = null;
    (c.best || []).forEach(function (x) { if (!b || x.speedup > b.speedup) b = x; });
    return b;
  }
  function table(headers, rows, numeric) {
    var t = el("table"), tr = el("tr");
    headers.forEach(function (h, i) { tr.appendChild(el("th", { "class": numeric && numeric[i] ? "num" : "", text: h })); });
    t.appendChild(el("thead", null, tr));
    var tb = el("tbody");
    rows.forEach(function (r) {
      var row = el("tr");
      r.forEach(function (c, i) {
        var td = el("td", { "class": numeric && numeric[i] ? "num" : (i === r.length - 1 && headers[i] === "detail" ? "detail" : "") });
        add(td, c);
        if (typeof c === "string" && headers[i] === "detail") td.title = c;
        row.appendChild(td);
      });
      tb.appendChild(row);
    });
    t.appendChild(tb);
    return t;
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
      .map(function (v) { return el("span", null, verdict(v), " " + counts[v] + "  "); });
  }

  /* ---- campaign list ---- */
  function viewList() {
    var rows = D.campaigns.map(function (c) {
      var b = bestOf(c), jobs = c.jobs || {};
      return [link("#c/" + enc(c.name), c.name), c.task, c.strategy, c.state,
        (c.targets || []).join(", "), String((c.candidates || []).length),
        (jobs.done || 0) + "/" + sum(jobs), b ? speed(b.speedup) + " (" + b.target + ")" : "-",
        el("span", null, verdictList(c.verdicts)), when(c.created_at)];
    });
    return [el("h1", { text: "Campaigns" }),
      rows.length ? table(["campaign", "task", "strategy", "state", "targets", "candidates",
        "jobs done", "best", "verdicts", "created"], rows, [0, 0, 0, 0, 0, 1, 1, 1, 0, 0])
        : el("p", { "class": "muted", text: "No campaigns yet." })];
  }

  /* ---- best-so-far chart (SVG) ---- */
  function chart(c) {
    var pts = c.timeline || [];
    if (!pts.length) return el("p", { "class": "muted", text: "No passing candidate yet." });
    var ns = "http://www.w3.org/2000/svg", W = 720, H = 220, P = 36;
    var t0 = Date.parse(pts[0].t), t1 = Date.parse(pts[pts.length - 1].t);
    if (t1 <= t0) t1 = t0 + 1000;
    var byTarget = {}, ymax = 1;
    pts.forEach(function (p) {
      var s = byTarget[p.target] || (byTarget[p.target] = { best: 0, pts: [] });
      if (p.speedup > s.best) { s.best = p.speedup; s.pts.push([Date.parse(p.t), p.speedup]); }
      if (p.speedup > ymax) ymax = p.speedup;
    });
    ymax *= 1.1;
    var svg = document.createElementNS(ns, "svg");
    svg.setAttribute("class", "chart"); svg.setAttribute("width", W); svg.setAttribute("height", H);
    function X(t) { return P + (W - 2 * P) * (t - t0) / (t1 - t0); }
    function Y(v) { return H - P + 10 - (H - 2 * P) * v / ymax; }
    function line(x1, y1, x2, y2, color, dash) {
      var l = document.createElementNS(ns, "line");
      l.setAttribute("x1", x1); l.setAttribute("y1", y1); l.setAttribute("x2", x2); l.setAttribute("y2", y2);
      l.setAttribute("stroke", color); if (dash) l.setAttribute("stroke-dasharray", "4 3");
      svg.appendChild(l);
    }
    function text(x, y, s) {
      var t = document.createElementNS(ns, "text");
      t.setAttribute("x", x); t.setAttribute("y", y); t.textContent = s; svg.appendChild(t);
    }
    line(P, Y(1), W - P, Y(1), "#9ca3af", true);
    text(4, Y(1) + 4, "1.0x");
    text(4, Y(ymax / 1.1) + 4, (ymax / 1.1).toFixed(2) + "x");
    text(P, H - 4, when(pts[0].t));
    text(W - P - 120, H - 4, when(pts[pts.length - 1].t));
    var legend = el("div", { "class": "legend" });
    Object.keys(byTarget).sort().forEach(function (tg, i) {
      var color = SERIES[i % SERIES.length], s = byTarget[tg].pts, d = "";
      s.forEach(function (p, k) {
        d += (k ? " H " + X(p[0]) + " V " : "M " + X(p[0]) + " ") + Y(p[1]);
      });
      d += " H " + X(t1);
      var path = document.createElementNS(ns, "path");
      path.setAttribute("d", d); path.setAttribute("fill", "none");
      path.setAttribute("stroke", color); path.setAttribute("stroke-width", "2");
      svg.appendChild(path);
      var sw = el("span"); sw.style.color = color;
      add(sw, "\u25A0 " + tg + " best " + speed(byTarget[tg].best));
      legend.appendChild(sw);
    });
    return el("div", null, svg, legend);
  }

  /* ---- one campaign ---- */
  function viewCampaign(c) {
    var out = [el("h1", null, link("#", "Campaigns"), " / ", c.name)];
    var jobs = c.jobs || {};
    out.push(el("div", { "class": "cards" },
      el("div", { "class": "card" }, el("div", { "class": "muted", text: "state" }), el("div", { "class": "big", text: c.state })),
      el("div", { "class": "card" }, el("div", { "class": "muted", text: "task" }), el("div", { "class": "big", text: c.task })),
      el("div", { "class": "card" }, el("div", { "class": "muted", text: "strategy / targets" }),
        el("div", { "class": "big", text: c.strategy + " / " + (c.targets || []).join(", ") })),
      el("div", { "class": "card" }, el("div", { "class": "muted", text: "jobs done" }),
        el("div", { "class": "big", text: (jobs.done || 0) + " / " + sum(jobs) })),
      el("div", { "class": "card" }, el("div", { "class": "muted", text: "candidates" }),
        el("div", { "class": "big", text: String((c.candidates || []).length) }))));
    if (c.task_definition) out.push(el("p", { "class": "muted", text: c.task_definition }));
    /* why the campaign is not progressing (coordinator/health.c) */
    if ((c.blockers || []).length) {
      out.push(el("div", { "class": "blockers" }, el("strong", { text: c.state === "done" ? "Warnings" : "Blocked" }),
        el("ul", null, c.blockers.map(function (b) { return el("li", { text: "[" + b.kind + "] " + b.text }); }))));
    }

    /* per target best with its noise and ties; overall: ok on every target (coordinator/bests.c) */
    var bests = c.bests || { targets: [], not_everywhere: [] };
    out.push(el("h2", { text: "Best per target" }));
    var brows = (bests.targets || []).filter(function (t) { return t.best; }).map(function (t) {
      var b = t.best;
      return [t.target, link("#c/" + enc(c.name) + "/" + b.candidate, "#" + b.candidate), speed(b.speedup),
        interval(b.lo, b.hi), fmt(b.cv, 2), String((t.ties || []).length),
        fmt(b.candidate_us, 2), fmt(b.baseline_us, 2), b.worker || "-",
        b.confirmation === "confirmed" ? "yes, by " + (b.confirmed_by || "?") : "not yet (" + (b.confirmation || "none") + ")"];
    });
    out.push(brows.length ? table(["target", "candidate", "speedup", "95% interval", "CV", "ties", "candidate \u00b5s",
      "baseline \u00b5s", "worker", "confirmed"], brows, [0, 1, 1, 0, 1, 1, 1, 1, 0, 0]) : el("p", { "class": "muted", text: "None yet." }));
    if (bests.overall) {
      out.push(el("p", null, "Best on every target: ", link("#c/" + enc(c.name) + "/" + bests.overall.candidate,
        "#" + bests.overall.candidate), " " + speed(bests.overall.speedup) + " (geometric mean, " +
        interval(bests.overall.lo, bests.overall.hi) + ")" +
        ((bests.overall.ties || []).length ? ", tied within the noise with " + bests.overall.ties.length : "")));
    } else if (brows.length) {
      out.push(el("p", { "class": "muted", text: "No candidate is ok on every target yet." }));
    }
    (bests.not_everywhere || []).forEach(function (n) {
      out.push(el("p", { "class": "muted", text: "Candidate #" + n.candidate + " is fastest on " + n.fast_on + " (" +
        speed(n.speedup) + ") but not ok on " + n.not_ok.map(function (x) { return x.target + " (" + x.verdict + ")"; }).join(", ") }));
    });

    out.push(el("h2", { text: "Best so far over time" }), chart(c));

    out.push(el("h2", { text: "Verdicts (final, per job)" }), verdictBar(c.verdicts),
      el("div", null, verdictList(c.verdicts)));
    if (c.attempts) out.push(el("p", { "class": "muted" }, "All attempts incl. retried ones: ", verdictList(c.attempts)));

    var results = [];
    (c.candidates || []).forEach(function (k) {
      (k.results || []).forEach(function (r) { results.push({ k: k, r: r }); });
    });
    var ok = results.filter(function (x) { return x.r.verdict === "ok" && x.r.speedup; })
      .sort(function (a, b) { return b.r.speedup - a.r.speedup; });
    out.push(el("h2", { text: "Leaderboard (per target; overlapping 95% intervals are ties)" }));
    if (!ok.length) out.push(el("p", { "class": "muted", text: "No passing candidate yet." }));
    (c.targets || []).forEach(function (tg) {
      var rows = ok.filter(function (x) { return x.r.target === tg; });
      if (!rows.length) return;
      var lo = function (x) { return x.r.speedup_lo == null ? x.r.speedup : x.r.speedup_lo; };
      var hi = function (x) { return x.r.speedup_hi == null ? x.r.speedup : x.r.speedup_hi; };
      /* rank = 1 + results on this target faster beyond the noise (as kfarm leaderboard) */
      var ranks = rows.map(function (x) { return 1 + rows.filter(function (y) { return lo(y) > hi(x); }).length; });
      out.push(el("h3", { text: tg }));
      out.push(table(["rank", "candidate", "speedup", "95% interval", "CV", "candidate \u00b5s", "baseline \u00b5s", "defines", "proposer"],
        rows.slice(0, 50).map(function (x, i) {
          var tie = ranks.filter(function (r) { return r === ranks[i]; }).length > 1;
          return [(tie ? "=" : "") + ranks[i], link("#c/" + enc(c.name) + "/" + x.k.id, "#" + x.k.id),
            speed(x.r.speedup), interval(x.r.speedup_lo, x.r.speedup_hi), fmt(x.r.cv, 2),
            fmt(x.r.candidate_us, 2), fmt(x.r.baseline_us, 2), defs(x.k.defines), x.k.proposer];
        }), [1, 1, 1, 0, 1, 1, 1, 0, 0]));
    });

    out.push(el("h2", { text: "Candidates" }));
    var filt = el("select");
    ["all"].concat(Object.keys(c.verdicts || {}), ["queued", "leased"]).forEach(function (v) {
      filt.appendChild(el("option", { value: v, text: v }));
    });
    var holder = el("div");
    function renderCands() {
      holder.textContent = "";
      var rows = [];
      (c.candidates || []).forEach(function (k) {
        var rs = (k.results && k.results.length) ? k.results : [null];
        rs.forEach(function (r) {
          var v = r ? (r.verdict || r.state) : "seed";
          if (filt.value !== "all" && v !== filt.value) return;
          rows.push([link("#c/" + enc(c.name) + "/" + k.id, "#" + k.id),
            k.parent_id ? link("#c/" + enc(c.name) + "/" + k.parent_id, "#" + k.parent_id) : "-",
            k.proposer, defs(k.defines), r ? r.target : "-", r ? verdict(v) : "(no jobs)",
            r ? speed(r.speedup) : "-", r ? fmt(r.candidate_us, 2) : "-", r ? fmt(r.baseline_us, 2) : "-",
            r ? String(r.attempts) : "-", (r && r.detail) || ""]);
        });
      });
      holder.appendChild(table(["id", "parent", "proposer", "defines", "target", "verdict", "speedup",
        "candidate \u00b5s", "baseline \u00b5s", "tries", "detail"], rows, [1, 1, 0, 0, 0, 0, 1, 1, 1, 1, 0]));
    }
    filt.onchange = renderCands;
    renderCands();
    out.push(el("div", { "class": "filters" }, "verdict: ", filt), holder);

    var props = c.proposals || [];
    if (props.length) {
      var tin = 0, tout = 0;
      props.forEach(function (p) { tin += p.prompt_tokens || 0; tout += p.completion_tokens || 0; });
      out.push(el("h2", { text: "Model proposals" }),
        el("p", { "class": "muted", text: props.length + " proposals, " + tin + " prompt + " + tout + " completion tokens" }));
      out.push(table(["id", "round", "state", "model", "tokens in/out", "finish", "candidate", "reason"],
        props.slice(-300).map(function (p) {
          return ["#" + p.id, p.round === null ? "-" : String(p.round), p.state, p.model || "-",
            (p.prompt_tokens || 0) + "/" + (p.completion_tokens || 0), p.finish_reason || "-",
            p.candidate_id ? link("#c/" + enc(c.name) + "/" + p.candidate_id, "#" + p.candidate_id) : "-",
            p.reason || ""];
        }), [1, 1, 0, 0, 1, 0, 1, 0]));
    }
    return out;
  }

  /* Line diff (LCS; sources are small). Returns [[op, line]...]. */
  function diff(a, b) {
    a = a.split("\n"); b = b.split("\n");
    if (a.length * b.length > 4e6) return [[" ", "(too large to diff)"]];
    var n = a.length, m = b.length, L = [], i, j;
    for (i = 0; i <= n; i++) { L.push(new Int32Array(m + 1)); }
    for (i = n - 1; i >= 0; i--) for (j = m - 1; j >= 0; j--)
      L[i][j] = a[i] === b[j] ? L[i + 1][j + 1] + 1 : Math.max(L[i + 1][j], L[i][j + 1]);
    var out = []; i = 0; j = 0;
    while (i < n && j < m) {
      if (a[i] === b[j]) { out.push([" ", a[i]]); i++; j++; }
      else if (L[i + 1][j] >= L[i][j + 1]) out.push(["-", a[i++]]);
      else out.push(["+", b[j++]]);
    }
    while (i < n) out.push(["-", a[i++]]);
    while (j < m) out.push(["+", b[j++]]);
    return out;
  }

  /* ---- one candidate ---- */
  function viewCandidate(c, id) {
    var byId = {};
    (c.candidates || []).forEach(function (k) { byId[k.id] = k; });
    var k = byId[id];
    var out = [el("h1", null, link("#", "Campaigns"), " / ", link("#c/" + enc(c.name), c.name), " / #" + id)];
    if (!k) { out.push(el("p", { text: "No such candidate." })); return out; }
    out.push(el("p", null, "proposer ", el("b", { text: k.proposer }), ", defines ", el("code", { text: defs(k.defines) }),
      ", created " + when(k.created_at)));
    var chain = [], p = k;
    while (p && chain.length < 100) { chain.unshift(p); p = p.parent_id ? byId[p.parent_id] : null; }
    out.push(el("p", null, "lineage: ", chain.map(function (x, i) {
      return [i ? " \u2192 " : "", x.id === k.id ? "#" + x.id : link("#c/" + enc(c.name) + "/" + x.id, "#" + x.id)];
    })));
    var kids = (c.candidates || []).filter(function (x) { return x.parent_id === k.id; });
    if (kids.length) out.push(el("p", null, "children: ", kids.slice(0, 200).map(function (x) {
      return [link("#c/" + enc(c.name) + "/" + x.id, "#" + x.id), " "];
    })));
    if (k.note) out.push(el("p", { "class": "muted", text: k.note }));
    var prop = null;
    (c.proposals || []).forEach(function (p) { if (p.id === k.proposal_id) prop = p; });
    if (prop) {
      out.push(el("h2", { text: "Model proposal #" + prop.id }));
      out.push(el("p", null, (prop.model || "-") + ", round " + prop.round + ", temperature " + fmt(prop.temperature, 2) +
        ", tokens " + (prop.prompt_tokens || 0) + " in / " + (prop.completion_tokens || 0) + " out, finish " +
        (prop.finish_reason || "-") + (prop.reviewer_note ? ", review: " + prop.reviewer_note : "")));
      out.push(el("details", null, el("summary", { text: "prompt" }), el("pre", { text: prop.prompt || "" })));
      out.push(el("details", null, el("summary", { text: "reply" }), el("pre", { text: prop.reply || "" })));
    }

    out.push(el("h2", { text: "Results" }));
    (k.results || []).forEach(function (r) {
      out.push(el("h3", null, r.target + " ", verdict(r.verdict || r.state)));
      out.push(el("p", null, "speedup " + speed(r.speedup) + ", candidate " + fmt(r.candidate_us, 2) +
        " \u00b5s, baseline " + fmt(r.baseline_us, 2) + " \u00b5s, worker " + (r.worker || "-") +
        (r.confirmation && r.confirmation !== "none" ? ", " + r.confirmation + (r.confirmed_by ? " (" + r.confirmed_by + ")" : "") : "") +
        ", attempts " + r.attempts));
      if (r.detail) out.push(el("pre", { text: r.detail }));
      if (r.history && r.history.length) out.push(el("p", { "class": "muted" }, "earlier attempts: ",
        r.history.map(function (h) { return el("div", null, "#" + h.attempt + " " + (h.worker || "-") + " ", verdict(h.verdict), " " + (h.detail || "")); })));
      if (r.metrics) out.push(el("details", null, el("summary", { text: "metrics (timing, profile)" }),
        el("pre", { text: JSON.stringify(r.metrics, null, 2) })));
      if (r.compile_log) out.push(el("details", null, el("summary", { text: "compile log" }), el("pre", { text: r.compile_log })));
    });
    if (!(k.results || []).length) out.push(el("p", { "class": "muted", text: "Not evaluated (no jobs)." }));

    var src = (c.sources || {})[k.sha256] || "";
    out.push(el("h2", { text: "Source" }), el("pre", { text: src }));
    var parent = k.parent_id ? byId[k.parent_id] : null;
    if (parent) {
      var psrc = (c.sources || {})[parent.sha256] || "";
      out.push(el("h2", { text: "Diff to parent #" + parent.id }));
      if (psrc === src) out.push(el("p", { "class": "muted", text: "Same source; defines differ: " + defs(parent.defines) + " \u2192 " + defs(k.defines) }));
      else {
        var pre = el("pre", { "class": "diff" });
        diff(psrc, src).forEach(function (d) {
          pre.appendChild(el("div", { "class": d[0] === "+" ? "add" : d[0] === "-" ? "del" : "", text: d[0] + " " + d[1] }));
        });
        out.push(pre);
      }
    }
    return out;
  }

  /* ---- workers ---- */
  function viewWorkers() {
    var rows = (D.workers || []).map(function (w) {
      return [w.id, w.hostname || "-", w.backend || "-", (w.classes || []).join(", "),
        (w.devices || []).map(function (d) { return d.name || d.arch || "?"; }).join(", "),
        when(w.last_seen) + (w.clock_skew_ms == null ? "" : " (clock " + (w.clock_skew_ms >= 0 ? "+" : "") +
          (w.clock_skew_ms / 1000).toFixed(1) + " s)"),
        w.quarantined ? "quarantined: " + (w.quarantine_reason || "?") : w.offline ? "offline" : "ok", String(w.jobs_done),
        String(w.infra_errors), String(w.leased)];
    });
    var models = {};
    (D.workers || []).forEach(function (w) {
      (w.devices || []).forEach(function (d) { var n = d.name || "?"; models[n] = (models[n] || 0) + 1; });
    });
    return [el("h1", { text: "Workers" }),
      el("p", { "class": "muted", text: "Device models: " + (Object.keys(models).map(function (m) { return m + " \u00d7" + models[m]; }).join(", ") || "none") }),
      rows.length ? table(["worker", "host", "backend", "classes", "devices", "last seen", "state", "jobs", "infra errors", "leased"],
        rows, [0, 0, 0, 0, 0, 0, 0, 1, 1, 1]) : el("p", { "class": "muted", text: "No workers registered." })];
  }

  function route() {
    var parts = location.hash.replace(/^#/, "").split("/").map(function (x) {
      try { return decodeURIComponent(x); } catch (e) { return x; }
    }), view;
    if (parts[0] === "workers") view = viewWorkers();
    else if (parts[0] === "c" && parts.length >= 2) {
      var c = campaign(parts[1]);
      if (!c) view = [el("p", { text: "No campaign " + parts[1] })];
      else view = parts.length >= 3 ? viewCandidate(c, Number(parts[2])) : viewCampaign(c);
    } else view = viewList();
    main.textContent = "";
    add(main, view);
    window.scrollTo(0, 0);
  }
  document.getElementById("generated").textContent = "data from " + when(D.generated_at);
  window.addEventListener("hashchange", route);
  route();
})();
