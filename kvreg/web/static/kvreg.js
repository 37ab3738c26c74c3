/* kvreg serve: sortable and filterable tables, the live what-if form and its chart.
   Plain browser JavaScript, no library: every figure comes from the server, this only asks and draws. */
(function () {
  "use strict";

  // ------------------------------------------------------------------ tables

  function sortTable(th) {
    var table = th.closest("table");
    var index = Array.prototype.indexOf.call(th.parentNode.children, th);
    var ascending = th.getAttribute("aria-sort") !== "ascending";
    table.querySelectorAll("th").forEach(function (h) { h.removeAttribute("aria-sort"); });
    th.setAttribute("aria-sort", ascending ? "ascending" : "descending");
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    var keys = rows.map(function (r) { return r.cells[index].getAttribute("data-sort"); });
    var numeric = keys.every(function (k) { return k === "" || !isNaN(Number(k)); });
    var order = rows.map(function (r, i) { return i; });
    order.sort(function (a, b) {
      var x = keys[a], y = keys[b], c;
      if (x === "" && y !== "") return 1;  // empty cells last, either way
      if (y === "" && x !== "") return -1;
      c = numeric ? Number(x) - Number(y) : x.localeCompare(y, undefined, {numeric: true, sensitivity: "base"});
      return (ascending ? c : -c) || a - b;
    });
    order.forEach(function (i) { body.appendChild(rows[i]); });
  }

  function filterTable(input) {
    var grid = input.closest(".grid");
    var words = input.value.toLowerCase().split(/\s+/).filter(Boolean);
    var shown = 0;
    grid.querySelectorAll("tbody tr").forEach(function (tr) {
      var text = tr.textContent.toLowerCase();
      var ok = words.every(function (w) { return text.indexOf(w) >= 0; });
      tr.hidden = !ok;
      if (ok) shown += 1;
    });
    var count = grid.querySelector("[data-count]");
    if (count) count.textContent = shown + (shown === 1 ? " row" : " rows");
  }

  document.addEventListener("click", function (e) {
    var th = e.target.closest("table.sortable th");
    if (th) sortTable(th);
    var copy = e.target.closest("button[data-copy]");
    if (copy && navigator.clipboard) {
      navigator.clipboard.writeText(document.querySelector(copy.getAttribute("data-copy")).textContent);
      copy.textContent = "copied";
      setTimeout(function () { copy.textContent = "copy"; }, 1200);
    }
  });
  document.addEventListener("keydown", function (e) {
    var th = e.target.closest && e.target.closest("table.sortable th");
    if (th && (e.key === "Enter" || e.key === " ")) { e.preventDefault(); sortTable(th); }
  });
  document.addEventListener("input", function (e) {
    if (e.target.matches("[data-filter]")) filterTable(e.target);
  });

  // ------------------------------------------------------------------ token counts

  function tokensLabel(n) {
    if (n >= 1048576 && n % 1048576 === 0) return n / 1048576 + "M";
    if (n >= 1024 && n % 1024 === 0) return n / 1024 + "K";
    if (n >= 1000000 && n % 1000000 === 0) return n / 1000000 + "m";
    if (n >= 1000 && n % 1000 === 0) return n / 1000 + "k";
    return n.toLocaleString("en-US");
  }

  function tokensValue(text) {  // the slider's guess only: the server parses what is sent
    var m = /^\s*([0-9.]+)\s*([kKmM]?)\s*$/.exec(text.split(",")[0] || "");
    if (!m) return null;
    var unit = {"": 1, k: 1e3, K: 1024, m: 1e6, M: 1048576}[m[2]];
    return Number(m[1]) * unit;
  }

  // ------------------------------------------------------------------ what-if

  var form = document.getElementById("whatif");
  if (!form) return;
  var answer = document.getElementById("answer");
  var slider = document.getElementById("context-slider");
  var context = document.getElementById("context");
  var model = document.getElementById("model");
  var asked = 0;
  var timer = null;

  function query() {
    var params = new URLSearchParams();
    Array.prototype.forEach.call(form.elements, function (el) {
      if (!el.name || el.disabled) return;
      if ((el.type === "checkbox" || el.type === "radio") && !el.checked) return;
      if (el.closest("[data-rule]") && el.closest("[data-rule]").hidden) return;
      var value = el.value.trim();
      if (value === "" || value === el.getAttribute("data-default")) return;
      params.append(el.name, value);
    });
    return params.toString();
  }

  function showRuleFields() {
    var rule = form.elements.rule.value;
    form.querySelectorAll("[data-rule]").forEach(function (el) {
      el.hidden = el.getAttribute("data-rule").split(" ").indexOf(rule) < 0;  // "vllm sglang": either engine
    });
  }

  function fitSlider() {
    // The slider runs from 2K to the model's claim, or on to the longest context typed (1M on a 128K model).
    var claim = Number(model.selectedOptions[0] && model.selectedOptions[0].getAttribute("data-claim")) || 131072;
    var typed = context.value || context.placeholder;
    var longest = 0;
    typed.split(",").forEach(function (part) {
      var v = tokensValue(part);
      if (v && v > longest) longest = v;
    });
    var top = Math.max(11, Math.floor(Math.log2(claim)), longest ? Math.ceil(Math.log2(longest)) : 0);
    slider.max = String(Math.min(top, 24));
    var t = tokensValue(typed.split(",")[0]);
    if (t) slider.value = String(Math.min(Math.max(Math.round(Math.log2(t)), 11), Number(slider.max)));
  }

  function ask() {
    var q = query();
    var mine = ++asked;
    form.setAttribute("aria-busy", "true");
    fetch("/whatif/answer?" + q, {headers: {"Accept": "text/html"}})
      .then(function (r) { return r.text(); })
      .then(function (html) {
        if (mine !== asked) return;  // a newer question was asked meanwhile
        answer.innerHTML = html;
        if (timer === null) form.removeAttribute("aria-busy");  // busy while another question waits
        history.replaceState(null, "", q ? "/?" + q : "/");
        drawChart();
      })
      .catch(function (err) {
        if (mine !== asked) return;
        form.removeAttribute("aria-busy");
        answer.innerHTML = '<p class="error" role="alert" id="error">The server did not answer: ' +
          String(err).replace(/[<>&]/g, "") + "</p>";
      });
  }

  function later() {
    clearTimeout(timer);
    form.setAttribute("aria-busy", "true");
    timer = setTimeout(function () { timer = null; ask(); }, 150);
  }

  form.addEventListener("input", function (e) {
    if (e.target === slider) {
      context.value = tokensLabel(Math.pow(2, Number(slider.value)));
    } else if (e.target === context) {
      fitSlider();  // the slider follows what is typed, as it is typed
    }
    later();
  });
  form.addEventListener("change", function (e) {
    if (e.target.name === "rule") showRuleFields();
    if (e.target === model) fitSlider();
    if (e.target === context) fitSlider();
    later();
  });
  form.addEventListener("submit", function (e) { e.preventDefault(); clearTimeout(timer); timer = null; ask(); });

  // ------------------------------------------------------------------ chart

  var COLORS = ["#2563eb", "#dc2626", "#059669", "#d97706", "#7c3aed", "#0891b2", "#db2777", "#4b5563"];
  var SVG = "http://www.w3.org/2000/svg";

  function el(name, attrs, parent, text) {
    var node = document.createElementNS(SVG, name);
    Object.keys(attrs).forEach(function (k) { node.setAttribute(k, attrs[k]); });
    if (text !== undefined) node.textContent = text;
    if (parent) parent.appendChild(node);
    return node;
  }

  function drawChart() {
    var holder = document.getElementById("chart");
    var body = document.getElementById("answer-body");
    var url = body && body.getAttribute("data-sweep");
    if (!url) { holder.innerHTML = '<p class="hint">No chart for this question.</p>'; return; }
    fetch(url).then(function (r) { return r.json(); }).then(function (rows) {
      if (!Array.isArray(rows)) {
        holder.innerHTML = "";
        var p = document.createElement("p");
        p.className = "hint";
        p.textContent = "No chart: " + (rows && rows.error ? rows.error : "the server did not answer");
        holder.appendChild(p);
        return;
      }
      plot(holder, rows);
    });
  }

  function plot(holder, rows) {
    var series = {}, names = [];
    rows.forEach(function (r) {
      var key = r.gpu + (r.kv_dtype ? " · " + r.kv_dtype : "");
      if (!series[key]) { series[key] = []; names.push(key); }
      series[key].push(r);
    });
    var xs = rows.map(function (r) { return r.context_tokens; });
    var ys = rows.map(function (r) { return r.max_concurrency; }).filter(function (y) { return y > 0; });
    holder.innerHTML = "";
    if (!ys.length) { holder.innerHTML = '<p class="hint">Nothing fits at any context on these GPUs.</p>'; return; }
    var W = 900, H = 320, L = 64, R = 16, T = 16, B = 44;
    var x0 = Math.log2(Math.min.apply(null, xs)), x1 = Math.log2(Math.max.apply(null, xs));
    var y0 = Math.floor(Math.log10(Math.min.apply(null, ys.concat([1])))), y1 = Math.ceil(Math.log10(Math.max.apply(null, ys)));
    if (y1 <= y0) y1 = y0 + 1;
    function X(v) { return L + (x1 === x0 ? 0.5 : (Math.log2(v) - x0) / (x1 - x0)) * (W - L - R); }
    function Y(v) { return T + (1 - (Math.log10(v) - y0) / (y1 - y0)) * (H - T - B); }
    var svg = el("svg", {viewBox: "0 0 " + W + " " + H, "class": "chart"}, holder);
    for (var e = y0; e <= y1; e++) {
      var v = Math.pow(10, e);
      el("line", {x1: L, x2: W - R, y1: Y(v), y2: Y(v), "class": "grid-line"}, svg);
      el("text", {x: L - 8, y: Y(v) + 4, "class": "tick", "text-anchor": "end"}, svg, v >= 1 ? v.toLocaleString("en-US") : String(v));
    }
    el("line", {x1: L, x2: W - R, y1: Y(1), y2: Y(1), "class": "one-line"}, svg);
    el("text", {x: W - R, y: Y(1) - 4, "class": "tick", "text-anchor": "end"}, svg, "1 sequence");
    var changes = [];
    var seen = {};
    xs.forEach(function (x) {
      if (seen[x]) return;
      seen[x] = true;
      el("text", {x: X(x), y: H - B + 18, "class": "tick", "text-anchor": "middle"}, svg, tokensLabel(x));
    });
    el("text", {x: (L + W - R) / 2, y: H - 6, "class": "axis", "text-anchor": "middle"}, svg, "context (tokens per sequence)");
    el("text", {x: 14, y: (T + H - B) / 2, "class": "axis", "text-anchor": "middle",
                transform: "rotate(-90 14 " + (T + H - B) / 2 + ")"}, svg, "max concurrency");
    names.forEach(function (name, i) {
      var color = COLORS[i % COLORS.length];
      var pts = series[name].filter(function (r) { return r.max_concurrency > 0; });
      if (pts.length) {
        el("polyline", {points: pts.map(function (r) { return X(r.context_tokens) + "," + Y(r.max_concurrency); }).join(" "),
                        fill: "none", stroke: color, "stroke-width": 2.5}, svg);
      }
      // Where --tp auto switches TP along the line: the concurrency jumps there, so say so on the chart.
      pts.forEach(function (r, k) {
        var before = pts[k - 1];
        if (!before || before.tp === r.tp) return;
        var x = X(r.context_tokens);
        var mark = el("g", {"class": "tp-change", "data-series": name, "data-context": r.context_tokens,
                            "data-from": before.tp, "data-to": r.tp}, svg);
        el("line", {x1: x, x2: x, y1: T + 20, y2: H - B}, mark);
        var near = x > W - R - 70;  // by the right edge: the label goes left of the line
        el("text", {x: near ? x - 4 : x + 4, y: T + 32 + 14 * (changes.length % 3), "text-anchor": near ? "end" : "start"},
           mark,
           "TP " + before.tp + " → " + r.tp);
        changes.push(name + ": TP " + before.tp + " up to " + tokensLabel(before.context_tokens) + ", TP " + r.tp +
                     " from " + tokensLabel(r.context_tokens));
      });
      pts.forEach(function (r) {
        var dot = el("circle", {cx: X(r.context_tokens), cy: Y(r.max_concurrency), r: 3.5, fill: color}, svg);
        el("title", {}, dot, name + " at " + tokensLabel(r.context_tokens) + ": " +
           r.max_concurrency.toLocaleString("en-US", {maximumFractionDigits: 2}) + " (TP " + r.tp + ")");
      });
      el("rect", {x: L + 12 + i * 150, y: T + 2, width: 12, height: 12, fill: color}, svg);
      el("text", {x: L + 28 + i * 150, y: T + 12, "class": "legend"}, svg, name);
    });
    if (changes.length) {
      var note = document.createElement("p");
      note.className = "chart-note";
      note.id = "tp-note";
      note.textContent = "TP changes along the line (--tp auto takes the smallest TP that holds one sequence at " +
        "each context, so the concurrency jumps there): " + changes.join("; ") + ".";
      holder.appendChild(note);
    }
  }

  showRuleFields();
  fitSlider();
  drawChart();
})();

// The plan form: an engine setting's field shows under the rule that reads it, as on the what-if page; a hidden
// one is disabled too, so the form never sends a setting the chosen rule would refuse.
(function () {
  var form = document.getElementById("plan-form");
  if (!form || !form.elements.rule) return;
  function showRuleFields() {
    var rule = form.elements.rule.value;
    form.querySelectorAll("[data-rule]").forEach(function (el) {
      var off = el.getAttribute("data-rule").split(" ").indexOf(rule) < 0;
      el.hidden = off;
      el.querySelectorAll("input, select").forEach(function (field) { field.disabled = off; });
    });
  }
  form.addEventListener("change", function (e) { if (e.target.name === "rule") showRuleFields(); });
  showRuleFields();
})();

// Procurement: the download links follow the chosen quarter.
(function () {
  var select = document.getElementById("report-quarter");
  if (!select) return;
  select.addEventListener("change", function () {
    document.querySelectorAll("a[data-report]").forEach(function (a) {
      a.href = "/report/" + encodeURIComponent(select.value) + "/" + a.getAttribute("data-report");
    });
  });
})();
