/* postflightd dashboard: every value from the server is set with textContent (never as
   markup); the server has already made control characters visible. */
"use strict";

const MAX_OUTCOMES = 100;
const seen = new Set();
let snapshot = null;
let receivedAt = 0;
// Invalid files whose findings the person opened: kept open across live updates.
const openFiles = new Set();
// The figures frame is made again when outcomes land, at most this often (ms).
const FIGURES_EVERY = 60000;
let figuresAt = Date.now();
let figuresStale = false;
let figuresTimer = null;

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (key === "class") node.className = value;
    else node.setAttribute(key, value);
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function human(seconds) {
  if (seconds === null || seconds === undefined) return "-";
  const s = Math.max(0, Math.round(seconds));
  const d = Math.floor(s / 86400), h = Math.floor((s % 86400) / 3600);
  const m = Math.floor((s % 3600) / 60), r = s % 60;
  if (d) return `${d}d${String(h).padStart(2, "0")}h`;
  if (h) return `${h}h${String(m).padStart(2, "0")}m`;
  if (m) return `${m}m${String(r).padStart(2, "0")}s`;
  return `${r}s`;
}

function taskLabel(item) {
  return item.task !== null && item.task !== undefined ? String(item.task) : item.file;
}

function elapsedCell(run) {
  const extra = (Date.now() - receivedAt) / 1000;
  const elapsed = run.elapsed_s === null ? null : run.elapsed_s + extra;
  const cell = el("td", { class: "elapsed" });
  if (run.timeout_s) {
    const meter = el("meter", {
      min: "0", max: String(run.timeout_s), low: String(run.timeout_s * 0.5),
      high: String(run.timeout_s * 0.8), optimum: "0",
      value: String(Math.min(elapsed || 0, run.timeout_s)),
      "aria-label": `elapsed ${human(elapsed)} of ${human(run.timeout_s)}`,
    });
    cell.append(meter, " ");
  }
  cell.append(`${human(elapsed)} / ${run.timeout_s ? human(run.timeout_s) : "-"}`);
  return cell;
}

function renderRuns() {
  const body = document.querySelector("#runs tbody");
  const rows = snapshot.runs.map((run) => {
    const phases = run.phases_total ? `${run.phases_completed ?? 0}/${run.phases_total}` : "-";
    const tr = el("tr", { class: run.state, "data-task": taskLabel(run) },
      el("td", {}, taskLabel(run)),
      el("td", {}, run.agent || "-"),
      el("td", {}, el("span", { class: `badge ${run.state}` }, run.state === "stuck" ? "STUCK" : run.state)),
      el("td", {}, run.stage || run.operation || "-"),
      el("td", {}, phases),
      elapsedCell(run));
    return tr;
  });
  body.replaceChildren(...rows);
  document.getElementById("runs-empty").hidden = rows.length > 0;
  const stuck = snapshot.stuck ? `, ${snapshot.stuck} stuck` : "";
  document.getElementById("flight-count").textContent = `(${rows.length}${stuck})`;
}

/* One card per code of a file: its severity, how many, then each finding with the fix its
   rule built from this file (none when the rule names no one replacement). Errors first,
   the warnings apart after them. */
function findingNodes(findings) {
  const groups = new Map();
  for (const f of findings) {
    const key = `${f.severity}\u0000${f.code}`;
    if (!groups.has(key)) groups.set(key, { code: f.code, severity: f.severity || "note", items: [] });
    groups.get(key).items.push(f);
  }
  const card = (g) => el("div", { class: `finding ${g.severity}`, "data-code": g.code, "data-severity": g.severity },
    el("span", { class: `badge ${g.severity}` }, g.severity), " ",
    g.code ? el("b", {}, g.code) : null, g.items.length > 1 ? ` \u00d7${g.items.length}` : null,
    el("ul", {}, ...g.items.map((f) => el("li", {},
      f.location ? el("code", {}, f.location) : null, f.location ? ": " : null, f.message,
      f.fix ? el("div", { class: "muted" }, "Write instead:") : null,
      f.fix ? el("pre", {}, f.fix) : null))));
  const all = [...groups.values()];
  const errors = all.filter((g) => g.severity === "error"), others = all.filter((g) => g.severity !== "error");
  return [
    errors.length ? el("div", { class: "errors" }, ...errors.map(card)) : null,
    others.length ? el("div", { class: "warnings" }, el("p", { class: "muted" }, "Warnings (applied anyway):"), ...others.map(card)) : null,
  ].filter(Boolean);
}

function renderInvalid() {
  const box = document.getElementById("invalid");
  const files = snapshot.invalid.map((item) => {
    const codes = [...new Set(item.findings.map((f) => f.code).filter(Boolean))];
    const details = el("details", {},
      el("summary", {}, el("code", {}, item.file), item.agent ? ` ${item.agent}` : "", " ",
        ...codes.map((c) => el("span", { class: "badge invalid" }, c))),
      ...findingNodes(item.findings));
    if (openFiles.has(item.file)) details.open = true;
    details.addEventListener("toggle", () => {
      if (details.open) openFiles.add(item.file); else openFiles.delete(item.file);
    });
    return el("article", { class: "file", "data-file": item.file }, details);
  });
  box.replaceChildren(...files);
  document.getElementById("invalid-empty").hidden = files.length > 0;
  document.getElementById("invalid-count").textContent = `(${files.length})`;
}

function since(iso) {
  if (!iso) return null;
  const t = new Date(iso).getTime();
  return Number.isNaN(t) ? null : (Date.now() - t) / 1000;
}

function clock(iso) {
  const d = new Date(iso);
  const today = new Date().toDateString() === d.toDateString();
  return today ? d.toLocaleTimeString() : d.toLocaleString();
}

function renderRoots() {
  const items = snapshot.roots.map((root) => {
    const li = el("li", { class: root.daemon ? "daemon on" : "daemon off" });
    if (root.daemon) {
      li.append(el("b", {}, "Daemon watching"), " ", el("code", {}, root.root));
      if (root.since) li.append(` since ${clock(root.since)} (${human(since(root.since))})`);
      if (root.pid) li.append(el("span", { class: "muted" }, ` pid ${root.pid}`));
      if (root.note) li.append(el("span", { class: "muted" }, ` ${root.note}`));
    } else {
      li.append(el("b", {}, "No daemon"), " on ", el("code", {}, root.root),
        ": nothing is applied until something applies it. Start it: ", el("code", {}, root.start || "postflightd watch"));
      if (root.note) li.append(el("span", { class: "muted" }, ` ${root.note}`));
    }
    return li;
  });
  document.getElementById("roots").replaceChildren(...items);
}

function setFigure(id, value, alert) {
  const node = document.getElementById(id);
  node.textContent = value;
  const tile = node.closest("li");
  if (tile && tile.dataset.alert) tile.classList.toggle("alert", Boolean(alert));
}

function renderSummary() {
  const s = snapshot.summary || {};
  setFigure("sum-flight", String(s.in_flight ?? snapshot.runs.length));
  setFigure("sum-stuck", String(s.stuck ?? snapshot.stuck), s.stuck);
  setFigure("sum-waiting", String(s.waiting ?? 0), s.waiting);
  setFigure("sum-invalid", String(s.invalid ?? snapshot.invalid.length), s.invalid);
  setFigure("sum-applied", String(s.applied_today ?? 0));
  const last = document.getElementById("sum-last");
  if (s.last_outcome) {
    last.replaceChildren(el("time", { datetime: s.last_outcome, title: clock(s.last_outcome) }, `${human(since(s.last_outcome))} ago`));
  } else {
    last.textContent = "none yet";
  }
}

function renderWaiting() {
  const waiting = snapshot.waiting || [];
  const rows = waiting.map((w) => el("tr", { "data-task": taskLabel(w) },
    el("td", {}, taskLabel(w)),
    el("td", {}, w.status || "?"),
    el("td", {}, w.agent || "-"),
    el("td", { class: "elapsed" }, w.waiting_since
      ? el("time", { datetime: w.waiting_since, title: clock(w.waiting_since) }, `${human(since(w.waiting_since))} ago`)
      : "-"),
    el("td", { class: "why" }, w.waiting || "")));
  document.querySelector("#waiting tbody").replaceChildren(...rows);
  document.getElementById("waiting-section").hidden = rows.length === 0;
  document.getElementById("waiting-count").textContent = `(${rows.length})`;
}

function applyState(doc) {
  snapshot = doc;
  receivedAt = Date.now();
  if (!snapshot.runs) return;
  renderSummary();
  renderRoots();
  renderRuns();
  renderWaiting();
  renderInvalid();
}

function outcomeText(o) {
  switch (o.outcome) {
    case "applied": return `applied as ${o.status}`;
    case "invalid": return `invalid (${[...new Set(o.findings.filter((f) => f.severity === "error").map((f) => f.code))].join(", ")})`;
    case "incomplete": return o.cause ? `incomplete: ${o.cause}` : "incomplete";
    default: return o.outcome;
  }
}

function addOutcome(o, live) {
  if (seen.has(o.id)) return;
  seen.add(o.id);
  const list = document.getElementById("outcomes");
  const cls = o.outcome === "applied" ? (["failed", "blocked", "partial"].includes(o.status) ? o.status : "applied") : o.outcome;
  const when = new Date(o.ts).toLocaleTimeString();
  const li = el("li", { class: live ? "new" : "", "data-outcome": o.outcome, "data-task": taskLabel(o) },
    el("time", { datetime: o.ts }, when), " ",
    el("span", { class: `badge ${cls}` }, outcomeText(o)), " task ",
    el("b", {}, taskLabel(o)), o.agent ? ` by ${o.agent}` : "");
  if (o.findings && o.findings.length) {
    const details = el("details", {}, el("summary", {}, "findings and the fix"), ...findingNodes(o.findings));
    li.append(details);
  }
  list.prepend(li);
  while (list.children.length > MAX_OUTCOMES) {
    const last = list.lastElementChild;
    seen.delete(Number(last.dataset.id));
    last.remove();
  }
  li.dataset.id = String(o.id);
  document.getElementById("outcomes-empty").hidden = true;
}

function setConnection(state, text) {
  const node = document.getElementById("connection");
  node.dataset.state = state;
  node.textContent = text;
}

function connect() {
  const source = new EventSource("/events");
  source.addEventListener("open", () => setConnection("live", "live"));
  source.addEventListener("state", (e) => applyState(JSON.parse(e.data)));
  source.addEventListener("outcome", (e) => {
    addOutcome(JSON.parse(e.data), true);
    figuresStale = true;
    refreshFigures(false);
  });
  source.addEventListener("problem", (e) => setConnection("reconnecting", JSON.parse(e.data).message));
  source.addEventListener("error", () => {
    setConnection("reconnecting", "reconnecting…");
    if (source.readyState === EventSource.CLOSED) {
      setTimeout(connect, 2000);
    }
  });
}

function refreshFigures(now) {
  // The frame follows the outcomes, for the range chosen; the server reuses its report
  // while the journal has no new row, so this never costs a report per page. Outcomes that
  // land within a minute of the last refresh are shown a minute after it, not later.
  if (!now && !figuresStale) return;
  const wait = FIGURES_EVERY - (Date.now() - figuresAt);
  if (!now && wait > 0) {
    if (figuresTimer === null) {
      figuresTimer = setTimeout(() => { figuresTimer = null; refreshFigures(false); }, wait);
    }
    return;
  }
  if (figuresTimer !== null) clearTimeout(figuresTimer);
  figuresTimer = null;
  figuresAt = Date.now();
  figuresStale = false;
  const range = document.getElementById("range").value;
  document.getElementById("figures").src = `/figures?range=${encodeURIComponent(range)}`;
}

function tick() {
  if (!snapshot || !snapshot.runs) return;
  if (snapshot.runs.length) renderRuns();
  renderSummary();
  renderWaiting();
}

document.addEventListener("DOMContentLoaded", () => {
  fetch("/api/state").then((r) => r.json()).then(applyState).catch(() => {});
  fetch("/api/outcomes").then((r) => r.json()).then((list) => list.forEach((o) => addOutcome(o, false))).catch(() => {});
  const range = document.getElementById("range");
  range.addEventListener("change", () => refreshFigures(true));
  document.getElementById("range-form").addEventListener("submit", (e) => {
    e.preventDefault();
    refreshFigures(true);
  });
  connect();
  setInterval(tick, 1000);
});
