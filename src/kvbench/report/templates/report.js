// kvbench report charts. Reads the embedded result documents (#kvbench-data) and draws
// SVG line, bar and stacked-bar charts into every <figure data-chart>. No library, no
// network: every number drawn comes from the embedded JSON.
(function () {
  "use strict";

  var NS = "http://www.w3.org/2000/svg";
  // Paul Tol's "muted" scheme: nine hues told apart with every common colour-vision
  // deficiency. An op past the ninth takes a hue again with a dash-dot line (opStyle), so
  // a replay's eleven ops stay eleven series.
  var COLORS = ["#332288", "#CC6677", "#117733", "#DDCC77", "#88CCEE", "#882255", "#44AA99",
                "#999933", "#AA4499"];
  var DASH_DOT = "8 3 2 3", DASHED = "6 4";
  var INK = "#3b4250";
  var OUTCOME_COLORS = {
    hit: "#59a14f", miss: "#c4c9d1", stored: "#4e79a7", not_stored: "#edc948",
    exists: "#b07aa1", not_found: "#9c755f", deleted: "#76b7b2", touched: "#86bcb6",
    ok: "#4e79a7", value: "#a0cbe8", error_reply: "#e15759", timeout: "#b3261e",
    conn_error: "#7f1d1d", protocol_error: "#4a0d0d", dropped: "#ff9da7"
  };
  var LIGHT = { miss: true, not_stored: true, value: true, dropped: true, touched: true };
  var HEIGHT = 250;
  var MARGIN = { l: 70, r: 16, t: 12, b: 44 };
  var DATA = JSON.parse(document.getElementById("kvbench-data").textContent);

  // -- formatting ---------------------------------------------------------------------

  function trim(text) { return text.replace(/\.0+$|(\.\d*?)0+$/, "$1"); }

  function fmtRate(v) {
    var a = Math.abs(v);
    if (a >= 1e6) return trim((v / 1e6).toFixed(2)) + "M";
    if (a >= 1e4) return trim((v / 1e3).toFixed(1)) + "k";
    if (a >= 1e3) return trim((v / 1e3).toFixed(2)) + "k";
    return trim(a >= 10 ? v.toFixed(0) : v.toFixed(2));
  }

  function fmtUs(v) {
    if (v === 0) return "0";
    if (v >= 1e6) return trim((v / 1e6).toFixed(2)) + " s";
    if (v >= 1e3) return trim((v / 1e3).toFixed(v >= 1e5 ? 0 : v >= 1e4 ? 1 : 2)) + " ms";
    if (v >= 1) return trim(v.toFixed(v >= 100 ? 0 : v >= 10 ? 1 : 2)) + " µs";
    return trim((v * 1e3).toFixed(0)) + " ns";
  }

  function fmtPlain(v) { return trim(v.toFixed(Math.abs(v) >= 10 ? 0 : 2)); }

  function fmtPercentile(p) { return p === 0 ? "min" : "p" + trim(p.toFixed(3)); }

  // -- scales and ticks ---------------------------------------------------------------

  function max(values) { return values.reduce(function (a, v) { return v > a ? v : a; }, -Infinity); }
  function min(values) { return values.reduce(function (a, v) { return v < a ? v : a; }, Infinity); }

  // A point is drawn when it has a value (a log axis needs it above zero too).
  function drawable(p, log) { return p[1] !== null && p[1] !== undefined && (!log || p[1] > 0); }

  function niceStep(span, count) {
    var raw = span / count;
    var mag = Math.pow(10, Math.floor(Math.log10(raw)));
    var f = raw / mag;
    return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * mag;
  }

  // Ticks from lo down to a step, up to the first step at or above hi.
  function linearTicks(lo, hi, count) {
    var step = niceStep(hi - lo || 1, count);
    var ticks = [];
    for (var i = Math.floor(lo / step); i <= Math.ceil(hi / step - 1e-9); i++) {
      ticks.push(Number((i * step).toPrecision(12)));
    }
    return ticks;
  }

  function logTicks(lo, hi) {
    var ticks = [];
    for (var d = Math.floor(Math.log10(lo)); d <= Math.ceil(Math.log10(hi)); d++) {
      [1, 2, 5].forEach(function (m) {
        var v = m * Math.pow(10, d);
        if (v >= lo * 0.999 && v <= hi * 1.001) ticks.push(v);
      });
    }
    return ticks;
  }

  // The percentile axis counts nines: p90 is 1, p99 is 2, p99.999 is 5.
  function nines(p) { return -Math.log10(1 - Math.min(p, 99.9999) / 100); }
  var NINES_TICKS = [[0, "0"], [Math.log10(2), "50"], [1, "90"], [2, "99"], [3, "99.9"],
                     [4, "99.99"], [5, "99.999"]];

  function scale(kind, d0, d1, r0, r1) {
    if (kind === "log") {
      var l0 = Math.log10(d0), l1 = Math.log10(d1);
      return function (v) { return r0 + (Math.log10(v) - l0) / (l1 - l0) * (r1 - r0); };
    }
    return function (v) { return r0 + (v - d0) / (d1 - d0 || 1) * (r1 - r0); };
  }

  // -- SVG helpers --------------------------------------------------------------------

  function el(name, attrs, parent, text) {
    var node = document.createElementNS(NS, name);
    Object.keys(attrs || {}).forEach(function (k) { node.setAttribute(k, attrs[k]); });
    if (text !== undefined) node.textContent = text;
    if (parent) parent.appendChild(node);
    return node;
  }

  function svgFor(plot, height) {
    var width = Math.max(300, Math.round(plot.clientWidth || 560));
    var svg = el("svg", { viewBox: "0 0 " + width + " " + height, role: "img" }, plot);
    return { svg: svg, w: width, h: height };
  }

  function legend(plot, items) {
    var box = document.createElement("div");
    box.className = "legend";
    items.forEach(function (item) {
      var span = document.createElement("span");
      var mark = document.createElement("i");
      if (item.box) { mark.className = "box"; mark.style.background = item.color; }
      else {  // a short piece of the line itself: its colour and its dashes
        mark = el("svg", { width: 22, height: 6, "class": "key" });
        el("line", { x1: 0, x2: 22, y1: 3, y2: 3, stroke: item.color, "stroke-width": 2.5,
                     "stroke-dasharray": item.dashes || "none" }, mark);
      }
      span.appendChild(mark);
      span.appendChild(document.createTextNode(item.name));
      box.appendChild(span);
    });
    plot.appendChild(box);
  }

  function empty(plot, text) {
    var div = document.createElement("div");
    div.className = "empty";
    div.textContent = text;
    plot.appendChild(div);
  }

  function axes(g, box, x, y, spec) {
    var grid = el("g", { "class": "grid" }, g);
    var axis = el("g", { "class": "axis" }, g);
    y.ticks.forEach(function (t) {
      var py = y.pos(t[0]);
      el("line", { x1: box.l, x2: box.r, y1: py, y2: py }, grid);
      el("text", { x: box.l - 7, y: py + 3.5, "text-anchor": "end" }, axis, t[1]);
    });
    x.ticks.forEach(function (t) {
      var px = x.pos(t[0]);
      el("line", { x1: px, x2: px, y1: box.b, y2: box.b + 4 }, axis);
      el("text", { x: px, y: box.b + 16, "text-anchor": "middle" }, axis, t[1]);
    });
    el("line", { x1: box.l, x2: box.r, y1: box.b, y2: box.b }, axis);
    el("text", { x: (box.l + box.r) / 2, y: box.b + 34, "text-anchor": "middle", "class": "label" },
       axis, spec.x.label);
    el("text", { x: 0, y: 0, "text-anchor": "middle", "class": "label",
                 transform: "translate(13," + (box.t + box.b) / 2 + ") rotate(-90)" },
       axis, spec.y.label);
  }

  // -- charts -------------------------------------------------------------------------

  // spec: {series: [{name, color, dash, points: [[x, y|null]], ci: [[lo, hi]|null]}],
  //        x: {label, kind: "linear"|"log"|"nines", fmt, ticks}, y: {label, kind: "linear"|"log", fmt},
  //        marks: [[x, label, class, row]] (vertical; labels of one row or one x stack),
  //        hlines: [[y, label]] (horizontal, dashed)}
  function lineChart(plot, spec) {
    var log = spec.y.kind === "log";
    var series = spec.series.filter(function (s) {
      return s.points.some(function (p) { return drawable(p, log); });
    });
    if (!series.length) return empty(plot, spec.none || "no data");
    var xs = [], ys = [];
    series.forEach(function (s) {
      s.points.forEach(function (p, k) {
        if (!drawable(p, log)) return;
        xs.push(spec.x.kind === "nines" ? nines(p[0]) : p[0]);
        ys.push(p[1]);
        if (s.ci && s.ci[k]) s.ci[k].forEach(function (v) { if (!log || v > 0) ys.push(v); });
      });
    });
    (spec.hlines || []).forEach(function (h) { ys.push(h[0]); });
    if (spec.x.kind !== "nines") (spec.marks || []).forEach(function (m) { xs.push(m[0]); });
    var c = svgFor(plot, HEIGHT);
    var box = { l: MARGIN.l, r: c.w - MARGIN.r, t: MARGIN.t, b: HEIGHT - MARGIN.b };
    var x = {}, y = {};
    if (spec.x.kind === "nines") {
      var top = Math.max(2, Math.ceil(max(xs)));
      x.pos = scale("linear", 0, top, box.l, box.r);
      x.ticks = NINES_TICKS.filter(function (t) { return t[0] <= top; });
    } else {
      var x0 = min(xs), x1 = max(xs), xlog = spec.x.kind === "log";
      if (x1 === x0) { x0 = xlog ? x0 / 2 : x0 - 1; x1 = xlog ? x1 * 2 : x1 + 1; }
      x.pos = scale(xlog ? "log" : "linear", x0, x1, box.l, box.r);
      x.ticks = (spec.x.ticks || (xlog ? logTicks(x0, x1) : linearTicks(x0, x1, Math.max(3, Math.floor(c.w / 90)))))
        .filter(function (t) { return t >= x0 - 1e-9 && t <= x1 + 1e-9; })
        .map(function (t) { return [t, spec.x.fmt(t)]; });
    }
    if (log) {
      var lo = Math.pow(10, Math.floor(Math.log10(min(ys))));
      var hi = Math.pow(10, Math.ceil(Math.log10(max(ys) * 1.0001)));
      y.pos = scale("log", lo, hi, box.b, box.t);
      var lt = logTicks(lo, hi);
      var labelled = lt.length > 9 ? lt.filter(function (v) { return /^1/.test(v.toExponential()); }) : lt;
      y.ticks = labelled.map(function (t) { return [t, spec.y.fmt(t)]; });
    } else {
      var ticks = linearTicks(0, max(ys) || 1, 5);
      y.pos = scale("linear", 0, ticks[ticks.length - 1], box.b, box.t);
      y.ticks = ticks.map(function (t) { return [t, spec.y.fmt(t)]; });
    }
    var g = el("g", {}, c.svg);
    axes(g, box, x, y, spec);
    var marked = {};  // labels of marks at one x are stacked
    (spec.marks || []).forEach(function (m) {
      var px = x.pos(m[0]), row = m[3] !== undefined ? m[3] : marked[m[0]] || 0, left = px > box.r - 110;
      marked[m[0]] = row + 1;
      el("line", { x1: px, x2: px, y1: box.t, y2: box.b, stroke: "#9aa2ae", "stroke-dasharray": "2 3",
                   "class": "mark" + (m[2] ? " " + m[2] : ""), "data-x": m[0] }, g);
      el("text", { x: left ? px - 4 : px + 4, y: box.t + 9 + 13 * row, "text-anchor": left ? "end" : "start",
                   "class": "mark-label" + (m[2] ? " " + m[2] : "") }, g, m[1]);
    });
    (spec.hlines || []).forEach(function (h) {
      var py = y.pos(h[0]);
      el("line", { x1: box.l, x2: box.r, y1: py, y2: py, "class": "limit" }, g);
      el("text", { x: box.l + 4, y: py - 4, "class": "mark-label limit" }, g, h[1]);
    });
    var toX = spec.x.kind === "nines" ? function (v) { return x.pos(nines(v)); } : x.pos;
    series.sort(function (a, b) { return (b.under ? 1 : 0) - (a.under ? 1 : 0); });
    series.forEach(function (s) {
      var d = "", pen = "M";  // a missing value (too few samples) breaks the line
      var shown = s.points.filter(function (p) { return drawable(p, log); });
      s.points.forEach(function (p) {
        if (!drawable(p, log)) { pen = "M"; return; }
        d += pen + toX(p[0]).toFixed(1) + "," + y.pos(p[1]).toFixed(1);
        pen = "L";
      });
      var path = el("path", { d: d, "class": "series", stroke: s.color }, g);
      var dashes = s.dash ? DASHED : s.pattern;
      if (dashes) path.setAttribute("stroke-dasharray", dashes);
      if (s.under) path.setAttribute("style", "stroke-width:5;stroke-opacity:0.25");
      el("title", {}, path, s.name);
      (s.ci || []).forEach(function (ci, k) {
        if (!ci || !drawable(s.points[k], log)) return;
        // a bound outside the axis (a CI reaching below zero) stops at the axis
        var clamp = function (v) { return Math.min(box.b, Math.max(box.t, log && v <= 0 ? box.b : y.pos(v))); };
        var cx = toX(s.points[k][0]), lo = clamp(ci[0]), hi = clamp(ci[1]);
        el("path", { d: "M" + (cx - 5) + "," + lo + "H" + (cx + 5) + "M" + cx + "," + lo + "V" + hi +
                        "M" + (cx - 5) + "," + hi + "H" + (cx + 5), "class": "whisker", stroke: s.color }, g);
      });
      if (shown.length <= 40) {
        shown.forEach(function (p) {
          var dot = el("circle", { cx: toX(p[0]), cy: y.pos(p[1]), r: shown.length === 1 ? 3.5 : 2.4,
                                   fill: s.color, "class": "dot" }, g);
          el("title", {}, dot, s.name + " at " + spec.x.fmt(p[0]) + ": " + spec.y.fmt(p[1]));
        });
      }
    });
    // The legend lists the lines as they end, top to bottom, so the eye goes from a line
    // to its name in one step.
    var lastY = function (s) {
      var shown = s.points.filter(function (p) { return drawable(p, log); });
      return shown.length ? shown[shown.length - 1][1] : -Infinity;
    };
    legend(plot, series.slice().sort(function (a, b) { return lastY(b) - lastY(a); })
      .map(function (s) { return { name: s.name, color: s.color, dashes: s.dash ? DASHED : s.pattern }; }));
    return true;
  }

  // spec: {bars: [{label, value|null, color, lo, hi}], x: {label}, y: {label, fmt}}
  function barChart(plot, spec) {
    var bars = spec.bars.filter(function (b) { return b.value !== null && b.value !== undefined; });
    if (!bars.length) return empty(plot, spec.none || "no data");
    var c = svgFor(plot, HEIGHT);
    var box = { l: MARGIN.l, r: c.w - MARGIN.r, t: MARGIN.t + 8, b: HEIGHT - MARGIN.b };
    var top = max(bars.map(function (b) { return Math.max(b.value, b.hi || 0); }));
    var ticks = linearTicks(0, top || 1, 5);
    var y = { pos: scale("linear", 0, ticks[ticks.length - 1], box.b, box.t) };
    y.ticks = ticks.map(function (t) { return [t, spec.y.fmt(t)]; });
    var band = (box.r - box.l) / spec.bars.length;
    var x = { pos: function (i) { return box.l + band * (i + 0.5); } };
    x.ticks = spec.bars.map(function (b, i) { return [i, b.label]; });
    var g = el("g", {}, c.svg);
    axes(g, box, x, y, spec);
    spec.bars.forEach(function (b, i) {
      if (b.value === null || b.value === undefined) return;
      var width = Math.min(band * 0.56, 90);
      var rect = el("rect", { x: x.pos(i) - width / 2, y: y.pos(b.value), width: width,
                              height: Math.max(0.5, box.b - y.pos(b.value)), fill: b.color, rx: 2 }, g);
      el("title", {}, rect, b.label + ": " + spec.y.fmt(b.value));
      if (b.lo !== undefined && b.hi !== undefined) {
        var cx = x.pos(i);
        el("path", { d: "M" + (cx - 6) + "," + y.pos(b.lo) + "H" + (cx + 6) + "M" + cx + "," + y.pos(b.lo) +
                        "V" + y.pos(b.hi) + "M" + (cx - 6) + "," + y.pos(b.hi) + "H" + (cx + 6),
                     "class": "whisker" }, g);
      }
      var above = b.hi !== undefined ? Math.min(y.pos(b.hi), y.pos(b.value)) : y.pos(b.value);
      el("text", { x: x.pos(i), y: above - 5, "text-anchor": "middle", "class": "label" }, g, spec.y.fmt(b.value));
    });
  }

  // spec: {rows: [{label, parts: [{name, value}]}]}: one 100% bar per row.
  function stackChart(plot, spec) {
    var rows = spec.rows.filter(function (r) { return r.total > 0; });
    if (!rows.length) return empty(plot, "no ops");
    var rowH = 34, height = MARGIN.t + rows.length * rowH + 30;
    var c = svgFor(plot, height);
    var box = { l: MARGIN.l, r: c.w - MARGIN.r, t: MARGIN.t, b: height - 30 };
    var g = el("g", {}, c.svg);
    var grid = el("g", { "class": "grid" }, g);
    var axis = el("g", { "class": "axis" }, g);
    var x = scale("linear", 0, 1, box.l, box.r);
    [0, 0.25, 0.5, 0.75, 1].forEach(function (t) {
      el("line", { x1: x(t), x2: x(t), y1: box.t, y2: box.b }, grid);
      el("text", { x: x(t), y: box.b + 15, "text-anchor": "middle" }, axis, Math.round(t * 100) + "%");
    });
    var seen = {};
    rows.forEach(function (row, i) {
      var top = box.t + i * rowH + 5, at = 0;
      el("text", { x: box.l - 8, y: top + 16, "text-anchor": "end", "class": "label" }, axis, row.label);
      row.parts.forEach(function (part) {
        if (!part.value) return;
        var key = part.color || part.name;  // the outcome whose colour it takes
        seen[part.name] = key;
        var share = part.value / row.total;
        var color = OUTCOME_COLORS[key] || "#bab0ac";
        var rect = el("rect", { x: x(at), y: top, width: Math.max(0.5, x(at + share) - x(at)),
                                height: rowH - 10, fill: color }, g);
        el("title", {}, rect, row.label + " " + part.name + ": " + part.value.toLocaleString("en-US") +
           " (" + (share * 100).toFixed(1) + "%)");
        var text = part.name + " " + (share * 100).toFixed(1) + "%";
        if (x(at + share) - x(at) > text.length * 6.3 + 12) {
          el("text", { x: x(at) + 6, y: top + 16, style: "fill:" + (LIGHT[key] ? INK : "#fff") },
             g, text);
        }
        at += share;
      });
    });
    legend(plot, Object.keys(seen).map(function (name) {
      return { name: name, color: OUTCOME_COLORS[seen[name]] || "#bab0ac", box: true };
    }));
  }

  // -- what each figure shows ---------------------------------------------------------

  function opColor(ops, op) {
    return op === "all ops" ? INK : COLORS[ops.indexOf(op) % COLORS.length];
  }

  // The line of an op's series: its hue, dash-dot from the tenth op on (see COLORS).
  function opPattern(ops, op) {
    return op !== "all ops" && ops.indexOf(op) >= COLORS.length ? DASH_DOT : null;
  }

  // Rows of a rate chart: a round's last interval shorter than half the others (a run
  // ends when its window does, not on an interval's edge) holds too few ops to be drawn
  // beside full ones; it is left out of the line, and the chart says so.
  function fullIntervals(doc) {
    var lengths = doc.intervals.map(function (r) { return r.length_s; }).sort(function (a, b) { return a - b; });
    var typical = lengths.length ? lengths[Math.floor(lengths.length / 2)] : 0;
    var rows = doc.intervals.filter(function (r, i) {
      var next = doc.intervals[i + 1];
      var last = !next || next.round !== r.round;
      return !(last && i > 0 && r.length_s < typical / 2);
    });
    return { rows: rows, left: doc.intervals.filter(function (r) { return rows.indexOf(r) < 0; }) };
  }

  function leftOutNote(plot, left, drawn) {
    if (!drawn || !left.length) return;
    var p = document.createElement("p");
    p.className = "note chart-note";
    p.textContent = "left out: " + left.map(function (r) { return "a last interval of " + r.length_s + " s"; })
      .join(", ") + " (too short for a rate beside full intervals; its ops are in every total)";
    plot.appendChild(p);
  }

  // Elapsed time across rounds: each round's intervals follow the previous rounds' windows.
  function elapsed(doc) {
    var offsets = [0];
    (doc.rounds || []).forEach(function (r, i) { offsets[i + 1] = offsets[i] + r.window_s; });
    return function (round, t) { return (offsets[round] || 0) + t; };
  }

  // Dotted lines where rounds 2, 3, ... begin.
  function roundMarks(doc) {
    var marks = [], at = 0, rounds = doc.rounds || [];
    rounds.forEach(function (r, i) {
      if (i > 0) marks.push([at, "round " + (i + 1)]);
      at += r.window_s;
    });
    return marks;
  }

  var TIME = { label: "time in the window (s)", fmt: function (v) { return trim(v.toFixed(1)) + " s"; } };

  function throughputSeries(run, rows) {
    var doc = run.document, at = elapsed(doc), ops = Object.keys(doc.ops);
    var series = ops.map(function (op) {
      return { name: op, color: opColor(ops, op), pattern: opPattern(ops, op), points: rows.map(function (r) {
        return [at(r.round, r.t_s), r.ops[op] ? r.ops[op].per_s : 0];
      }) };
    });
    if (ops.length > 1) {
      series.push({ name: "all ops", color: INK, points: rows.map(function (r) {
        return [at(r.round, r.t_s), r.per_s];
      }) });
    }
    if (rows.some(function (r) { return r.offered_per_s !== null && r.offered_per_s !== undefined; })) {
      series.push({ name: "offered", color: "#8a93a3", dash: true, points: rows.map(function (r) {
        return [at(r.round, r.t_s), r.offered_per_s];
      }) });
    }
    return series;
  }

  function spectrumOf(run, op, kind) {
    var found = run.spectrum.filter(function (s) { return s.op === op && s.kind === kind; })[0];
    return found ? found.points : [];
  }

  var SPECTRUM_AXES = {
    x: { label: "percentile (log scale of nines)", kind: "nines", fmt: fmtPercentile },
    y: { label: "latency (log scale)", kind: "log", fmt: fmtUs }
  };

  var RATE_AXIS = { label: "ops/s", fmt: fmtRate };

  // One server figure over time (run.server: the samples' derived series).
  function serverLine(plot, run, key, spec) {
    var at = elapsed(run.document);
    lineChart(plot, {
      none: spec.none,
      series: [{ name: spec.name, color: spec.color, points: run.server.map(function (s) { return [at(s.round, s.t_s), s[key]]; }) }],
      x: TIME, y: { label: spec.label, fmt: fmtPlain }
    });
  }

  // -- sweeps -------------------------------------------------------------------------

  var LEVEL_LABELS = { connections: "connections", pipeline: "pipeline depth (requests in flight per connection)",
                       rate: "offered rate (requests/s)" };

  // Levels in increasing order; a log axis when they grow geometrically (1, 2, 4, 8, ...).
  function sweepLevels() { return DATA.sweep.levels.slice().sort(function (a, b) { return a.level - b.level; }); }

  function levelAxis(levels) {
    var values = levels.map(function (l) { return l.level; });
    var steps = values.slice(1).map(function (v, i) { return v / values[i]; }).sort(function (a, b) { return a - b; });
    var geometric = steps.length > 1 && values[values.length - 1] / values[0] >= 8 && steps[steps.length >> 1] >= 1.5;
    var axis = DATA.sweep.axis;
    return { label: LEVEL_LABELS[axis] || axis, kind: geometric ? "log" : "linear",
             fmt: axis === "rate" ? fmtRate : fmtPlain, ticks: values.length <= 12 ? values : undefined };
  }

  // The knee, the best level for the objective, and levels that are not ok (failed,
  // interrupted, partial), as vertical markers labelled with their status.
  function sweepMarks(levels) {
    var sweep = DATA.sweep, fmt = levelAxis(levels).fmt, marks = [];
    if (sweep.knee !== null) marks.push([sweep.knee, "knee at " + fmt(sweep.knee), "knee", 0]);
    if (sweep.best_level !== null) marks.push([sweep.best_level, "best for " + sweep.slo + ": " + fmt(sweep.best_level), "best", 1]);
    levels.forEach(function (l) { if (l.status !== "ok") marks.push([l.level, l.status, "failed", 2]); });
    return marks;
  }

  function latencyAt(l, name) { return l.latency_us[name] === undefined ? null : l.latency_us[name]; }

  var CHARTS = {
    "sweep-throughput": function (plot) {
      var levels = sweepLevels();
      lineChart(plot, {
        none: "no level completed a round",
        series: [{ name: "throughput (mean over rounds)", color: COLORS[0],
                   points: levels.map(function (l) { return [l.level, l.throughput_per_s]; }),
                   ci: levels.map(function (l) { return l.throughput_ci95_per_s; }) }],
        marks: sweepMarks(levels), x: levelAxis(levels), y: RATE_AXIS
      });
    },
    "sweep-latency": function (plot) {
      var levels = sweepLevels(), chart = DATA.sweep_chart, names = ["p50", "p99"];
      if (chart.slo_percentile && names.indexOf(chart.slo_percentile) < 0) names.push(chart.slo_percentile);
      lineChart(plot, {
        none: "too few samples for these percentiles",
        series: names.map(function (name, i) {
          return { name: name.replace("_", "."), color: COLORS[[4, 3, 5][i]],
                   points: levels.map(function (l) { return [l.level, latencyAt(l, name)]; }) };
        }),
        hlines: chart.slo_limit_us ? [[chart.slo_limit_us, DATA.sweep.slo]] : [],
        marks: sweepMarks(levels), x: levelAxis(levels), y: { label: "latency", fmt: fmtUs }
      });
    },
    throughput: function (plot, run) {
      var kept = fullIntervals(run.document);
      var drawn = lineChart(plot, { series: throughputSeries(run, kept.rows), marks: roundMarks(run.document), x: TIME, y: RATE_AXIS });
      leftOutNote(plot, kept.left, drawn);
    },
    // An open loop's requests sent late, per interval (a count: a short last interval's too).
    late: function (plot, run) {
      var doc = run.document, at = elapsed(doc);
      lineChart(plot, {
        none: "no interval counted its late sends",
        series: [{ name: "sent late", color: COLORS[1], points: doc.intervals.filter(function (r) {
          return r.late !== null && r.late !== undefined;
        }).map(function (r) { return [at(r.round, r.t_s), r.late]; }) }],
        marks: roundMarks(doc), x: TIME, y: { label: "requests sent late", fmt: fmtPlain }
      });
    },
    p99: function (plot, run) {
      var doc = run.document, at = elapsed(doc), ops = Object.keys(doc.ops), kept = fullIntervals(doc);
      var drawn = lineChart(plot, {
        none: "too few samples per interval for a p99 (1,000 needed)",
        series: ops.map(function (op) {
          return { name: op + " p99", color: opColor(ops, op), pattern: opPattern(ops, op), points: kept.rows.map(function (r) {
            return [at(r.round, r.t_s), r.ops[op] ? r.ops[op].p99_us : null];
          }) };
        }),
        marks: roundMarks(doc), x: TIME, y: { label: "p99 latency", fmt: fmtUs }
      });
      leftOutNote(plot, kept.left, drawn);
    },
    spectrum: function (plot, run) {
      var ops = Object.keys(run.document.ops).concat(["all ops"]);
      lineChart(plot, {
        none: "no latencies recorded",
        series: run.spectrum.map(function (s) {
          return { name: s.op + (s.kind === "service" ? " service time" : run.document.mode === "open" ? " latency (intended)" : ""),
                   color: opColor(ops, s.op), dash: s.kind === "service", pattern: opPattern(ops, s.op),
                   under: s.op === "all ops",
                   points: s.points };
        }),
        x: SPECTRUM_AXES.x, y: SPECTRUM_AXES.y
      });
    },
    outcomes: function (plot, run) {
      var ops = run.document.ops, queue = !!run.document.queue;
      // notes are counted beside an outcome: a bar of outcomes adds up to the op
      var noted = { late: true, mismatch: true, moved: true, ask: true };
      var words = { hit: "message", miss: "empty" };  // a queue's get, in the terminal's words
      stackChart(plot, { rows: Object.keys(ops).map(function (op) {
        var parts = Object.keys(ops[op].outcomes).filter(function (n) { return !noted[n]; })
          .map(function (n) {
            return { name: queue && op === "get" && words[n] ? words[n] : n, color: n, value: ops[op].outcomes[n] };
          });
        var total = parts.reduce(function (a, p) { return a + p.value; }, 0);
        return { label: op, parts: parts, total: total };
      }) });
    },
    e2e: function (plot, run) {
      var doc = run.document;
      lineChart(plot, {
        none: "no message received",
        series: [["e2e_p50_us", "p50", COLORS[4]], ["e2e_p99_us", "p99", COLORS[3]]].map(function (f) {
          return { name: "end to end " + f[1], color: f[2], points: doc.intervals.map(function (r) {
            return [r.t_s, r[f[0]] === undefined ? null : r[f[0]]];
          }) };
        }),
        x: TIME, y: { label: "end-to-end latency", fmt: fmtUs }
      });
    },
    "e2e-spectrum": function (plot, run) {
      lineChart(plot, {
        none: "no message received",
        series: [{ name: "end to end", color: COLORS[4], points: run.e2e_spectrum || [] }],
        x: SPECTRUM_AXES.x, y: SPECTRUM_AXES.y
      });
    },
    backlog: function (plot, run) {
      var queue = run.document.queue;
      lineChart(plot, {
        none: "no backlog reported",
        series: [
          { name: "acknowledged − received (client)", color: COLORS[0], points: queue.backlog.series },
          { name: "the server's count", color: COLORS[1], dash: true,
            points: run.document.intervals.map(function (r) { return [r.t_s, r.server_backlog]; }) }
        ],
        x: { label: "time from the start (s)", fmt: TIME.fmt }, y: { label: "messages", fmt: fmtPlain }
      });
    },
    "trace-rate": function (plot, run) {
      // Both lines put a rate at the end of the span it is over, as an interval's row is:
      // a trace's bucket of rows at its last second, the run's intervals at their ends.
      var doc = run.document, trace = doc.trace, rate = trace.profile.rate, kept = fullIntervals(doc);
      var speed = trace.speed === "max" ? null : trace.speed;
      var series = [{
        name: speed === null ? "trace (its own time)" : "trace × speed", color: COLORS[0],
        points: rate.points.map(function (p) {
          var end = Math.min(p[0] + rate.bucket_s, rate.span_s);
          return speed === null ? [end, p[1]] : [end / speed, p[1] * speed];
        })
      }];
      series.push({ name: speed === null ? "the run: completed (its own time, as fast as the server took it)" : "the run: completed",
        color: COLORS[1], dash: true, points: kept.rows.map(function (r) { return [r.t_s, r.per_s]; }) });
      var drawn = lineChart(plot, {
        none: "no rows", series: series,
        x: { label: speed === null ? "time (s): the trace's own, the run's from its start" : "time from the start (s)", fmt: TIME.fmt },
        y: RATE_AXIS
      });
      leftOutNote(plot, kept.left, drawn);
    },
    "server-ops": function (plot, run) {
      var doc = run.document, at = elapsed(doc), kept = fullIntervals(doc);
      if (!run.server.length) return empty(plot, "no server samples stored");
      var drawn = lineChart(plot, {
        series: [
          { name: "server", color: COLORS[0], points: run.server.map(function (s) { return [at(s.round, s.t_s), s.ops_per_s]; }) },
          { name: "client completions", color: COLORS[1], dash: true,
            points: kept.rows.map(function (r) { return [at(r.round, r.t_s), r.per_s]; }) }
        ],
        x: TIME, y: RATE_AXIS
      });
      leftOutNote(plot, kept.left, drawn);
    },
    "server-cpu": function (plot, run) {
      serverLine(plot, run, "cpu_cores", { name: "server CPU", color: COLORS[3], none: "no server CPU samples", label: "CPU (cores)" });
    },
    "server-connections": function (plot, run) {
      serverLine(plot, run, "connections", { name: "open connections", color: COLORS[4], none: "no connection counts sampled", label: "connections" });
    },
    "compare-throughput": function (plot) {
      barChart(plot, {
        bars: DATA.runs.map(function (run, i) {
          var ci = run.document.throughput_ci95_per_s;
          return { label: run.label, value: run.document.totals.throughput_per_s, color: COLORS[i % 8],
                   lo: ci ? ci[0] : undefined, hi: ci ? ci[1] : undefined };
        }),
        x: { label: "run (whiskers: 95% CI over rounds)" }, y: RATE_AXIS
      });
    },
    "compare-p99": function (plot) {
      barChart(plot, {
        none: "too few samples for a p99",
        bars: DATA.runs.map(function (run, i) {
          return { label: run.label, value: run.document.totals.latency_us.p99, color: COLORS[i % 8] };
        }),
        x: { label: "run" }, y: { label: "p99 latency", fmt: fmtUs }
      });
    },
    "compare-intervals": function (plot) {
      lineChart(plot, {
        series: DATA.runs.map(function (run, i) {
          var at = elapsed(run.document);
          return { name: run.label + " " + run.document.run_id, color: COLORS[i % 8],
                   points: run.document.intervals.map(function (r) { return [at(r.round, r.t_s), r.per_s]; }) };
        }),
        x: TIME, y: RATE_AXIS
      });
    },
    "compare-spectrum": function (plot) {
      lineChart(plot, {
        none: "no latencies recorded",
        series: DATA.runs.map(function (run, i) {
          var ops = Object.keys(run.document.ops);
          var points = spectrumOf(run, ops.length > 1 ? "all ops" : ops[0], "latency");
          return { name: run.label + " " + run.document.run_id, color: COLORS[i % 8], points: points };
        }),
        x: SPECTRUM_AXES.x, y: SPECTRUM_AXES.y
      });
    }
  };

  // Charts kept in files of their own (heatmap.js) register a maker, given these helpers.
  var HELPERS = { el: el, svgFor: svgFor, empty: empty, scale: scale, linearTicks: linearTicks,
                  fmtUs: fmtUs, TIME: TIME };
  Object.keys(window.kvbenchCharts || {}).forEach(function (name) {
    CHARTS[name] = window.kvbenchCharts[name](HELPERS);
  });

  Array.prototype.forEach.call(document.querySelectorAll("figure[data-chart]"), function (figure) {
    var plot = figure.querySelector(".plot");
    var name = figure.getAttribute("data-chart");
    var index = figure.getAttribute("data-run");
    try {
      CHARTS[name](plot, index === null ? null : DATA.runs[Number(index)], figure);
      figure.setAttribute("data-drawn", "yes");
    } catch (err) {
      console.error("kvbench: chart " + name + " failed: " + err);
      empty(plot, "this chart could not be drawn: " + err);
    }
  });
})();
