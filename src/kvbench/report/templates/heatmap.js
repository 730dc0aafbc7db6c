// kvbench latency heatmap (report/heatmap.py): per op, time on x, latency bands on y (log
// scale), colour = the share of the column's requests in the band; above it, lanes of
// markers (server restarts, connections lost, verdicts' causes). Registered here and drawn
// by report.js with its helpers (h), as every other chart.
(function () {
  "use strict";

  // viridis in 8 steps (matplotlib's, as Crameri et al. recommend): ordered in lightness,
  // read alike with every common colour-vision deficiency and in grey. Shares are
  // classed on a log scale, so the tail's 1-in-10,000 is seen beside the body's half.
  var CLASSES = [
    [0, "#440154", "< 0.01%"], [1e-4, "#46327e", "0.01–0.1%"], [1e-3, "#365c8d", "0.1–1%"],
    [1e-2, "#277f8e", "1–5%"], [0.05, "#1fa187", "5–10%"], [0.1, "#4ac16d", "10–25%"],
    [0.25, "#a0da39", "25–50%"], [0.5, "#fde725", "≥ 50%"]
  ];
  var LANES = [["restart", "restart"], ["connection", "conn lost"], ["verdict", "verdict"]];
  var LANE_H = 11, MARGIN = { l: 70, r: 16, b: 40 }, BAND_H_MIN = 4, BODY_H = 200;

  function colourOf(share) {
    var found = CLASSES[0][1];
    CLASSES.forEach(function (c) { if (share >= c[0]) found = c[1]; });
    return found;
  }

  function pct(share) { return (100 * share).toFixed(share >= 0.1 ? 1 : share >= 0.001 ? 2 : 4) + "%"; }

  function count(n) { return n.toLocaleString("en-US"); }

  // y ticks at the band edges that are 1, 2 or 5 times a power of ten (edges are
  // 10^(k/10): 10^0.3 is 1.995, 10^0.7 is 5.01); only decades when there are many.
  function bandTicks(edges, first) {
    var ticks = [], decades = (edges.length - 1) / 10;
    edges.forEach(function (v, i) {
      var k = (first + i - 1) % 10;
      if (first + i < 1) return;
      // labelled as the round figure they stand for (1.995 us reads "2 µs")
      if (k === 0 || (decades <= 2.5 && (k === 3 || k === 7))) ticks.push([i, Number(v.toPrecision(1))]);
    });
    return ticks;
  }

  function register(h) {
    return function (plot, run, figure) {
      var heat = run.heatmap, name = figure.getAttribute("data-op");
      var op = heat.ops.filter(function (o) { return o.op === name; })[0];
      if (!op || !op.columns.some(function (c) { return c.n > 0; })) return h.empty(plot, "no latencies recorded");
      var edges = heat.edges_us, bands = edges.length - 1;
      var bandH = Math.max(BAND_H_MIN, BODY_H / bands), top = 6 + LANES.length * LANE_H + 8;
      var height = Math.round(top + bands * bandH + MARGIN.b);
      var c = h.svgFor(plot, height);
      var box = { l: MARGIN.l, r: c.w - MARGIN.r, t: top, b: top + bands * bandH };
      var span = heat.span_s || 1;
      var x = h.scale("linear", 0, span, box.l, box.r);
      var rowY = function (i) { return box.b - (i + 1) * bandH; };  // band i of the shown ones
      var g = h.el("g", { "class": "heatmap" }, c.svg);
      h.el("rect", { x: box.l, y: box.t, width: box.r - box.l, height: box.b - box.t, "class": "heat-bg" }, g);
      op.columns.forEach(function (col, k) {
        var x0 = x(col.t0), width = Math.max(1, x(col.t1) - x0);
        var group = h.el("g", { "class": "heat-col", "data-col": k, "data-n": col.n, "data-ops": col.ops }, g);
        h.el("title", {}, group, h.TIME.fmt(col.t0) + "–" + h.TIME.fmt(col.t1) + ": " + count(col.ops) +
             " requests, " + count(col.n) + " with a latency; p50 " + (col.p50_us === null ? "n/a" : h.fmtUs(col.p50_us)) +
             ", p99 " + (col.p99_us === null ? "n/a" : h.fmtUs(col.p99_us)) +
             ", max " + (col.max_us === null ? "n/a" : h.fmtUs(col.max_us)));
        col.bands.forEach(function (b) {
          var i = b[0] - heat.first_band, share = b[1] / col.n;
          var cell = h.el("rect", { x: x0.toFixed(2), y: rowY(i).toFixed(2), width: (width + 0.4).toFixed(2),
                                    height: (bandH + 0.4).toFixed(2), fill: colourOf(share), "class": "heat-cell",
                                    "data-count": b[1], "data-share": share }, group);
          h.el("title", {}, cell, h.fmtUs(edges[i]) + "–" + h.fmtUs(edges[i + 1]) + ": " + count(b[1]) +
               " of " + count(col.n) + " (" + pct(share) + ")");
        });
      });
      axes(h, g, box, x, span, c.w, edges, heat.first_band, bandH);
      (heat.rounds_s || []).forEach(function (t, k) {  // as the other charts mark rounds
        h.el("line", { x1: x(t), x2: x(t), y1: box.t, y2: box.b, "class": "heat-round" }, g);
        h.el("text", { x: x(t) + 3, y: box.t + 10, "class": "mark-label" }, g, "round " + (k + 2));
      });
      marks(h, g, box, x, heat.markers);
      legend(plot);
      return true;
    };
  }

  function axes(h, g, box, x, span, width, edges, first, bandH) {
    var axis = h.el("g", { "class": "axis" }, g);
    bandTicks(edges, first).forEach(function (t) {
      var py = box.b - t[0] * bandH;  // the lower edge of band t[0]
      h.el("line", { x1: box.l - 4, x2: box.l, y1: py, y2: py }, axis);
      h.el("text", { x: box.l - 7, y: py + 3.5, "text-anchor": "end" }, axis, h.fmtUs(t[1]));
    });
    h.linearTicks(0, span, Math.max(3, Math.floor(width / 90))).filter(function (t) { return t <= span + 1e-9; })
      .forEach(function (t) {
        h.el("line", { x1: x(t), x2: x(t), y1: box.b, y2: box.b + 4 }, axis);
        h.el("text", { x: x(t), y: box.b + 16, "text-anchor": "middle" }, axis, h.TIME.fmt(t));
      });
    h.el("line", { x1: box.l, x2: box.r, y1: box.b, y2: box.b }, axis);
    h.el("text", { x: (box.l + box.r) / 2, y: box.b + 33, "text-anchor": "middle", "class": "label" }, axis, h.TIME.label);
    h.el("text", { x: 0, y: 0, "text-anchor": "middle", "class": "label",
                   transform: "translate(13," + (box.t + box.b) / 2 + ") rotate(-90)" }, axis, "latency (log scale)");
  }

  // One lane per kind above the plot (told apart by place and name, not by colour alone);
  // a restart also draws a line down through the heatmap.
  function marks(h, g, box, x, markers) {
    LANES.forEach(function (lane, row) {
      var y = 6 + row * LANE_H;
      h.el("text", { x: box.l - 7, y: y + 8, "text-anchor": "end", "class": "lane-label" }, g, lane[1]);
      h.el("line", { x1: box.l, x2: box.r, y1: y + LANE_H / 2, y2: y + LANE_H / 2, "class": "lane" }, g);
      markers.filter(function (m) { return m.kind === lane[0]; }).forEach(function (m) {
        var x0 = x(m.t0), width = Math.max(4, x(m.t1) - x0);
        var mark = h.el("rect", { x: x0, y: y + 1, width: width, height: LANE_H - 2, rx: 1.5,
                                  "class": "mark heat-mark " + lane[0], "data-x": m.t0 }, g);
        h.el("title", {}, mark, h.TIME.fmt(m.t0) + "–" + h.TIME.fmt(m.t1) + ": " + m.text);
        if (lane[0] === "restart") {
          h.el("line", { x1: x0 + width / 2, x2: x0 + width / 2, y1: box.t, y2: box.b, "class": "heat-restart" }, g);
        }
      });
    });
  }

  function legend(plot) {
    var box = document.createElement("div");
    box.className = "legend heat-legend";
    var label = document.createElement("span");
    label.textContent = "share of the interval's requests:";
    box.appendChild(label);
    CLASSES.forEach(function (c) {
      var span = document.createElement("span");
      var mark = document.createElement("i");
      mark.className = "box";
      mark.style.background = c[1];
      span.appendChild(mark);
      span.appendChild(document.createTextNode(c[2]));
      box.appendChild(span);
    });
    plot.appendChild(box);
  }

  window.kvbenchCharts = window.kvbenchCharts || {};
  window.kvbenchCharts.heatmap = register;
})();
