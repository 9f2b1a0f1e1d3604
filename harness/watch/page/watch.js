// mplab watch: renders the server's pushed snapshots ("state") and running sample ("live").
"use strict";

const $ = (id) => document.getElementById(id);
const PLOT = { displayModeBar: false, responsive: true };
const COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf", "#7f7f7f"];
let energyLabel = "";  // the full label (with the power profile), in the header and on every energy chart
let energyKind = "";   // "emulated" or "measured", in every energy column's header
let lastState = null;
let live = { running: false };

function esc(s) {
  return String(s ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
}
// Three significant digits, no exponent for the values a campaign has.
function num(x, unit) {
  if (x === null || x === undefined) return "-";
  const v = Math.abs(x) >= 100 ? x.toFixed(0) : Number(x.toPrecision(3)).toString();
  return unit ? `${v} ${unit}` : v;
}
function ci(c) { return c ? `[${num(c[0])}, ${num(c[1])}]` : "-"; }
function duration(s) {
  if (s === null || s === undefined) return "-";
  if (s < 90) return `${s.toFixed(0)} s`;
  if (s < 5400) return `${(s / 60).toFixed(0)} min`;
  return `${(s / 3600).toFixed(1)} h`;
}
function clock(t) { return t ? new Date(t * 1000).toLocaleString() : "-"; }
function date(t) { return new Date(t * 1000); }
function table(el, head, rows) {
  el.innerHTML = "<thead><tr>" + head.map((h) => `<th>${esc(h)}</th>`).join("") + "</tr></thead><tbody>" +
    rows.map((r) => "<tr>" + r.map((c) => `<td>${c}</td>`).join("") + "</tr>").join("") + "</tbody>";
}

function statusOf(st) {
  const s = st.sessions[st.sessions.length - 1];
  if (!s) return ["not started", ""];
  if (s.end === "running") return [`running (pid ${s.pid})`, "running"];
  if (s.end === "killed") return ["stopped without an end record (killed?)", "killed"];
  if (s.end === "finished" && st.progress.pending === 0) return ["finished", "finished"];
  return [`${s.end}${s.reason ? ": " + s.reason : ""}`, s.end];
}

function renderHeader(st) {
  const p = st.progress;
  $("campaign").textContent = st.campaign;
  const [text, cls] = statusOf(st);
  $("status").textContent = text;
  $("status").className = "badge " + cls;
  $("testbed").textContent = `${st.testbed} testbed ${st.inventory ?? ""}`;
  $("energy").textContent = st.energy;
  $("path").textContent = st.path;
  $("n").textContent = `${p.recorded}/${p.planned}`;
  $("bar").style.width = p.planned ? `${(100 * p.recorded) / p.planned}%` : "0";
  $("ok").textContent = `${p.ok} ok`;
  $("failed").textContent = `${p.failed} failed`;
  $("flagged").textContent = `${p.flagged} flagged`;
  $("rate").textContent = p.rate_per_h === null ? "rate -" : `${num(p.rate_per_h)} samples/h`;
  $("eta").textContent = p.eta_s === null ? (p.running ? "ETA -" : "no ETA (not running)")
    : `ETA ${duration(p.eta_s)} (${clock(p.eta_at)})`;
  $("updated").textContent = `last update ${new Date().toLocaleTimeString()}`;
}

function renderCases(st) {
  table($("cases"), ["case", "ok", "failed", "flagged records", "Mbit/s (per receiver)", "95% interval", "n",
    `energy J (${energyKind})`, "95% interval", "n", `power W (${energyKind})`],
    st.cases.map((c) => [esc(c.case), c.ok, c.failed ? `<span class="failed">${c.failed}</span>` : 0, c.flagged,
      num(c.throughput_mbit), ci(c.throughput_ci), c.n_throughput, num(c.energy_j), ci(c.energy_ci), c.n_energy,
      num(c.power_w)]));
  const bars = (key, cikey) => [{
    type: "bar", x: st.cases.map((c) => c.case), y: st.cases.map((c) => c[key]),
    error_y: { type: "data", symmetric: false, array: st.cases.map((c) => (c[cikey] ? c[cikey][1] - c[key] : 0)),
      arrayminus: st.cases.map((c) => (c[cikey] ? c[key] - c[cikey][0] : 0)) }, marker: { color: "#3a7bd5" } }];
  Plotly.react("case-energy", bars("energy_j", "energy_ci"), {
    title: { text: `Energy per receiver (J), ${energyLabel}`, font: { size: 13 } },
    margin: { t: 36, b: 40, l: 50, r: 10 }, xaxis: { automargin: true }, yaxis: { rangemode: "tozero" } }, PLOT);
  Plotly.react("case-throughput", bars("throughput_mbit", "throughput_ci"), {
    title: { text: "Throughput per receiver (Mbit/s)", font: { size: 13 } },
    margin: { t: 36, b: 40, l: 50, r: 10 }, xaxis: { automargin: true }, yaxis: { rangemode: "tozero" } }, PLOT);
}

function renderEvents(st) {
  $("events-count").textContent = `(${st.events.length}${st.events.length >= 200 ? ", newest 200" : ""})`;
  $("events").innerHTML = st.events.map((e) => `<li class="${esc(e.kind)}"><span class="kind">${esc(e.kind)}</span>` +
    `<code>${esc(e.sample_id)}</code> ${esc(e.receiver)}: <span class="reason">${esc(e.text)}</span></li>`).join("") ||
    "<li>none so far</li>";
}

function renderDecisions(st) {
  $("decisions-section").hidden = st.decisions.length === 0;
  const fmt = (o) => (o ? Object.entries(o).map(([k, v]) => `${esc(k)} ${num(v)}`).join(", ") : "-");
  table($("decisions"), ["sample", "receiver", "policy", "assignment", "predicted energy J (by the model)",
    "caps Mbit/s", "steering", "decision ms"],
    st.decisions.map((d) => [esc(d.sample_id), esc(d.receiver), esc(d.policy), esc(d.assignment),
      fmt(d.predicted_energy_j), fmt(d.caps_mbit) + (d.caps_by ? ` (${esc(d.caps_by)})` : ""), esc(d.steering),
      d.decision_latency_s === null || d.decision_latency_s === undefined ? "-" : num(d.decision_latency_s * 1000)]));
}

function renderSessions(st) {
  table($("sessions"), ["#", "kind", "started", "pid", "samples to run", "end", "ended", "reason / outcome"],
    st.sessions.map((s, i) => [i + 1, esc(s.kind), clock(s.started_at), s.pid ?? "-", s.pending ?? "-",
      esc(s.end), clock(s.ended_at), esc(s.reason ?? (s.samples_run !== null && s.samples_run !== undefined
        ? `ran ${s.samples_run}, ${s.samples_failed ?? 0} failed` : ""))]));
}

// The sample panel: the running sample (live), or the last recorded one with its windows.
function sampleCharts(title, receivers, power, iperf, shapes) {
  const traces = (series) => receivers.map((rx, i) => ({
    type: "scatter", mode: "lines+markers", marker: { size: 4 }, name: rx, line: { color: COLORS[i % COLORS.length] },
    x: (series[rx] || []).map((p) => date(p[0])), y: (series[rx] || []).map((p) => p[1]) }));
  const layout = (text, unit) => ({ title: { text, font: { size: 13 } }, margin: { t: 36, b: 40, l: 50, r: 10 },
    yaxis: { title: { text: unit }, rangemode: "tozero" }, xaxis: { type: "date" }, shapes, showlegend: true,
    legend: { orientation: "h", y: -0.2 } });
  Plotly.react("power", traces(power), layout(`Meter power (W), ${energyKind}: ${title}`, "W"), PLOT);
  // Both charts over the same time span; until iperf3's JSON lands (at client exit) the throughput chart says so.
  const times = Object.values(power).flat().map((p) => p[0]);
  const ip = layout(`iperf3 intervals (Mbit/s): ${title}`, "Mbit/s");
  if (times.length) ip.xaxis.range = [date(Math.min(...times)), date(Math.max(...times))];
  if (!Object.values(iperf).some((v) => v && v.length)) {
    ip.annotations = [{ text: receivers.length ? "no iperf3 intervals yet: iperf3 writes them when its transfer ends"
      : "no sample yet", xref: "paper", yref: "paper", x: 0.5, y: 0.5, showarrow: false }];
    ip.yaxis.range = [0, 1];
  }
  Plotly.react("iperf", traces(iperf), ip, PLOT);
}
function band(win, color) {
  return win && win[0] && win[1] ? { type: "rect", xref: "x", yref: "paper", x0: date(win[0]), x1: date(win[1]),
    y0: 0, y1: 1, fillcolor: color, opacity: 0.12, line: { width: 0 } } : null;
}

function renderLive(lv) {
  if (!lv.running) { renderLastSample(); return; }
  drawn.lastSample = null;  // the panel now shows the running sample
  $("sample").firstElementChild.firstChild.textContent = "Running sample ";
  $("sample-id").textContent = `${lv.sample_id} (attempt ${lv.attempt})`;
  $("phase").textContent = `${lv.phase}; started ${duration(lv.now - lv.started_at)} ago; receivers ${lv.receivers.join(", ")}`;
  const shapes = Object.values(lv.transfer).map((w) => band(w, "#3a7bd5")).filter(Boolean);
  sampleCharts("running", lv.receivers, lv.power, lv.iperf, shapes);
  table($("sample-table"), [], []);
}

function renderLastSample() {
  const ls = lastState && lastState.last_sample;
  const key = JSON.stringify(ls);
  if (key === drawn.lastSample) return;
  drawn.lastSample = key;
  $("sample").firstElementChild.firstChild.textContent = "Last sample ";
  if (!ls) {
    $("sample-id").textContent = "";
    $("phase").textContent = "no sample recorded yet";
    sampleCharts("none yet", [], {}, {}, []);
    return;
  }
  $("sample-id").textContent = `${ls.sample_id} (${ls.status})`;
  $("phase").textContent = "no sample running; shaded: the transfer window (blue) and the radio tail until idle (orange)";
  const rxs = ls.receivers.map((r) => r.receiver);
  const pick = (k) => Object.fromEntries(ls.receivers.map((r) => [r.receiver, r[k]]));
  const shapes = ls.receivers.flatMap((r) => [band(r.transfer, "#3a7bd5"), band(r.tail, "#ff7f0e")]).filter(Boolean);
  sampleCharts(ls.sample_id, rxs, pick("power"), pick("iperf"), shapes);
  const carried = (r) => (r.iface_throughput_mbit ? Object.entries(r.iface_throughput_mbit)
    .map(([k, v]) => `${esc(k)} ${num(v)}`).join(", ") : "-");
  table($("sample-table"), ["receiver", "mode", "status", "Mbit/s", "interfaces (Mbit/s carried)",
    `energy J (${energyKind})`, `tail J (${energyKind})`, "transfer s", "tail s", "flags / error"],
    ls.receivers.map((r) => [esc(r.receiver), esc(r.mode), esc(r.status), num(r.throughput_mbit), carried(r),
      num(r.energy_j), num(r.tail_energy_j), r.transfer ? num(r.transfer[1] - r.transfer[0]) : "-",
      r.tail ? num(r.tail[1] - r.tail[0]) : "-", esc([...(r.flags || []), r.error].filter(Boolean).join("; "))]));
}

// Text first (n/N, the events with their reasons), charts after: drawing them is the slow part and must not
// hold up what a reader looks for first.
let chartsPending = false;
const drawn = { cases: null, lastSample: null };
function renderState(st) {
  lastState = st;
  energyLabel = st.energy;
  energyKind = st.energy_kind;
  document.body.dataset.stateNow = st.now;
  renderHeader(st);
  renderEvents(st);
  renderSessions(st);
  renderDecisions(st);
  document.body.dataset.version = st.version;
  if (!chartsPending) {
    chartsPending = true;
    setTimeout(() => {
      chartsPending = false;
      // Redraw only what changed: a chart costs the browser 50-200 ms on a busy machine.
      const cases = JSON.stringify(lastState.cases);
      if (cases !== drawn.cases) { drawn.cases = cases; renderCases(lastState); }
      if (!live.running) renderLastSample();
    }, 0);
  }
}

const source = new EventSource("/events");
source.addEventListener("state", (ev) => renderState(JSON.parse(ev.data)));
source.addEventListener("live", (ev) => { live = JSON.parse(ev.data); if (lastState) renderLive(live); });
source.onerror = () => { $("updated").textContent = "disconnected from mplab watch (reconnecting)"; };
