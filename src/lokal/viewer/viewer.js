/* lokal trace viewer: builds the waterfall from the run's events (embedded, or arriving over
   server-sent events when the page follows a live run). Every text from the trace goes in
   through textContent: model output is never read as HTML. */
(function () {
  "use strict";
  var payload = JSON.parse(document.getElementById("lokal-trace").textContent);
  var $ = function (id) { return document.getElementById(id); };
  var list = $("steps");
  var S = {
    steps: [], byKey: {}, callOwner: {}, pendingDecision: null, run: null, model: null,
    final: null, t0: null, tEnd: null, cur: -1, follow: true, timer: null,
    errorsOnly: false, query: "", decisions: 0, tools: 0
  };

  function h(tag, attrs) {
    var el = document.createElement(tag);
    if (attrs) {
      Object.keys(attrs).forEach(function (k) {
        var v = attrs[k];
        if (v === null || v === undefined || v === false) return;
        if (k === "text") el.textContent = String(v);
        else if (k === "class") el.className = v;
        else el.setAttribute(k, v === true ? "" : String(v));
      });
    }
    for (var i = 2; i < arguments.length; i++) {
      var c = arguments[i];
      if (c === null || c === undefined || c === false) continue;
      if (Array.isArray(c)) c.forEach(function (x) { if (x) el.appendChild(typeof x === "string" ? document.createTextNode(x) : x); });
      else el.appendChild(typeof c === "string" ? document.createTextNode(c) : c);
    }
    return el;
  }
  function json(v) { try { return typeof v === "string" ? v : JSON.stringify(v, null, 2); } catch (e) { return String(v); } }
  function secs(s) {
    if (s === null || s === undefined || isNaN(s)) return "";
    if (s < 1) return Math.round(s * 1000) + " ms";
    if (s < 60) return s.toFixed(s < 10 ? 2 : 1) + " s";
    return Math.floor(s / 60) + " min " + Math.round(s % 60) + " s";
  }
  function kv(pairs) {
    var dl = h("dl", { class: "kv" });
    pairs.forEach(function (p) { if (p && p[1] !== undefined && p[1] !== null && p[1] !== "") dl.appendChild(h("div", { style: "display:contents" }, h("dt", { text: p[0] }), h("dd", null, p[1] instanceof Node ? p[1] : String(p[1])))); });
    return dl;
  }
  function fold(summary, body, open) {
    return h("details", { open: !!open }, h("summary", { text: summary }), body);
  }

  /* ---- events to steps ---- */
  function newStep(kind, key, ev) {
    var step = { idx: S.steps.length, id: "step-" + (S.steps.length + 1), kind: kind, key: key, events: [ev], start: ev.time, end: ev.time };
    S.steps.push(step);
    if (key) S.byKey[key] = step;
    step.el = h("li", { class: "step " + kind, id: step.id, tabindex: "0", "data-kind": kind, "data-step": step.idx + 1 });
    list.appendChild(step.el);
    return step;
  }
  function decoding(ev) {
    var mode = ev.tool_calling;
    var attempts = ev.attempts || [];
    if (!mode) {
      if (attempts.some(function (a) { return a && a.staged; })) mode = "staged";
      else if (attempts.some(function (a) { return a && a.backend && a.backend.constraint; })) mode = "constrained";
      else mode = "free";
    }
    return { mode: mode, constrained: mode === "staged" || mode === "constrained" };
  }
  function addEvent(ev) {
    if (!ev || typeof ev !== "object") return;
    var t = typeof ev.time === "number" ? ev.time : null;
    if (S.t0 === null && t !== null) S.t0 = t - (ev.elapsed_s || 0);
    if (t !== null) S.tEnd = Math.max(S.tEnd || t, t);
    var step;
    switch (ev.type) {
      case "run_start":
        S.run = ev; S.t0 = t;
        step = newStep("start", "start", ev);
        break;
      case "model_load":
        if (!ev.component) S.model = ev.model;  // not the embeddings of tool preselection
        step = newStep("model", "model", ev);
        step.start = t - (ev.duration_s || 0);
        break;
      case "decision_start":
        step = newStep("decision", null, ev);
        step.pending = true; step.iteration = ev.iteration;
        S.pendingDecision = step;
        break;
      case "decision":
        step = S.pendingDecision;
        if (!step) { step = newStep("decision", null, ev); step.start = t - (ev.latency_ms || 0) / 1000; }
        else step.events.push(ev);
        S.pendingDecision = null;
        step.pending = false; step.decision = ev; step.end = t; step.iteration = ev.iteration;
        S.decisions += 1; step.number = S.decisions;
        var calls = (ev.ai_message && ev.ai_message.tool_calls) || [];
        calls.forEach(function (c) { if (c && c.id) S.callOwner[c.id] = step; });
        break;
      case "tool_start":
        step = newStep("tool", "tool:" + ev.iteration + ":" + ev.call_id + ":" + ev.index, ev);
        step.pending = true; step.start = ev.start_time || t; step.end = step.start;
        step.toolStart = ev;
        break;
      case "tool_end":
        step = S.byKey["tool:" + ev.iteration + ":" + ev.call_id + ":" + ev.index];
        if (!step) { step = newStep("tool", null, ev); step.toolStart = ev; step.start = ev.start_time || t; }
        else step.events.push(ev);
        step.pending = false; step.toolEnd = ev; step.end = ev.end_time || t;
        S.tools += 1;
        break;
      case "guard":
        step = newStep("guard", null, ev);
        break;
      case "final":
        S.final = ev;
        step = newStep("final", "final", ev);
        break;
      default:
        return;
    }
    if (step.kind === "tool") {
      var call = step.toolStart || ev;
      step.lane = call.index || 0;
      var parent = S.callOwner[call.call_id] || lastDecision();
      if (parent && !step.parent) {
        var item = Array.prototype.filter.call(parent.el.querySelectorAll("li[data-call]"), function (li) { return li.getAttribute("data-call") === call.call_id; })[0];
        if (item) item.appendChild(h("a", { href: "#" + step.id, class: "to-tool", text: " ↓ lane " + ((step.lane || 0) + 1) }));
      }
      step.parent = parent;
    }
    buildStep(step);
    header();
  }
  function lastDecision() {
    for (var i = S.steps.length - 1; i >= 0; i--) if (S.steps[i].kind === "decision") return S.steps[i];
    return null;
  }

  function isError(step) {
    var ev = step.events[step.events.length - 1];
    if (step.kind === "decision" && step.decision) {
      return step.decision.status !== "success" || (step.decision.attempts || []).some(function (a) { return a && a.error; });
    }
    if (step.kind === "tool" && step.toolEnd) return step.toolEnd.status !== "success" || !!step.toolEnd.timed_out;
    if (step.kind === "guard") return true;
    if (step.kind === "final") return ev.answered === false;
    return false;
  }

  /* ---- one step's element ---- */
  function buildStep(step) {
    var el = step.el;
    var wasOpen = el.querySelector("details.more") && el.querySelector("details.more").open;
    while (el.firstChild) el.removeChild(el.firstChild);
    var error = isError(step);
    var failed = error && !(step.kind === "decision" && step.decision && step.decision.status === "success");
    el.classList.toggle("is-error", failed);
    el.classList.toggle("retried", error && !failed);
    el.classList.toggle("pending", !!step.pending);
    el.setAttribute("data-error", error ? "true" : "false");
    var label = h("div", { class: "label" });
    var body = null;
    var ev = step.events[step.events.length - 1];
    if (step.kind === "start") {
      label.appendChild(h("span", { class: "kind", text: "run start" }));
      label.appendChild(h("span", { class: "facts", text: (ev.profile || "") + " · " + (ev.strategy || "") + " · " + (ev.tools || []).length + " tools" }));
      body = kv([["question", ev.question], ["tools", (ev.tools || []).join(", ")], ["max iterations", ev.max_iterations],
        ["history repairs", (ev.history_repairs || []).length ? json(ev.history_repairs) : ""],
        ["memory", ev.memory ? json(ev.memory) : ""]]);
    } else if (step.kind === "model") {
      label.appendChild(h("span", { class: "kind", text: "model load" }));
      label.appendChild(h("span", { class: "facts", text: (ev.model || "") + " · " + secs(ev.duration_s) }));
    } else if (step.kind === "decision") {
      buildDecision(step, label);
      body = step.decision ? decisionBody(step) : null;
    } else if (step.kind === "tool") {
      buildTool(step, label);
      body = step.toolEnd || step.toolStart ? toolBody(step) : null;
    } else if (step.kind === "guard") {
      label.appendChild(h("span", { class: "kind", text: "guard" }));
      label.appendChild(h("span", { class: "badge retry", text: ev.guard }));
      label.appendChild(h("span", { class: "facts", text: "at step " + ev.iteration }));
      body = kv([["guard", ev.guard], ["call", ev.call ? json(ev.call) : ""], ["times", ev.times], ["budget", ev.budget_s ? secs(ev.budget_s) : ""]]);
    } else if (step.kind === "final") {
      label.appendChild(h("span", { class: "kind", text: "final answer" }));
      label.appendChild(h("span", { class: "badge " + (ev.answered ? "ok" : "error"), text: ev.status }));
      label.appendChild(h("span", { class: "facts", text: ev.stop_reason + " · " + secs(ev.duration_s) }));
    }
    var track = h("div", { class: "track" }, h("span", { class: "bar" }));
    el.appendChild(h("div", { class: "row" }, label, track));
    if (step.kind === "final") el.appendChild(h("blockquote", { class: "answer", text: ev.answer || "(no answer)" }));
    if (body) {
      var more = fold("details", body, wasOpen);
      more.className = "more";
      el.appendChild(more);
    }
    step.text = (el.textContent + " " + json(step.events)).toLowerCase();
    position(step);
  }

  function buildDecision(step, label) {
    var d = step.decision;
    var title = "decision " + (step.number || "") + (step.iteration ? " · turn " + step.iteration : "");
    label.appendChild(h("span", { class: "kind", text: title }));
    if (!d) { label.appendChild(h("span", { class: "facts", text: "deciding…" })); return; }
    var usage = d.usage || {};
    var dec = decoding(d);
    var retries = Math.max(0, (d.attempts || []).length - 1);
    step.el.setAttribute("data-constrained", dec.constrained ? "true" : "false");
    step.el.setAttribute("data-retries", retries);
    label.appendChild(h("span", { class: "facts", text: secs(step.end - step.start) + " · " + (usage.prompt_tokens || 0) + "→" + (usage.completion_tokens || 0) + " tok" }));
    label.appendChild(h("span", { class: "badge" + (dec.constrained ? " constrained" : ""), text: dec.constrained ? "constrained (" + dec.mode + ")" : "free" + (dec.mode !== "free" ? " (" + dec.mode + ")" : "") }));
    if (d.parse && d.parse.format) label.appendChild(h("span", { class: "badge", text: d.parse.format }));
    if (d.parse && d.parse.repaired) label.appendChild(h("span", { class: "badge retry", text: "repaired" }));
    if (retries) label.appendChild(h("span", { class: "badge retry", text: retries + (retries === 1 ? " retry" : " retries") }));
    if (d.status !== "success") label.appendChild(h("span", { class: "badge error", text: (d.error && d.error.type) || "error" }));
    var calls = (d.ai_message && d.ai_message.tool_calls) || [];
    if (calls.length) label.appendChild(h("span", { class: "facts", text: "→ " + calls.map(function (c) { return c.name; }).join(", ") }));
    else if (d.ai_message && d.ai_message.content) label.appendChild(h("span", { class: "facts", text: "answers" }));
  }

  function decisionBody(step) {
    var d = step.decision, usage = d.usage || {}, dec = decoding(d), parse = d.parse || {};
    var box = h("div");
    box.appendChild(kv([["purpose", d.purpose], ["status", d.status], ["duration", secs(step.end - step.start)],
      ["model latency", d.latency_ms !== undefined ? Math.round(d.latency_ms) + " ms" : ""],
      ["tokens in / out", (usage.prompt_tokens || 0) + " / " + (usage.completion_tokens || 0)],
      ["decoding", dec.constrained ? "constrained (" + dec.mode + ")" : "free" + (dec.mode !== "free" ? " (" + dec.mode + ")" : "")],
      ["parse format", parse.format], ["repaired", parse.repaired ? "yes" : "no"],
      ["attempts", (d.attempts || []).length]]));
    if (d.error) box.appendChild(h("blockquote", { class: "error-text", text: (d.error.type || "error") + ": " + (d.error.message || "") }));
    var calls = (d.ai_message && d.ai_message.tool_calls) || [];
    if (calls.length) {
      var ul = h("ul", { class: "calls" });
      calls.forEach(function (c) {
        ul.appendChild(h("li", { "data-call": c.id || "" }, h("code", { text: c.id || "" }), " ", h("strong", { text: c.name }), " ", h("code", { text: json(c.args) })));
      });
      box.appendChild(h("div", null, h("strong", { text: "calls asked for" }), ul));
    } else if (d.ai_message && d.ai_message.content) {
      box.appendChild(h("blockquote", { class: "answer", text: d.ai_message.content }));
    }
    (d.attempts || []).forEach(function (a, i) {
      var err = a.error;
      var head = "attempt " + (a.attempt || i + 1) + (err ? " — " + err.type + (err.parse_kind && err.parse_kind !== err.type ? " (" + err.parse_kind + ")" : "") : " — ok") +
        (a.latency_ms !== undefined ? " · " + Math.round(a.latency_ms) + " ms" : "") + (a.finish_reason ? " · " + a.finish_reason : "");
      var att = h("div", { class: "attempt" + (err ? " failed" : "") }, h("div", { text: head }));
      if (err) att.appendChild(h("blockquote", { class: "error-text", text: err.message || "" }));
      att.appendChild(fold("raw output of attempt " + (a.attempt || i + 1), h("pre", { text: a.raw_text || "" })));
      if (a.corrective) att.appendChild(fold("corrective message sent back", h("pre", { text: a.corrective })));
      box.appendChild(att);
    });
    box.appendChild(fold("raw output", h("pre", { class: "raw", text: d.raw_text || "" })));
    var prompt = d.prompt || [];
    var msgs = h("div", { class: "prompt" });
    prompt.forEach(function (m) {
      msgs.appendChild(h("div", { class: "msg-role", text: (m.role || "") + (m.name ? " · " + m.name : "") }));
      var content = m.content;
      if (m.tool_calls && m.tool_calls.length) content = (content || "") + "\n" + json(m.tool_calls);
      msgs.appendChild(h("pre", { text: typeof content === "string" ? content : json(content) }));
    });
    var p = fold("prompt (" + prompt.length + " messages)", msgs);
    p.className = "prompt-fold";
    box.appendChild(p);
    return box;
  }

  function buildTool(step, label) {
    var s = step.toolStart, e = step.toolEnd;
    label.appendChild(h("span", { class: "kind", text: (s || e).name }));
    var parent = step.parent;
    var lane = h("span", { class: "lane-tag" }, "lane " + ((step.lane || 0) + 1) + " · " + ((s || e).call_id || "") + " ");
    if (parent) lane.appendChild(h("a", { href: "#" + parent.id, class: "from", text: "↑ decision " + (parent.number || "") }));
    label.appendChild(lane);
    step.el.setAttribute("data-lane", step.lane || 0);
    step.el.setAttribute("data-call-id", (s || e).call_id || "");
    if (parent) step.el.setAttribute("data-parent", parent.id);
    if (!e) { label.appendChild(h("span", { class: "facts", text: "running…" })); return; }
    label.appendChild(h("span", { class: "facts", text: secs(e.duration_s) }));
    label.appendChild(h("span", { class: "badge " + (e.status === "success" ? "ok" : "error"), text: e.timed_out ? "timed out" : e.status }));
    if (e.reused) label.appendChild(h("span", { class: "badge", text: "reused" }));
  }

  function toolBody(step) {
    var s = step.toolStart || {}, e = step.toolEnd;
    var box = h("div");
    box.appendChild(kv([["call", s.call_id], ["lane", (step.lane || 0) + 1], ["asked by", step.parent ? "decision " + (step.parent.number || "") : ""],
      ["duration", e ? secs(e.duration_s) : "running"], ["status", e ? e.status : ""]]));
    box.appendChild(h("div", null, h("strong", { text: "arguments" }), h("pre", { text: json(s.args || {}) })));
    if (e && e.error) box.appendChild(h("blockquote", { class: "error-text", text: e.error }));
    if (e && e.message) {
      var content = e.message.content, shown = content;
      try { var parsed = JSON.parse(content); shown = parsed && "output" in parsed ? json(parsed.output) : content; } catch (x) { /* as written */ }
      box.appendChild(fold("result", h("pre", { text: shown === undefined ? "" : shown })));
    }
    return box;
  }

  /* ---- geometry ---- */
  function position(step) {
    var bar = step.el.querySelector(".bar");
    if (!bar || S.t0 === null) return;
    var span = Math.max((S.tEnd || S.t0) - S.t0, 1e-6);
    var left = Math.min(Math.max(((step.start || S.t0) - S.t0) / span, 0), 1);
    var end = step.pending ? S.tEnd : step.end;
    var width = Math.max(((end || step.start) - (step.start || S.t0)) / span, 0);
    bar.style.left = (left * 100).toFixed(3) + "%";
    bar.style.width = (Math.min(width, 1 - left) * 100).toFixed(3) + "%";
    bar.title = secs((step.start || S.t0) - S.t0) + " → " + secs((end || step.start) - S.t0);
  }
  function layout() { S.steps.forEach(position); $("axis-end").textContent = S.tEnd !== null && S.t0 !== null ? secs(S.tEnd - S.t0) : ""; }

  /* ---- header ---- */
  function header() {
    var run = S.run || {}, fin = S.final;
    $("question").textContent = run.question || "(no question)";
    document.title = "lokal · " + (run.question || "run");
    var meta = $("run-meta");
    while (meta.firstChild) meta.removeChild(meta.firstChild);
    var usage = (fin && fin.usage) || S.steps.reduce(function (u, s) {
      var d = s.decision; if (d && d.usage) { u.prompt_tokens += d.usage.prompt_tokens || 0; u.completion_tokens += d.usage.completion_tokens || 0; }
      return u;
    }, { prompt_tokens: 0, completion_tokens: 0 });
    var pairs = [["profile", run.profile], ["model", S.model], ["strategy", run.strategy],
      ["status", fin ? fin.status + (fin.stop_reason ? " — " + fin.stop_reason : "") : "running"],
      ["answer", fin && fin.source ? fin.source : ""],
      ["duration", fin ? secs(fin.duration_s) : (S.tEnd !== null && S.t0 !== null ? secs(S.tEnd - S.t0) + "…" : "")],
      ["tokens", (usage.prompt_tokens || 0) + " in / " + (usage.completion_tokens || 0) + " out"],
      ["steps", S.decisions + " decisions, " + S.tools + " tool runs"],
      ["started", S.t0 ? new Date(S.t0 * 1000).toLocaleString() : ""]];
    pairs.forEach(function (p) { if (p[1]) meta.appendChild(h("div", { "data-field": p[0] }, h("dt", { text: p[0] }), h("dd", { text: p[1] }))); });
  }

  /* ---- replay, filters ---- */
  function matches(step) {
    if (S.errorsOnly && !isError(step)) return false;
    if (S.query && step.text.indexOf(S.query) < 0) return false;
    return true;
  }
  function render() {
    var n = S.steps.length, shown = 0;
    if (S.cur >= n) S.cur = n - 1;
    S.steps.forEach(function (step, i) {
      var ok = matches(step);
      if (ok) shown += 1;
      step.el.classList.toggle("filtered-out", !ok);
      step.el.classList.toggle("future", i > S.cur);
      step.el.classList.toggle("current", i === S.cur);
      if (i === S.cur) step.el.setAttribute("aria-current", "step"); else step.el.removeAttribute("aria-current");
    });
    var sc = $("scrubber");
    sc.max = Math.max(n - 1, 0); sc.value = Math.max(S.cur, 0);
    sc.setAttribute("aria-valuetext", "step " + (S.cur + 1) + " of " + n);
    $("step-counter").textContent = n ? "step " + (S.cur + 1) + " of " + n : "no steps yet";
    $("match-count").textContent = S.errorsOnly || S.query ? shown + " of " + n + " match" : "";
    $("empty").hidden = shown > 0 || !n;
    $("btn-prev").disabled = S.cur <= 0; $("btn-first").disabled = S.cur <= 0;
    $("btn-next").disabled = S.cur >= n - 1; $("btn-last").disabled = S.cur >= n - 1;
  }
  function go(i, scroll) {
    var n = S.steps.length;
    if (!n) return;
    S.cur = Math.max(0, Math.min(n - 1, i));
    S.follow = S.cur === n - 1;
    render();
    var el = S.steps[S.cur].el;
    if (scroll !== false && el.scrollIntoView && !el.classList.contains("filtered-out")) el.scrollIntoView({ block: "nearest" });
  }
  function step(dir) {
    var i = S.cur + dir;
    while (i >= 0 && i < S.steps.length && !matches(S.steps[i])) i += dir;
    if (i >= 0 && i < S.steps.length) go(i);
  }
  function edge(dir) {  // the first (dir 1) or last (dir -1) step that the filters show
    var i = dir > 0 ? 0 : S.steps.length - 1;
    while (i >= 0 && i < S.steps.length && !matches(S.steps[i])) i += dir;
    go(i >= 0 && i < S.steps.length ? i : (dir > 0 ? 0 : S.steps.length - 1));
  }
  function play(on) {
    if (on === undefined) on = !S.timer;
    if (S.timer) { clearInterval(S.timer); S.timer = null; }
    var b = $("btn-play");
    if (on) {
      if (S.cur >= S.steps.length - 1) go(0);
      S.timer = setInterval(function () {
        if (S.cur >= S.steps.length - 1) { play(false); return; }
        step(1);
      }, Number(payload.play_interval_ms) || 700);
    }
    b.setAttribute("aria-pressed", on ? "true" : "false");
    b.textContent = on ? "Pause" : "Play";
  }
  $("btn-first").addEventListener("click", function () { play(false); edge(1); });
  $("btn-prev").addEventListener("click", function () { play(false); step(-1); });
  $("btn-next").addEventListener("click", function () { play(false); step(1); });
  $("btn-last").addEventListener("click", function () { play(false); edge(-1); });
  $("btn-play").addEventListener("click", function () { play(); });
  $("scrubber").addEventListener("input", function (e) { play(false); go(Number(e.target.value)); });
  $("errors-only").addEventListener("change", function (e) { S.errorsOnly = e.target.checked; render(); });
  $("search").addEventListener("input", function (e) { S.query = e.target.value.trim().toLowerCase(); render(); });
  document.addEventListener("keydown", function (e) {
    var t = e.target, tag = t && t.tagName;
    if (e.key === "Escape" && t === $("search")) { t.value = ""; S.query = ""; render(); return; }
    if (tag === "INPUT" && (t.type === "search" || t.type === "text" || t.type === "range")) return;
    if (e.altKey || e.ctrlKey || e.metaKey) return;
    if (e.key === "ArrowRight" || e.key === "j") { e.preventDefault(); play(false); step(1); }
    else if (e.key === "ArrowLeft" || e.key === "k") { e.preventDefault(); play(false); step(-1); }
    else if (e.key === "Home") { e.preventDefault(); play(false); edge(1); }
    else if (e.key === "End") { e.preventDefault(); play(false); edge(-1); }
    else if (e.key === "p" || e.key === "P") { e.preventDefault(); play(); }
    else if (e.key === "/") { e.preventDefault(); $("search").focus(); }
    else if (e.key === "Enter" && t && t.classList && t.classList.contains("step")) {
      var more = t.querySelector("details.more"); if (more) { e.preventDefault(); more.open = !more.open; }
    }
  });
  list.addEventListener("click", function (e) {
    var li = e.target.closest && e.target.closest("li.step");
    if (li && !e.target.closest("summary, a, pre")) { var s = S.steps[Number(li.getAttribute("data-step")) - 1]; if (s && s.idx !== S.cur) go(s.idx, false); }
  });

  /* ---- feeding ---- */
  function feed(ev) {
    var follow = S.follow;
    addEvent(ev);
    layout();
    if (follow) S.cur = S.steps.length - 1;
    render();
  }
  (payload.events || []).forEach(function (ev) { addEvent(ev); });
  S.cur = S.steps.length - 1;
  layout(); header(); render();
  document.body.setAttribute("data-ready", "true");

  if (payload.live && payload.live.events_url && window.EventSource) {
    var status = $("live-status");
    var lastLine = 0;
    status.textContent = "● following the run";
    var source = new EventSource(payload.live.events_url);
    source.addEventListener("trace", function (msg) {
      var line = Number(msg.lastEventId || 0);
      if (line && line <= lastLine) return;  // a reconnect resends nothing already shown
      if (line) lastLine = line;
      feed(JSON.parse(msg.data));
    });
    source.addEventListener("end", function () {
      source.close();
      status.textContent = S.final ? "run finished" : "trace ended";
      document.body.setAttribute("data-live", "ended");
    });
    source.addEventListener("trace_error", function (msg) {
      source.close();
      status.textContent = "cannot read the trace: " + JSON.parse(msg.data).error;
    });
    source.onerror = function () { if (source.readyState !== 2) status.textContent = "connection lost, retrying…"; };
    source.onopen = function () { status.textContent = S.final ? "run finished" : "● following the run"; document.body.setAttribute("data-live", "open"); };
  }
})();
