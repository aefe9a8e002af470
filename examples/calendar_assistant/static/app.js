// Calendar assistant page: a week view per profile; a meeting dialog that asks the profile's Chorus
// models for suggestions (/suggest), checks the fields, and saves the chosen values (/meetings) as
// delayed labels; the side panel draws /stats. No framework, no CDN.
"use strict";

const COLORS = { duration: "#2f6fdb", day_of_week: "#2d8a57", start_time: "#d9822b", location: "#9b4dca" };
const DAY_START = 7, DAY_END = 20, SLOT_PX = 18; // the grid shows 07:00-20:00 in half hours
const LANE_PX = 60; // the narrowest a meeting beside others gets: its day widens instead
const state = {
  config: null, user: null, monday: null, suggestions: null, slot: null, touched: new Set(),
  counters: { suggestions: 0, saved: 0, refused: 0, stats: 0, weeks: 0 }, polling: null,
};
const $ = (sel) => document.querySelector(sel);

// ----------------------------------------------------------------------------- helpers
async function api(path, options = {}) {
  const response = await fetch(path, { headers: { "Content-Type": "application/json" }, ...options });
  const body = await response.json().catch(() => ({}));
  if (!response.ok) {
    const err = new Error((typeof body.detail === "string" ? body.detail : `HTTP ${response.status}`).slice(0, 300));
    err.errors = body.errors || [];
    throw err;
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

function bump(name) {
  document.body.dataset[name] = String(++state.counters[name]);
}

// Dates are handled as ISO strings "YYYY-MM-DD" and UTC Date objects (no time-zone surprises).
const iso = (d) => d.toISOString().slice(0, 10);
const parseIso = (s) => new Date(`${s}T00:00:00Z`);
const addDays = (d, n) => new Date(d.getTime() + n * 86400000);
function mondayOf(d) {
  return addDays(d, -((d.getUTCDay() + 6) % 7));
}
function today() {
  const now = new Date();
  return new Date(Date.UTC(now.getFullYear(), now.getMonth(), now.getDate()));
}
// The person's local time, "YYYY-MM-DDTHH:MM": suggestions are never before it.
function localNow() {
  const now = new Date(), two = (n) => String(n).padStart(2, "0");
  return `${iso(today())}T${two(now.getHours())}:${two(now.getMinutes())}`;
}
const MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
const DAY_NAMES = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"];
const dayLabel = (d) => `${DAY_NAMES[(d.getUTCDay() + 6) % 7]} ${d.getUTCDate()} ${MONTHS[d.getUTCMonth()]}`;
const minutes = (hhmm) => { const [h, m] = hhmm.split(":").map(Number); return 60 * h + m; };
const pct = (x) => (x === null || x === undefined ? "–" : `${Math.round(100 * x)}%`);

// ----------------------------------------------------------------------------- profiles
async function loadUsers(select) {
  const answer = await api("/api/users");
  const box = $("#user");
  box.innerHTML = "";
  for (const u of answer.users) {
    box.appendChild(el("option", { value: u.id, text: u.demo ? `${u.id} (simulated)` : u.id }));
  }
  const ids = answer.users.map((u) => u.id);
  const first = ids.find((id) => id !== answer.demo) || ids[0];
  await switchUser(ids.includes(select) ? select : (ids.includes(state.user) ? state.user : first));
}

async function switchUser(user) {
  state.user = user;
  $("#user").value = user;
  document.body.dataset.user = user;
  $("#who").textContent = user;
  $("#model-pattern").textContent = state.config.model_pattern.replace("<user>", user).replace("<target>", "*");
  const demo = user === state.config.demo;
  $("#sim-controls").hidden = !demo;
  $("#sim-hint").textContent = demo
    ? "Meetings from the synthetic calendar generator, saved into this demo profile only. Tick drift to see the user change habits half-way."
    : `The simulated user writes only to the "${state.config.demo}" profile, never to yours: switch to it to try.`;
  $("#flow").textContent = "";
  await Promise.all([renderWeek(), refreshStats()]);
}

async function addUser() {
  const id = $("#new-user").value.trim().toLowerCase();
  try {
    await api("/api/users", { method: "POST", body: JSON.stringify({ id }) });
    $("#new-user").value = "";
    $("#profile-status").textContent = "";
    await loadUsers(id);
  } catch (err) {
    $("#profile-status").textContent = err.message;
  }
}

async function resetUser() {
  if (!window.confirm(`Forget everything profile "${state.user}" taught its models?`)) return;
  try {
    await api(`/api/users/${state.user}/reset`, { method: "POST" });
    await switchUser(state.user);
  } catch (err) {
    $("#profile-status").textContent = err.message;
  }
}

// ----------------------------------------------------------------------------- week view
function buildWeekGrid() {
  const week = $("#week");
  week.innerHTML = "";
  week.appendChild(el("div", { class: "corner" }));
  for (let d = 0; d < 7; d++) week.appendChild(el("div", { class: "dayhead", id: `dayhead-${d}` }));
  const times = el("div", { class: "times" });
  for (let h = DAY_START; h < DAY_END; h++) times.appendChild(el("div", { class: "time", text: `${String(h).padStart(2, "0")}:00` }));
  week.appendChild(times);
  for (let d = 0; d < 7; d++) {
    const col = el("div", { class: "day", id: `day-${d}` });
    for (let s = 0; s < 2 * (DAY_END - DAY_START); s++) {
      const hh = DAY_START + Math.floor(s / 2), mm = s % 2 ? "30" : "00";
      const slot = el("div", { class: "slot", "data-day": String(d), "data-time": `${String(hh).padStart(2, "0")}:${mm}` });
      slot.addEventListener("click", () => openDialog({ day: d, time: slot.dataset.time }));
      col.appendChild(slot);
    }
    week.appendChild(col);
  }
}

async function renderWeek() {
  const monday = state.monday;
  document.body.dataset.week = iso(monday);
  const sunday = addDays(monday, 6);
  $("#week-label").textContent = `${monday.getUTCDate()} ${MONTHS[monday.getUTCMonth()]} – ${sunday.getUTCDate()} ${MONTHS[sunday.getUTCMonth()]} ${sunday.getUTCFullYear()}`;
  const now = localNow();
  for (let d = 0; d < 7; d++) {
    const date = addDays(monday, d);
    const head = $(`#dayhead-${d}`);
    head.textContent = dayLabel(date);
    head.classList.toggle("today", iso(date) === now.slice(0, 10));
    for (const slot of $(`#day-${d}`).querySelectorAll(".slot")) { // gone by: greyed
      slot.classList.toggle("past", `${iso(date)}T${slot.dataset.time}` < now);
    }
  }
  const answer = await api(`/api/users/${state.user}/meetings?start=${iso(monday)}&days=7`);
  if (answer.user !== state.user || monday !== state.monday) return; // a newer view was asked for
  for (const old of document.querySelectorAll("#week .event")) old.remove();
  const byDay = Array.from({ length: 7 }, () => []);
  for (const m of answer.meetings) byDay[(parseIso(m.date).getUTCDay() + 6) % 7].push(m);
  const lanes = byDay.map((meetings, d) => placeDay($(`#day-${d}`), meetings));
  // A day with meetings side by side is as many times wider as it has lanes, and never narrower
  // than LANE_PX a lane (the week scrolls sideways before a meeting becomes a sliver).
  $("#week").style.gridTemplateColumns = `44px ${lanes.map((n) => `minmax(${n * LANE_PX}px, ${n}fr)`).join(" ")}`;
  bump("weeks");
}

// Overlapping meetings share their day's width: greedy lanes within each cluster of overlaps.
// Beside others a meeting is narrow: its title wraps, and it is drawn at least an hour tall (90
// minutes beside two or more) so that title and time show; the lanes are then laid out again
// with those heights. Returns the most lanes
// a cluster needed (1 for a day without overlaps): renderWeek widens the day by it.
function placeDay(column, meetings) {
  const items = meetings.map((m) => {
    const start = minutes(m.final.start_time);
    return { m, start, end: start + Math.max(15, Number(m.final.duration) || 30), narrow: false };
  }).sort((a, b) => a.start - b.start || a.end - b.end);
  let clusters = lanesOf(items);
  if (clusters.some(([, n]) => n >= 2)) {
    for (const [cluster, n] of clusters) {
      if (n < 2) continue;
      for (const it of cluster) { it.narrow = true; it.end = Math.max(it.end, it.start + (n >= 3 ? 90 : 60)); }
    }
    clusters = lanesOf(items);
  }
  let most = 1;
  for (const [cluster, n] of clusters) {
    for (const it of cluster) draw(column, it, n);
    most = Math.max(most, n);
  }
  return most;
}

function lanesOf(items) { // [[cluster, number of lanes]], each item's .lane set
  const out = [];
  let cluster = [], clusterEnd = -1;
  const flush = () => {
    const lanes = [];
    for (const it of cluster) {
      let lane = lanes.findIndex((end) => end <= it.start);
      if (lane < 0) { lane = lanes.length; lanes.push(0); }
      lanes[lane] = it.end;
      it.lane = lane;
    }
    out.push([cluster, lanes.length]);
    cluster = [];
  };
  for (const it of items) {
    if (it.start >= clusterEnd && cluster.length) flush();
    cluster.push(it);
    clusterEnd = Math.max(clusterEnd, it.end);
  }
  if (cluster.length) flush();
  return out;
}

function draw(column, it, nLanes) {
  const top = Math.max(0, (it.start - DAY_START * 60) / 30 * SLOT_PX);
  const bottom = Math.min(2 * (DAY_END - DAY_START) * SLOT_PX, (it.end - DAY_START * 60) / 30 * SLOT_PX);
  const m = it.m;
  const kept = Object.values(m.correct).filter(Boolean).length;
  const block = el("div", {
    class: `event ${m.source}${it.narrow ? " narrow" : ""}`,
    title: `${m.title}\n${m.final.start_time}, ${m.final.duration} min, ${m.final.location}\n${kept}/4 suggestions kept`,
    style: `top:${top}px;height:${Math.max(SLOT_PX - 2, bottom - top - 2)}px;` +
      `left:${(100 * it.lane) / nLanes}%;width:calc(${100 / nLanes}% - 3px)`,
  }, [
    el("b", { text: m.title }),
    el("span", { text: ` ${m.final.start_time} · ${m.final.duration}′ · ${m.final.location}` }),
  ]);
  block.addEventListener("click", (e) => e.stopPropagation());
  column.appendChild(block);
}

// ----------------------------------------------------------------------------- the dialog
function fillSelect(select, values, blank) {
  select.innerHTML = "";
  if (blank !== undefined) select.appendChild(el("option", { value: "", text: blank }));
  for (const v of values) select.appendChild(el("option", { value: v, text: v }));
}

function buildDialog(config) {
  fillSelect($("#m-event_type"), config.kinds);
  fillSelect($("#m-position"), config.positions, "role…");
  fillSelect($("#m-department"), config.departments, "department…");
  fillSelect($("#m-topic"), config.topics, "topic…");
  const L = config.limits;
  $("#m-title").maxLength = L.title_chars;
  $("#m-group").maxLength = L.name_chars;
  $("#v-location").maxLength = L.location_chars;
  Object.assign($("#v-duration"), { min: L.duration_min, max: L.duration_max });
  for (const [target, values] of Object.entries(config.suggested_values)) {
    const list = el("datalist", { id: `dl-${target}` });
    for (const v of values) list.appendChild(el("option", { value: v }));
    document.body.appendChild(list);
  }
  for (const name of ["title", "event_type", "attendees", "group", "position", "department", "topic", "lunchtime", "requested_by_user", "recurring"]) {
    $(`#m-${name}`).addEventListener("change", descriptionChanged);
  }
  for (const target of config.targets) {
    const input = $(`#v-${target}`);
    const onEdit = () => {
      state.touched.add(target);
      markChanged(target);
      clearError(target);
      if (![...document.querySelectorAll(".err")].some((n) => n.textContent)) setStatus("");
    };
    input.addEventListener("input", onEdit);
    input.addEventListener("change", onEdit);
  }
}

function openDialog(slot = null) {
  $("#meeting-form").reset();
  const daySelect = $("#v-day_of_week");
  daySelect.innerHTML = "";
  daySelect.appendChild(el("option", { value: "", text: "day…" }));
  for (let d = 0; d < 7; d++) {
    const date = addDays(state.monday, d);
    daySelect.appendChild(el("option", { value: iso(date), "data-day": state.config.days[d], text: dayLabel(date) }));
  }
  state.touched = new Set();
  state.meetingId = newMeetingId(); // a retried save of this meeting is not learned twice
  setSuggestions(null, null);
  for (const node of document.querySelectorAll(".err")) node.textContent = "";
  for (const node of document.querySelectorAll(".invalid")) node.classList.remove("invalid");
  if (slot) { // the clicked slot is the user's own choice of day and start
    daySelect.value = iso(addDays(state.monday, slot.day));
    $("#v-start_time").value = slot.time;
    state.touched.add("day_of_week").add("start_time");
  }
  setStatus("");
  $("#dialog").hidden = false;
  document.body.dataset.dialog = "open";
  $("#m-title").focus();
}

function newMeetingId() {
  if (window.crypto && crypto.randomUUID) return crypto.randomUUID().replaceAll("-", "");
  return Array.from({ length: 4 }, () => Math.random().toString(36).slice(2, 10)).join("");
}

function closeDialog() {
  $("#dialog").hidden = true;
  document.body.dataset.dialog = "closed";
}

function readDetails() {
  const details = {};
  for (const name of ["title", "event_type", "attendees", "group", "position", "department", "topic"]) details[name] = $(`#m-${name}`).value.trim();
  for (const name of ["lunchtime", "requested_by_user", "recurring"]) details[name] = $(`#m-${name}`).checked;
  return details;
}

function currentValue(target) {
  if (target === "day_of_week") {
    const option = $("#v-day_of_week").selectedOptions[0];
    return option && option.value ? option.dataset.day : "";
  }
  return $(`#v-${target}`).value.trim();
}

function setValue(target, value) {
  if (target === "day_of_week") {
    const option = [...$("#v-day_of_week").options].find((o) => o.dataset.day === value);
    $("#v-day_of_week").value = option ? option.value : "";
  } else {
    $(`#v-${target}`).value = value;
  }
}

function shown(target, value) {
  if (target === "duration") return `${value} min`;
  if (target === "day_of_week") return DAY_NAMES[state.config.days.indexOf(value)] || value;
  return value;
}
const plural = (n, word) => `${n} ${word}${n === 1 ? "" : "s"}`;

function dayOption(date) { // the day list holds the week shown, and a suggested day beyond it
  const select = $("#v-day_of_week");
  if (![...select.options].some((o) => o.value === date)) {
    const day = state.config.days[(parseIso(date).getUTCDay() + 6) % 7];
    select.appendChild(el("option", { value: date, "data-day": day, text: dayLabel(parseIso(date)) }));
  }
}

const slotText = (date, start) => `${dayLabel(parseIso(date))} ${start}`;

// The models' day and start, moved to the next free slot when theirs is past or taken (the server
// says so in "slot"): the fields get the free slot, the note says why, "use" takes the models' own.
function showSlot(slot) {
  const note = $("#slot-note");
  note.textContent = "";
  note.dataset.reason = "";
  if (!slot || !slot.moved && !slot.taken_by.length) return null;
  const preferred = slotText(slot.preferred.date, slot.preferred.start_time);
  const reasons = [];
  if (slot.past) reasons.push("that has passed");
  if (slot.taken_by.length) {
    const who = [...new Set(slot.taken_by.map((b) => `“${b.title}” ${b.start_time}–${b.end_time}`))].join(", ");
    reasons.push(`${slot.past ? "a week later it" : "it"} is taken by ${who}`);
  }
  const where = !slot.free ? "no free slot in the next two weeks: saving it double-books"
    : `suggesting ${slotText(slot.date, slot.start_time)}, ` +
      (slot.taken_by.length ? "the next free slot" : "the same day and time a week later");
  note.textContent = `⚠ Chorus prefers ${preferred}, but ${reasons.join("; ")} — ${where}.`;
  note.dataset.reason = [slot.past ? "past" : "", slot.taken_by.length ? "taken" : ""].filter(Boolean).join(" ");
  return slot;
}

function setSuggestions(suggestions, slot = null) {
  state.suggestions = suggestions;
  const own = state.touched.has("day_of_week") || state.touched.has("start_time");
  state.slot = suggestions && !own ? showSlot(slot) : showSlot(null);
  for (const target of state.config.targets) {
    const s = suggestions ? suggestions[target] : null;
    const hint = $(`#h-${target}`);
    hint.innerHTML = "";
    hint.dataset.value = s && s.value !== null ? String(s.value) : "";
    if (!s) continue;
    if (s.value === null) {
      hint.appendChild(el("span", { text: "Chorus: no suggestion yet — it learns from your first meeting" }));
      continue;
    }
    const meetings = plural(s.learned_from, "meeting");
    hint.append(
      "Chorus: ", el("b", { text: shown(target, s.value) }), " · ",
      el("span", { id: `c-${target}`, class: "confidence", text: pct(s.confidence) }),
      el("span", { id: `n-${target}`, text: ` · from ${meetings}, ${s.with_value} of them with this value` }),
    );
    const others = s.top.slice(1).filter(([, p]) => p >= 0.05);
    if (others.length) {
      hint.append(" · or ");
      others.forEach(([label, p], i) => {
        const pick = el("button", { type: "button", class: "chip", text: `${shown(target, label)} ${pct(p)}` });
        pick.addEventListener("click", () => { setValue(target, label); state.touched.add(target); markChanged(target); clearError(target); });
        if (i) hint.append(", ");
        hint.append(pick);
      });
    }
    const moved = state.slot && state.slot.moved && ["day_of_week", "start_time"].includes(target);
    if (state.touched.has(target)) {
      const use = el("button", { type: "button", class: "link", text: "use" });
      use.addEventListener("click", () => { setValue(target, String(s.value)); state.touched.delete(target); markChanged(target); });
      hint.append(" ", use);
    } else if (moved) { // the free slot goes in the field; "use" takes the models' own anyway
      const free = target === "day_of_week" ? state.slot.date : state.slot.start_time;
      const own = target === "day_of_week" ? state.slot.preferred.date : state.slot.preferred.start_time;
      if (target === "day_of_week") { dayOption(free); dayOption(own); }
      $(`#v-${target}`).value = free;
      if (free !== own) {
        const use = el("button", { type: "button", class: "link", text: `use ${shown(target, String(s.value))} anyway` });
        use.addEventListener("click", () => { $(`#v-${target}`).value = own; state.touched.add(target); markChanged(target); });
        hint.append(" ", use);
      }
    } else {
      setValue(target, String(s.value));
    }
    if (s.because) hint.append(el("div", { id: `b-${target}`, class: "because", text: s.because }));
  }
  for (const target of state.config.targets) markChanged(target);
}

function markChanged(target) {
  const s = state.suggestions ? state.suggestions[target] : null;
  const slot = state.slot && state.slot.moved ? state.slot : null;
  let changed = Boolean(s && s.value !== null && currentValue(target) !== String(s.value));
  if (slot && target === "day_of_week") changed = $("#v-day_of_week").value !== slot.date;
  if (slot && target === "start_time") changed = currentValue(target) !== slot.start_time;
  $(`#v-${target}`).classList.toggle("changed", changed);
}

function descriptionChanged(event) {
  clearError(event.target.id.slice(2));
  if (state.suggestions) {
    setSuggestions(null, null);
    setStatus("The description changed: ask for suggestions again (or save as is).");
  }
}

function setStatus(text, isError = false) {
  const status = $("#status");
  status.textContent = text;
  status.classList.toggle("error", isError);
}

function inputOf(field) {
  return $(`#v-${field}`) || $(`#m-${field}`);
}

function clearError(field) {
  const node = $(`#e-${field}`);
  if (node) node.textContent = "";
  const input = inputOf(field);
  if (input) input.classList.remove("invalid");
}

function showErrors(errors) {
  for (const node of document.querySelectorAll(".err")) node.textContent = "";
  for (const node of document.querySelectorAll(".invalid")) node.classList.remove("invalid");
  for (const { field, message } of errors) {
    const name = field.split(".").pop() === "date" ? "day_of_week" : field.split(".").pop();
    const node = $(`#e-${name}`) || $("#status");
    node.textContent = message;
    const input = inputOf(name);
    if (input) input.classList.add("invalid");
  }
}

async function suggest() {
  $("#suggest").disabled = true;
  try {
    const ask = { details: readDetails(), week: iso(state.monday), now: localNow() };
    const duration = $("#v-duration").value.trim();
    if (state.touched.has("duration") && /^\d+$/.test(duration)) ask.duration = Number(duration);
    const answer = await api(`/api/users/${state.user}/suggest`, { method: "POST", body: JSON.stringify(ask) });
    setSuggestions(answer.suggestions, answer.slot);
    const ids = Object.values(answer.suggestions).filter((s) => s.prediction_id).length;
    $("#flow").textContent = `1 · Predict: your 4 models answered (${ids} prediction ids kept for the labels).`;
    setStatus("Accept or edit, then save.");
  } catch (err) {
    if (err.errors && err.errors.length) showErrors(err.errors);
    setStatus(`Suggest failed: ${err.message}`, true);
  } finally {
    $("#suggest").disabled = false;
    bump("suggestions");
  }
}

// The same bounds as the server's (served in /api/config): refuse before sending.
function validate(details) {
  const L = state.config.limits, errors = [];
  const duration = $("#v-duration").value.trim();
  if (!/^\d+$/.test(duration) || +duration < L.duration_min || +duration > L.duration_max) {
    errors.push({ field: "duration", message: `a whole number of minutes, ${L.duration_min}-${L.duration_max}` });
  }
  if (!$("#v-day_of_week").value) errors.push({ field: "day_of_week", message: "pick a day" });
  const start = $("#v-start_time").value.trim();
  const match = /^([01]?\d|2[0-3]):([0-5]\d)$/.exec(start);
  if (!match) errors.push({ field: "start_time", message: "a time HH:MM, 00:00-23:59" });
  else if (/^\d+$/.test(duration) && minutes(start) + +duration > 24 * 60) {
    errors.push({ field: "duration", message: "the meeting would end after midnight" });
  }
  const location = $("#v-location").value.trim();
  if (!location || location.length > L.location_chars) errors.push({ field: "location", message: `1-${L.location_chars} characters` });
  if (details.title.length > L.title_chars) errors.push({ field: "title", message: `at most ${L.title_chars} characters` });
  const people = details.attendees.split(",").map((p) => p.trim()).filter(Boolean);
  if (people.length > L.attendees) errors.push({ field: "attendees", message: `at most ${L.attendees} attendees` });
  if (people.some((p) => p.length > L.name_chars)) errors.push({ field: "attendees", message: `a name is at most ${L.name_chars} characters` });
  return errors;
}

async function save() {
  const details = readDetails();
  const errors = validate(details);
  if (errors.length) {
    showErrors(errors);
    setStatus("Not saved: fix the fields marked in red.", true);
    bump("refused");
    return;
  }
  const choice = {
    date: $("#v-day_of_week").value,
    start_time: $("#v-start_time").value.trim(),
    duration: Number($("#v-duration").value),
    location: $("#v-location").value.trim(),
  };
  const suggestions = {};
  for (const target of state.config.targets) {
    const s = state.suggestions ? state.suggestions[target] : null;
    if (s) suggestions[target] = { value: s.value, prediction_id: s.prediction_id };
  }
  $("#save").disabled = true;
  try {
    const answer = await api(`/api/users/${state.user}/meetings`, {
      method: "POST", body: JSON.stringify({ details, choice, suggestions, meeting_id: state.meetingId }),
    });
    const kept = Object.values(answer.correct).filter(Boolean).length;
    const delayed = Object.values(answer.sent).filter((how) => how === "delayed label").length;
    $("#flow").textContent = `2 · Save: meeting #${answer.meeting} sent 4 labels (${delayed} for earlier predictions); ${kept} of 4 suggestions kept. 3 · Learn: done — the next suggestion uses it.`;
    closeDialog();
    const week = mondayOf(parseIso(choice.date)); // show the week the meeting went to
    if (iso(week) !== iso(state.monday)) state.monday = week;
    await Promise.all([renderWeek(), refreshStats()]).catch(() => {}); // shown in the panels
    bump("saved"); // after the week and the panels show the new meeting
  } catch (err) {
    if (err.errors && err.errors.length) showErrors(err.errors);
    setStatus(`Not saved: ${err.message}`, true);
    bump("refused");
  } finally {
    $("#save").disabled = false;
  }
}

// ----------------------------------------------------------------------------- stats and curves
function drawCurve(target, points, n) {
  const W = 300, H = 54, L = 30, R = 6, T = 4, B = 4;
  const x = (i) => L + (n <= 1 ? 0 : ((i - 1) / (n - 1)) * (W - L - R));
  const y = (a) => T + (1 - a) * (H - T - B);
  let out = `<rect x="${L}" y="${T}" width="${W - L - R}" height="${H - T - B}" fill="#f7f8fb"/>`;
  for (const a of [0, 0.5, 1]) {
    out += `<line x1="${L}" x2="${W - R}" y1="${y(a)}" y2="${y(a)}" stroke="#e3e7ee"/>`;
    out += `<text x="${L - 3}" y="${y(a) + 3}" font-size="9" text-anchor="end" fill="#6b7380">${a * 100}%</text>`;
  }
  if (points.length) {
    const d = points.map(([i, a]) => `${x(i).toFixed(1)},${y(a).toFixed(1)}`).join(" ");
    out += `<polyline class="curve-${target}" fill="none" stroke="${COLORS[target]}" stroke-width="2" points="${d}"/>`;
  }
  return out;
}

// Live diversity of each field model's members (Chorus' GET /models/{name}: "diversity" and each
// member's "window_accuracy"), over the last diversity_window meetings it learned.
function renderDiversity(stats) {
  const num = (v) => (v === null || v === undefined ? "—" : v.toFixed(2));
  const body = $("#diversity tbody");
  body.innerHTML = "";
  let n = 0;
  for (const target of state.config.targets) {
    const m = stats.models[target];
    const d = m.diversity || {};
    n = Math.max(n, d.n || 0);
    const accs = (m.member_accuracy || []).filter((a) => a !== null && a !== undefined);
    const bars = el("span", { class: "bars", id: `div-bars-${target}` },
      accs.map((a) => el("span", { class: "bar", title: pct(a), style: `height:${Math.max(1, Math.round(a * 16))}px;background:${COLORS[target]}` })));
    const range = accs.length ? `${Math.round(100 * Math.min(...accs))}–${pct(Math.max(...accs))}` : "—";
    body.appendChild(el("tr", { id: `div-${target}` }, [
      el("td", {}, [el("span", { class: "swatch", style: `background:${COLORS[target]}` }), document.createTextNode(state.config.labels[target])]),
      el("td", { id: `div-dis-${target}`, text: num(d.disagreement) }),
      el("td", { id: `div-q-${target}`, text: num(d.q_statistic) }),
      el("td", { id: `div-kappa-${target}`, text: num(d.kappa) }),
      el("td", { id: `div-acc-${target}` }, [bars, el("span", { class: "range", text: range })]),
    ]));
  }
  $("#diversity-window").textContent = state.config.diversity_window
    ? `last ${Math.min(n, state.config.diversity_window)} of ${state.config.diversity_window} meetings`
    : "off (CALENDAR_DIVERSITY_WINDOW=0)";
}

// Per field, which candidate is winning (Chorus' GET /models/{name}/leaderboard via /stats' "race"):
// the champion, and the best challenger's accuracy against the champion's with McNemar's p.
function renderRace(stats) {
  const body = $("#race tbody");
  body.innerHTML = "";
  const race = stats.race || {};
  for (const target of state.config.targets) {
    const r = race[target] || {};
    const champ = (r.candidates || []).find((c) => c.role === "champion");
    const lead = r.leader;
    const promoted = r.promotions ? ` · promoted ${r.promotions}×` : "";
    let leading = "no challengers";
    let verdict = "";
    if (lead) {
      leading = `${lead.name} ${pct(lead.accuracy)} vs ${pct(lead.champion_accuracy)}`;
      verdict = lead.p_value === null || lead.p_value === undefined
        ? "no significant difference yet"
        : `McNemar p ${lead.p_value < 0.001 ? "< 0.001" : `= ${lead.p_value.toFixed(3)}`} · ${lead.verdict}`;
    }
    body.appendChild(el("tr", { id: `race-${target}`, "data-champion": r.champion || "" }, [
      el("td", {}, [el("span", { class: "swatch", style: `background:${COLORS[target]}` }), document.createTextNode(state.config.labels[target])]),
      el("td", {}, [
        el("b", { id: `race-champion-${target}`, text: r.champion || "—" }),
        el("div", { class: "range", id: `race-n-${target}`, text: `${plural((champ && champ.learned) || 0, "meeting")}${promoted}` }),
      ]),
      el("td", {}, [
        el("span", { id: `race-leader-${target}`, text: leading }),
        el("div", { class: `range verdict${lead && lead.verdict === "significantly better" ? " better" : ""}`, id: `race-verdict-${target}`, text: verdict }),
      ]),
    ]));
  }
  const policy = (state.config.spec || {}).promotion;
  $("#race-policy").textContent = policy
    ? `promotes at p < ${policy.alpha} over ${policy.window} meetings (≥ ${policy.min_examples})`
    : "off";
}

async function refreshStats() {
  let stats;
  try {
    stats = await api(`/api/users/${state.user}/stats`);
  } catch (err) {
    $("#meeting-count").textContent = `Chorus unreachable: ${err.message}`;
    return;
  }
  if (stats.user !== state.user) return;
  $("#meeting-count").textContent = plural(stats.meetings, "meeting");
  $("#last-head").textContent = `last ${stats.window}`;
  $("#curve-window").textContent = `Share of suggestions kept, moving average over the last ${stats.window} meetings (x: meetings 1-${Math.max(1, stats.meetings)})`;
  const body = $("#models tbody");
  body.innerHTML = "";
  const curves = $("#curves");
  curves.innerHTML = "";
  for (const target of state.config.targets) {
    const m = stats.models[target];
    body.appendChild(el("tr", { id: `m-${target}` }, [
      el("td", {}, [el("span", { class: "swatch", style: `background:${COLORS[target]}` }), document.createTextNode(state.config.labels[target])]),
      el("td", { id: `seen-${target}`, text: String(m.n_seen ?? 0) }),
      el("td", { id: `acc-${target}`, text: pct(m.accuracy) }),
      el("td", { id: `last-${target}`, text: pct(m.last) }),
    ]));
    const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
    svg.setAttribute("viewBox", "0 0 300 54");
    svg.setAttribute("width", "300");
    svg.setAttribute("height", "54");
    svg.setAttribute("id", `curve-${target}`);
    svg.innerHTML = drawCurve(target, stats.curve[target], stats.meetings);
    curves.appendChild(el("div", { class: "curve" }, [
      el("div", { class: "curve-label", text: `${state.config.labels[target]} ${pct(m.last)}` }), svg,
    ]));
  }
  renderDiversity(stats);
  renderRace(stats);
  const sim = stats.simulation;
  const simStatus = $("#sim-status");
  simStatus.classList.toggle("error", Boolean(sim.error));
  if (sim.error) simStatus.textContent = `Simulation failed: ${sim.error}`;
  else if (sim.total) {
    simStatus.textContent = `${sim.running ? "Simulating" : "Simulated"} ${sim.done}/${sim.total} meetings into "${sim.user}"` +
      (sim.drift_at ? ` (habits change after ${sim.drift_at})` : "");
  }
  document.body.dataset.simRunning = sim.running ? "1" : "0";
  $("#simulate").disabled = sim.running;
  if (!sim.running && state.polling) {
    clearInterval(state.polling);
    state.polling = null;
    renderWeek();
  }
  bump("stats");
}

async function simulate() {
  const body = { n: Number($("#sim-n").value), seed: Number($("#sim-seed").value), drift: $("#sim-drift").checked };
  try {
    await api("/api/simulate", { method: "POST", body: JSON.stringify(body) });
    $("#simulate").disabled = true;
    document.body.dataset.simRunning = "1";
    if (!state.polling) state.polling = setInterval(refreshStats, 500);
  } catch (err) {
    $("#sim-status").textContent = `Simulation failed: ${err.message}`;
    $("#sim-status").classList.add("error");
  }
}

async function main() {
  state.config = await api("/api/config");
  $("#prior").textContent = String(state.config.prior_meetings);
  state.monday = mondayOf(today());
  buildWeekGrid();
  buildDialog(state.config);
  $("#user").addEventListener("change", () => switchUser($("#user").value));
  $("#add-user").addEventListener("click", addUser);
  $("#reset-user").addEventListener("click", resetUser);
  $("#prev-week").addEventListener("click", () => { state.monday = addDays(state.monday, -7); renderWeek(); });
  $("#next-week").addEventListener("click", () => { state.monday = addDays(state.monday, 7); renderWeek(); });
  $("#this-week").addEventListener("click", () => { state.monday = mondayOf(today()); renderWeek(); });
  $("#new-meeting").addEventListener("click", () => openDialog());
  $("#suggest").addEventListener("click", suggest);
  $("#save").addEventListener("click", save);
  $("#cancel").addEventListener("click", closeDialog);
  $("#dialog").addEventListener("click", (e) => { if (e.target === $("#dialog")) closeDialog(); });
  document.addEventListener("keydown", (e) => { if (e.key === "Escape" && !$("#dialog").hidden) closeDialog(); });
  $("#simulate").addEventListener("click", simulate);
  await loadUsers(null);
  document.body.dataset.ready = "1";
}

main().catch((err) => { document.body.dataset.error = err.message; $("#week-label").textContent = `Could not start: ${err.message}`; });
