// Calendar assistant page: builds the form from /api/config, asks /api/suggest for one suggestion
// per target, sends the accepted or corrected values to /api/save, and draws /api/stats.
"use strict";

const COLORS = { duration: "#2f6fdb", day_of_week: "#3aa76d", start_time: "#d9822b", location: "#9b4dca" };
const state = { config: null, suggestions: null, nSuggest: 0, nSaved: 0, polling: null };
const $ = (sel) => document.querySelector(sel);

async function api(path, options = {}) {
  const response = await fetch(path, {
    headers: { "Content-Type": "application/json" },
    ...options,
  });
  const body = await response.json().catch(() => ({}));
  if (!response.ok) {
    const detail = typeof body.detail === "string" ? body.detail : JSON.stringify(body.detail);
    throw new Error((detail || `HTTP ${response.status}`).slice(0, 300));
  }
  return body;
}

function el(tag, attrs = {}, children = []) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "text") node.textContent = v;
    else node.setAttribute(k, v);
  }
  for (const child of children) node.appendChild(child);
  return node;
}

function buildForm(config) {
  const form = $("#meeting-form");
  for (const field of config.form) {
    const id = `f-${field.name}`;
    form.appendChild(el("label", { for: id, text: field.label }));
    let input;
    if (field.kind === "select") {
      input = el("select", { id, name: field.name });
      for (const choice of field.choices) input.appendChild(el("option", { value: choice, text: choice }));
    } else if (field.kind === "checkbox") {
      input = el("input", { id, name: field.name, type: "checkbox" });
    } else {
      input = el("input", { id, name: field.name, type: "text", placeholder: field.placeholder || "" });
    }
    form.appendChild(input);
    input.addEventListener("change", () => setSuggestions(null));
  }
}

function buildSuggestionRows(config) {
  const body = $("#suggestions tbody");
  for (const target of config.targets) {
    const list = el("datalist", { id: `dl-${target}` });
    for (const choice of config.choices[target]) list.appendChild(el("option", { value: choice }));
    const input = el("input", { id: `s-${target}`, list: `dl-${target}`, type: "text" });
    input.addEventListener("input", () => markChanged(target));
    const conf = el("div", { class: "conf" }, [
      el("div", { class: "bar" }, [el("div", { id: `bar-${target}`, style: "width:0%" })]),
      el("span", { id: `c-${target}`, text: "–" }),
    ]);
    body.appendChild(el("tr", {}, [
      el("td", { class: "name", text: config.labels[target] }),
      el("td", { class: "value" }, [input, list]),
      el("td", { class: "confidence" }, [conf]),
      el("td", { class: "alts", id: `top-${target}` }),
    ]));
  }
}

function markChanged(target) {
  const input = $(`#s-${target}`);
  const suggested = state.suggestions && state.suggestions[target] ? state.suggestions[target].value : null;
  input.classList.toggle("changed", suggested !== null && input.value.trim() !== String(suggested));
}

function readForm() {
  const form = {};
  for (const field of state.config.form) {
    const input = $(`#f-${field.name}`);
    form[field.name] = field.kind === "checkbox" ? input.checked : input.value;
  }
  return form;
}

function setSuggestions(suggestions) {
  state.suggestions = suggestions;
  for (const target of state.config.targets) {
    const s = suggestions ? suggestions[target] : null;
    const input = $(`#s-${target}`);
    input.value = s && s.value !== null ? String(s.value) : "";
    input.classList.remove("changed");
    const pct = s ? Math.round(100 * s.confidence) : 0;
    $(`#bar-${target}`).style.width = `${pct}%`;
    $(`#c-${target}`).textContent = s ? (s.value === null ? "no data yet" : `${pct}%`) : "–";
    const others = s ? s.top.slice(1).filter(([, p]) => p >= 0.01) : [];
    $(`#top-${target}`).textContent = others.length
      ? "or " + others.map(([label, p]) => `${label} ${Math.round(100 * p)}%`).join(", ")
      : "";
  }
}

function setStatus(text, isError = false) {
  const status = $("#status");
  status.textContent = text;
  status.classList.toggle("error", isError);
}

async function suggest() {
  $("#suggest").disabled = true;
  try {
    const answer = await api("/api/suggest", { method: "POST", body: JSON.stringify({ form: readForm() }) });
    setSuggestions(answer.suggestions);
    setStatus("Suggested — accept or change, then save.");
  } catch (err) {
    setStatus(`Suggest failed: ${err.message}`, true);
  } finally {
    $("#suggest").disabled = false;
    document.body.dataset.suggestions = String(++state.nSuggest);
  }
}

async function save() {
  const values = {};
  const suggestions = {};
  for (const target of state.config.targets) {
    values[target] = $(`#s-${target}`).value;
    const s = state.suggestions ? state.suggestions[target] : null;
    if (s) suggestions[target] = { value: s.value, prediction_id: s.prediction_id };
  }
  $("#save").disabled = true;
  try {
    const answer = await api("/api/save", {
      method: "POST",
      body: JSON.stringify({ form: readForm(), values, suggestions }),
    });
    const right = Object.values(answer.correct).filter(Boolean).length;
    setStatus(`Saved meeting #${answer.meeting} (${right}/4 suggestions kept).`);
    setSuggestions(null);
    document.body.dataset.saved = String(++state.nSaved);
    await refreshStats();
  } catch (err) {
    setStatus(`Save failed: ${err.message}`, true);
  } finally {
    $("#save").disabled = false;
  }
}

const fmt = (x) => (x === null || x === undefined ? "–" : `${Math.round(100 * x)}%`);

function drawCurve(curve, n) {
  const svg = $("#curve");
  const W = 340, H = 170, L = 38, R = 8, T = 8, B = 22;
  const x = (i) => L + (n <= 1 ? 0 : ((i - 1) / (n - 1)) * (W - L - R));
  const y = (a) => T + (1 - a) * (H - T - B);
  let out = "";
  for (const a of [0, 0.5, 1]) {
    out += `<line x1="${L}" x2="${W - R}" y1="${y(a)}" y2="${y(a)}" stroke="#e3e7ee"/>`;
    out += `<text x="${L - 4}" y="${y(a) + 4}" font-size="10" text-anchor="end" fill="#6b7380">${a * 100}%</text>`;
  }
  out += `<text x="${L}" y="${H - 6}" font-size="10" fill="#6b7380">1</text>`;
  out += `<text x="${W - R}" y="${H - 6}" font-size="10" text-anchor="end" fill="#6b7380">${n} meetings</text>`;
  for (const [target, points] of Object.entries(curve)) {
    if (!points.length) continue;
    const d = points.map(([i, a]) => `${x(i).toFixed(1)},${y(a).toFixed(1)}`).join(" ");
    out += `<polyline class="curve-${target}" fill="none" stroke="${COLORS[target]}" stroke-width="1.8" points="${d}"/>`;
  }
  svg.innerHTML = out;
}

async function refreshStats() {
  let stats;
  try {
    stats = await api("/api/stats");
  } catch (err) {
    setStatus(`Chorus unreachable: ${err.message}`, true);
    return;
  }
  $("#meeting-count").textContent = `${stats.meetings} meetings`;
  const body = $("#models tbody");
  body.innerHTML = "";
  for (const target of state.config.targets) {
    const m = stats.models[target];
    body.appendChild(el("tr", { id: `m-${target}` }, [
      el("td", { text: state.config.labels[target] }),
      el("td", { id: `n-${target}`, text: String(m.n_seen ?? 0) }),
      el("td", { id: `acc-${target}`, text: fmt(m.accuracy) }),
      el("td", { id: `last-${target}`, text: fmt(m.last10) }),
    ]));
  }
  drawCurve(stats.curve, stats.meetings);
  $("#curve-window").textContent = `suggestions kept, last ${stats.curve_window} meetings`;
  const recent = $("#recent tbody");
  recent.innerHTML = "";
  for (const r of stats.recent) {
    const cells = [el("td", { text: `#${r.i}` }), el("td", { text: r.source })];
    for (const target of state.config.targets) {
      cells.push(el("td", { class: r.correct[target] ? "ok" : "bad", text: r.final[target] }));
    }
    recent.appendChild(el("tr", {}, cells));
  }
  const sim = stats.simulation;
  const simStatus = $("#sim-status");
  simStatus.classList.toggle("error", Boolean(sim.error));
  if (sim.error) simStatus.textContent = `Simulation failed: ${sim.error}`;
  else if (sim.total) {
    simStatus.textContent = `${sim.running ? "Simulating" : "Simulated"} ${sim.done}/${sim.total} meetings` +
      (sim.drift_at ? ` (habits change after ${sim.drift_at})` : "");
  }
  $("#simulate").disabled = sim.running;
  if (!sim.running && state.polling) {
    clearInterval(state.polling);
    state.polling = null;
  }
}

async function simulate() {
  const body = {
    n: Number($("#sim-n").value),
    seed: Number($("#sim-seed").value),
    drift: $("#sim-drift").checked,
  };
  try {
    await api("/api/simulate", { method: "POST", body: JSON.stringify(body) });
    $("#simulate").disabled = true;
    if (!state.polling) state.polling = setInterval(refreshStats, 700);
  } catch (err) {
    const simStatus = $("#sim-status");
    simStatus.textContent = `Simulation failed: ${err.message}`;
    simStatus.classList.add("error");
  }
}

async function main() {
  state.config = await api("/api/config");
  buildForm(state.config);
  buildSuggestionRows(state.config);
  const head = $("#recent thead");
  head.appendChild(el("tr", {}, [el("th", { text: "#" }), el("th", { text: "by" }),
    ...state.config.targets.map((t) => el("th", { text: state.config.labels[t] }))]));
  const legend = $("#legend");
  for (const target of state.config.targets) {
    legend.appendChild(el("span", { style: `--c:${COLORS[target]}`, text: state.config.labels[target] }));
  }
  $("#suggest").addEventListener("click", suggest);
  $("#save").addEventListener("click", save);
  $("#simulate").addEventListener("click", simulate);
  setSuggestions(null);
  await refreshStats();
  document.body.dataset.ready = "1";
}

main().catch((err) => setStatus(`Could not start: ${err.message}`, true));
