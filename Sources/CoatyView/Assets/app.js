// coaty view — the page. Plain DOM, no framework. All data goes in via textContent/attributes.
"use strict";

const MAX_EVENTS = 500;
const TABS = ["agents", "objects", "events", "charts", "ask"];
const SVG_NS = "http://www.w3.org/2000/svg";
const COLORS = {
  Advertise: "#1f77b4", Deadvertise: "#7f7f7f", Channel: "#17becf", Discover: "#ff7f0e",
  Resolve: "#2ca02c", Query: "#d62728", Retrieve: "#9467bd", Update: "#8c564b",
  Complete: "#e377c2", Call: "#bcbd22", Return: "#393b79", Associate: "#637939",
  IoValue: "#ad494a", Raw: "#a55194",
};
const EXTRA = ["#3182bd", "#e6550d", "#31a354", "#756bb1", "#636363", "#843c39", "#7b4173", "#8ca252"];

const $ = (id) => document.getElementById(id);
const ui = {
  tab: "agents", state: null, serverStart: null, lastSeq: -1,
  selectedAgent: null, selectedType: null, latestJson: null, agentJson: null,
  paused: false, pausedCount: 0, skipped: 0, lastSkipped: 0, filter: "",
  ws: null, wsOpen: false,
};

// ---------- small helpers ----------

function el(tag, props, ...children) {
  const node = document.createElement(tag);
  if (props) for (const [k, v] of Object.entries(props)) {
    if (v === undefined || v === null) continue;
    if (k === "text") node.textContent = v;
    else if (k === "className") node.className = v;
    else node.setAttribute(k, v);
  }
  for (const c of children) if (c !== null && c !== undefined) node.append(c);
  return node;
}

function svg(tag, attrs, text) {
  const node = document.createElementNS(SVG_NS, tag);
  if (attrs) for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = text;
  return node;
}

function setText(node, text) {
  text = String(text);
  if (node.textContent !== text) node.textContent = text;
}

function setTitle(node, title) {
  if (node.title !== title) node.title = title;
}

function shortId(id) {
  if (!id) return "–";
  return id.length > 10 ? id.slice(0, 8) + "…" : id;
}

function pad(n, w = 2) { return String(n).padStart(w, "0"); }

function clock(ms, withMs) {
  const d = new Date(ms);
  const s = `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
  return withMs ? `${s}.${pad(d.getMilliseconds(), 3)}` : s;
}

function absTime(ms) {
  if (ms === undefined || ms === null) return "";
  const d = new Date(ms);
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${clock(ms, true)}`;
}

function ago(ms, now) {
  if (ms === undefined || ms === null) return "–";
  const s = Math.max(0, Math.round((now - ms) / 1000));
  if (s < 2) return "just now";
  if (s < 120) return `${s} s ago`;
  const m = Math.floor(s / 60);
  if (m < 120) return `${m} min ago`;
  const h = Math.floor(m / 60);
  if (h < 48) return `${h} h ago`;
  return `${Math.floor(h / 24)} d ago`;
}

function fmtInt(n) { return (n || 0).toLocaleString("en-US"); }

function fmtBytes(n) {
  n = n || 0;
  if (n < 1024) return `${n} B`;
  const units = ["KiB", "MiB", "GiB", "TiB"];
  let i = -1;
  do { n /= 1024; i++; } while (n >= 1024 && i < units.length - 1);
  return `${n.toFixed(n < 10 ? 1 : 0)} ${units[i]}`;
}

function fmtMs(v) {
  if (v === undefined || v === null || !isFinite(v)) return "–";
  if (v < 1) return v.toFixed(3);
  if (v < 10) return v.toFixed(2);
  if (v < 100) return v.toFixed(1);
  return Math.round(v).toString();
}

function pretty(value) { return JSON.stringify(value, null, 2); }

const colorCache = new Map();
function colorFor(name) {
  if (COLORS[name]) return COLORS[name];
  if (!colorCache.has(name)) {
    let h = 0;
    for (const ch of name) h = (h * 31 + ch.charCodeAt(0)) >>> 0;
    colorCache.set(name, EXTRA[h % EXTRA.length]);
  }
  return colorCache.get(name);
}

// Reuses rows by key, so rows (and clicks on them) survive updates; moves only what is out of place.
function syncRows(tbody, items, keyOf, create, update) {
  const map = tbody._rows || (tbody._rows = new Map());
  const seen = new Set();
  items.forEach((item, i) => {
    const key = keyOf(item);
    seen.add(key);
    let tr = map.get(key);
    if (!tr) { tr = create(item, key); map.set(key, tr); }
    update(tr, item);
    if (tbody.children[i] !== tr) tbody.insertBefore(tr, tbody.children[i] || null);
  });
  for (const [key, tr] of map) if (!seen.has(key)) { tr.remove(); map.delete(key); }
}

function cells(tr, names) {
  const out = {};
  for (const n of names) { const td = el("td", { className: n }); tr.append(td); out[n] = td; }
  tr._c = out;
  return out;
}

// ---------- tabs ----------

function selectTab(name) {
  if (!TABS.includes(name)) name = "agents";
  ui.tab = name;
  for (const t of TABS) {
    const on = t === name;
    $("tab-" + t).classList.toggle("active", on);
    $("tab-" + t).setAttribute("aria-selected", String(on));
    $("view-" + t).hidden = !on;
  }
  if (ui.state) renderTab(ui.state);
}

function tabFromHash() { selectTab(location.hash.replace(/^#/, "") || "agents"); }

// ---------- WebSocket ----------

function connect() {
  const proto = location.protocol === "https:" ? "wss:" : "ws:";
  let ws;
  try { ws = new WebSocket(`${proto}//${location.host}/ws`); } catch (e) { scheduleReconnect(); return; }
  ui.ws = ws;
  ws.onopen = () => { ui.wsOpen = true; $("ws-note").hidden = true; };
  ws.onmessage = (msg) => {
    let data;
    try { data = JSON.parse(msg.data); } catch (e) { return; }
    if (data && data.type === "state") onState(data);
  };
  ws.onclose = () => {
    if (ui.ws !== ws) return;
    ui.wsOpen = false;
    ui.ws = null;
    setStatus("offline", "The page lost its connection to the viewer; retrying every second");
    $("ws-note").hidden = false;
    scheduleReconnect();
  };
  ws.onerror = () => { try { ws.close(); } catch (e) { /* closed already */ } };
}

function scheduleReconnect() { setTimeout(connect, 1000); }

function setStatus(state, title) {
  const s = $("status");
  setText(s, state);
  s.className = "badge " + state;
  setTitle(s, title);
}

// ---------- state ----------

function onState(st) {
  if (st.viewer && st.viewer.startedAt !== ui.serverStart) {
    ui.serverStart = st.viewer.startedAt;   // a restarted viewer counts seq anew
    ui.lastSeq = -1;
  }
  ui.state = st;
  renderHeader(st);
  addEvents(st.events || [], st.eventsSkipped || 0);
  renderTab(st);
}

function renderTab(st) {
  if (ui.tab === "agents") renderAgents(st);
  else if (ui.tab === "objects") renderTypes(st);
  else if (ui.tab === "charts") { renderRates(st); renderLatencies(st); }
}

function renderHeader(st) {
  const c = st.connection || {};
  const since = c.since ? ` since ${absTime(c.since)}` : "";
  const rec = c.reconnects ? `, ${c.reconnects} reconnects` : "";
  setStatus(c.state || "offline", `Broker connection ${c.state || "unknown"}${since}${rec}`);
  setText($("broker"), c.broker || "–");
  const t = st.totals || {};
  setText($("total-events"), fmtInt(t.events));
  const by = Object.entries(t.byEvent || {}).sort((a, b) => b[1] - a[1]);
  setTitle($("total-events"), by.map(([k, v]) => `${k}: ${fmtInt(v)}`).join("\n"));
  setText($("total-bytes"), fmtBytes(t.bytes));
  const agents = st.agents || [];
  setText($("total-agents"), `${agents.filter((a) => a.online).length} / ${agents.length}`);
  setText($("total-types"), fmtInt((st.types || []).length));
  setText($("count-agents"), agents.length ? String(agents.length) : "");
  setText($("count-types"), (st.types || []).length ? String(st.types.length) : "");
  setText($("total-invalid"), fmtInt(t.invalid));
  $("invalid-box").classList.toggle("bad", (t.invalid || 0) > 0);
  const li = t.lastInvalid;
  const box = $("last-invalid-box");
  box.hidden = !li;
  if (li) {
    setText($("last-invalid"), li.reason || "");
    const tip = `${absTime(li.time)}\n${li.topic || ""}\n${li.reason || ""}`;
    setTitle($("last-invalid"), tip);
    setTitle($("total-invalid"), tip);
  }
}

// ---------- agents ----------

// Online agents by name, then those that left, the latest first (the server's order too).
function agentOrder(a, b) {
  if (!!a.online !== !!b.online) return a.online ? -1 : 1;
  if (!a.online && (a.left || 0) !== (b.left || 0)) return (b.left || 0) - (a.left || 0);
  const an = a.name || "\uffff", bn = b.name || "\uffff";
  return an.localeCompare(bn) || String(a.objectId).localeCompare(String(b.objectId));
}

function renderAgents(st) {
  const now = st.time || Date.now();
  const agents = (st.agents || []).slice().sort(agentOrder);
  $("agents-empty").hidden = agents.length > 0;
  const tbody = $("agents-table").tBodies[0];
  syncRows(tbody, agents, (a) => a.objectId, (a, key) => {
    const tr = el("tr", { className: "agent" });
    tr.dataset.agentId = key;
    const c = cells(tr, ["agent-name", "agent-state", "agent-since", "agent-last-seen", "agent-events", "agent-id"]);
    c.label = el("span", { className: "state-label" });
    c.when = el("span", { className: "state-when" });
    c["agent-state"].append(c.label, c.when);
    tr.addEventListener("click", () => { ui.selectedAgent = key; ui.agentJson = null; renderAgents(ui.state); });
    return tr;
  }, (tr, a) => {
    const c = tr._c;
    tr.classList.toggle("left", !a.online);
    tr.classList.toggle("selected", a.objectId === ui.selectedAgent);
    setText(c["agent-name"], a.name || "(no name)");
    c["agent-name"].classList.toggle("muted", !a.name);
    setText(c.label, a.online ? "online" : "left");
    setText(c.when, a.online || !a.left ? "" : ` ${ago(a.left, now)}`);
    c["agent-state"].className = "agent-state " + (a.online ? "is-online" : "is-left");
    setTitle(c["agent-state"], a.online ? "online" :
      `left ${a.left ? absTime(a.left) + " (" + ago(a.left, now) + ")" : ""}${a.leftBy ? " by " + a.leftBy : ""}`);
    setText(c["agent-since"], ago(a.since, now));
    setTitle(c["agent-since"], absTime(a.since));
    setText(c["agent-last-seen"], ago(a.lastSeen, now));
    setTitle(c["agent-last-seen"], absTime(a.lastSeen));
    setText(c["agent-events"], fmtInt(a.events));
    setText(c["agent-id"], shortId(a.objectId));
    setTitle(c["agent-id"], a.objectId || "");
  });
  const sel = agents.find((a) => a.objectId === ui.selectedAgent);
  $("agent-detail").hidden = !sel;
  if (!sel) return;
  const left = sel.online ? "" : ` — left ${absTime(sel.left)}${sel.leftBy ? " (" + sel.leftBy + ")" : ""}`;
  setText($("agent-detail-title"), `${sel.name || "(no name)"} · namespace ${sel.namespace || "–"}${left}`);
  const json = sel.identity ? pretty(sel.identity)
    : "// No identity known: this agent was seen only from the events it published.\n" + pretty(sel);
  if (json !== ui.agentJson) { ui.agentJson = json; $("agent-identity").textContent = json; }
}

// ---------- object types ----------

function renderTypes(st) {
  const now = st.time || Date.now();
  const types = (st.types || []).slice().sort((a, b) => a.objectType.localeCompare(b.objectType));
  $("types-empty").hidden = types.length > 0;
  syncRows($("types-table").tBodies[0], types, (t) => t.objectType, (t, key) => {
    const tr = el("tr", { className: "type", "data-object-type": key });
    cells(tr, ["type-name", "type-core", "type-count", "type-last-seen"]);
    tr.addEventListener("click", () => selectType(key));
    return tr;
  }, (tr, t) => {
    const c = tr._c;
    tr.classList.toggle("selected", t.objectType === ui.selectedType);
    setText(c["type-name"], t.objectType);
    setText(c["type-core"], t.coreType || "–");
    setText(c["type-count"], fmtInt(t.count));
    setText(c["type-last-seen"], ago(t.lastSeen, now));
    setTitle(c["type-last-seen"], absTime(t.lastSeen));
  });
  const sel = types.find((t) => t.objectType === ui.selectedType);
  $("type-panels").hidden = !sel;
  if (!sel) return;
  setText($("type-latest-name"), sel.objectType);
  const json = sel.latest === undefined ? "(none)" : pretty(sel.latest);
  if (json !== ui.latestJson) { ui.latestJson = json; $("type-latest").textContent = json; }
}

function selectType(objectType) {
  ui.selectedType = objectType;
  ui.latestJson = null;
  if (ui.state) renderTypes(ui.state);
  loadTypeDetail();
}

async function loadTypeDetail() {
  const objectType = ui.selectedType;
  const box = $("type-detail");
  if (!objectType) return;
  box.replaceChildren(el("p", { className: "muted", text: "Loading…" }));
  let node;
  try {
    const res = await fetch(`/api/types/${encodeURIComponent(objectType)}`);
    const body = await res.json().catch(() => ({}));
    if (!res.ok) throw new Error(body.error || (res.status === 404 ? "never seen" : `HTTP ${res.status}`));
    const objects = body.objects || [];
    node = document.createDocumentFragment();
    node.append(el("p", { className: "muted",
      text: `${fmtInt(body.count)} ${body.objectType} objects (${body.coreType || "?"}) seen; the last ${objects.length}, newest first:` }));
    const list = el("ol", { className: "objects" });
    for (const obj of objects) {
      const label = `${obj && obj.name ? obj.name : "(no name)"}  ${obj && obj.objectId ? obj.objectId : ""}`;
      list.append(el("li", null, el("details", null, el("summary", { className: "mono", text: label }),
        el("pre", { className: "json", text: pretty(obj) }))));
    }
    node.append(list);
    const first = list.querySelector("details");
    if (first) first.open = true;
  } catch (e) {
    node = el("p", { className: "error", text: `Could not load ${objectType}: ${e.message}` });
  }
  if (ui.selectedType === objectType) box.replaceChildren(node);
}

// ---------- events ----------

function eventMatches(tr) {
  return !ui.filter || tr._search.includes(ui.filter);
}

function eventRow(ev) {
  const tr = el("tr", { className: "event" });
  const c = cells(tr, ["event-time", "event-type", "event-agent", "event-object-type", "event-size", "event-topic"]);
  c["event-time"].textContent = clock(ev.time, true);
  c["event-time"].title = absTime(ev.time);
  const tag = el("span", { className: "tag", text: ev.event || "?" });
  tag.style.setProperty("--c", colorFor(ev.event || "?"));
  c["event-type"].append(tag);
  c["event-agent"].textContent = ev.sourceName || shortId(ev.sourceId);
  c["event-agent"].title = ev.sourceId || "";
  c["event-object-type"].textContent = ev.objectType || "";
  c["event-size"].textContent = fmtBytes(ev.size);
  c["event-topic"].textContent = ev.topic || "";
  c["event-topic"].title = ev.topic || "";
  tr._search = [ev.event, ev.objectType, ev.sourceName, ev.sourceId, ev.topic]
    .filter(Boolean).join("\u0001").toLowerCase();
  if (!eventMatches(tr)) tr.hidden = true;
  return tr;
}

function addEvents(events, skipped) {
  ui.skipped += skipped;
  ui.lastSkipped = skipped;
  const fresh = events.filter((e) => typeof e.seq !== "number" || e.seq > ui.lastSeq);
  for (const e of fresh) if (typeof e.seq === "number" && e.seq > ui.lastSeq) ui.lastSeq = e.seq;
  if (ui.paused) {
    ui.pausedCount += fresh.length + skipped;
    setText($("events-paused"), `${fmtInt(ui.pausedCount)} new events arrived while paused (not shown)`);
  } else if (fresh.length) {
    const tbody = $("events-table").tBodies[0];
    const frag = document.createDocumentFragment();
    const start = Math.max(0, fresh.length - MAX_EVENTS);
    for (let i = fresh.length - 1; i >= start; i--) frag.append(eventRow(fresh[i]));
    tbody.insertBefore(frag, tbody.firstChild);
    while (tbody.rows.length > MAX_EVENTS) tbody.lastElementChild.remove();
  }
  renderEventCounts();
}

function renderEventCounts() {
  const rows = $("events-table").tBodies[0].rows;
  let shown = rows.length;
  if (ui.filter) { shown = 0; for (const r of rows) if (!r.hidden) shown++; }
  setText($("events-shown"), ui.filter ? `${shown} of ${rows.length} rows match`
    : `${rows.length} rows (at most ${MAX_EVENTS})`);
  const s = $("events-sampled");
  setText(s, ui.skipped ? `${fmtInt(ui.skipped)} events skipped by the server's sampling since the page opened` +
    (ui.lastSkipped ? ` (${fmtInt(ui.lastSkipped)} in the last update)` : "") : "no events skipped by sampling");
  s.classList.toggle("warn", ui.lastSkipped > 0);
}

function applyFilter() {
  ui.filter = $("event-filter").value.trim().toLowerCase();
  for (const tr of $("events-table").tBodies[0].rows) tr.hidden = !eventMatches(tr);
  renderEventCounts();
}

function togglePause() {
  ui.paused = !ui.paused;
  ui.pausedCount = 0;
  const b = $("pause");
  b.textContent = ui.paused ? "Resume" : "Pause";
  b.classList.toggle("active", ui.paused);
  $("events-paused").hidden = !ui.paused;
  setText($("events-paused"), "paused");
}

// ---------- charts ----------

const CH = { w: 960, h: 260, l: 56, r: 18, t: 12, b: 26 };
const WINDOW = 5 * 60 * 1000;

function niceStep(max, ticks) {
  const raw = max / ticks;
  const mag = Math.pow(10, Math.floor(Math.log10(raw)));
  const f = raw / mag;
  return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * mag;
}

// Axes, grid and a mapping from (time, value) to SVG coordinates.
function chartFrame(root, now, maxY, unit, fmt) {
  CH.w = Math.max(480, Math.round(root.clientWidth || 960));  // draw at the real size: text keeps its size
  const s = svg("svg", { viewBox: `0 0 ${CH.w} ${CH.h}`, width: CH.w, height: CH.h, class: "plot", role: "img" });
  const pw = CH.w - CH.l - CH.r, ph = CH.h - CH.t - CH.b;
  const step = niceStep(maxY > 0 ? maxY : 1, 4);
  const top = Math.max(step, Math.ceil((maxY > 0 ? maxY : 1) / step) * step);
  const x = (t) => CH.l + ((t - (now - WINDOW)) / WINDOW) * pw;
  const y = (v) => CH.t + ph - (v / top) * ph;
  for (let v = 0; v <= top + step / 2; v += step) {
    s.append(svg("line", { x1: CH.l, x2: CH.w - CH.r, y1: y(v), y2: y(v), class: v ? "grid" : "axis" }));
    s.append(svg("text", { x: CH.l - 6, y: y(v) + 4, class: "tick", "text-anchor": "end" }, fmt(v)));
  }
  s.append(svg("text", { x: 12, y: CH.t + ph / 2, class: "unit",
    transform: `rotate(-90 12 ${CH.t + ph / 2})`, "text-anchor": "middle" }, unit));
  for (let m = 5; m >= 0; m--) {
    const xx = x(now - m * 60000);
    s.append(svg("line", { x1: xx, x2: xx, y1: CH.t, y2: CH.t + ph, class: "grid" }));
    s.append(svg("text", { x: xx, y: CH.h - 8, class: "tick",
      "text-anchor": m === 5 ? "start" : m === 0 ? "end" : "middle" }, m ? `-${m} min` : "now"));
  }
  const clip = svg("clipPath", { id: root.id + "-clip" });
  clip.append(svg("rect", { x: CH.l, y: CH.t - 4, width: pw, height: ph + 8 }));
  s.append(clip);
  const g = svg("g", { "clip-path": `url(#${root.id}-clip)` });
  s.append(g);
  return { s, g, x, y };
}

function legend(items) {
  const box = el("div", { className: "legend" });
  for (const it of items) {
    const sw = el("span", { className: "swatch" + (it.dashed ? " dashed" : "") });
    sw.style.setProperty("--c", it.color);
    box.append(el("span", { className: "item" }, sw, el("span", { text: it.label })));
  }
  return box;
}

function emptyNote(frame, text) {
  frame.s.append(svg("text", { x: CH.w / 2, y: CH.h / 2, class: "empty-note", "text-anchor": "middle" }, text));
}

function renderRates(st) {
  const root = $("rate-chart");
  const r = st.rates || {};
  const interval = r.interval || 1000, start = r.start || 0, now = st.time || Date.now();
  const perSec = 1000 / interval;
  const names = Object.keys(r.series || {}).sort();
  let max = 0;
  for (const n of names) for (const v of r.series[n]) if (v * perSec > max) max = v * perSec;
  const f = chartFrame(root, now, max, "events / s", (v) => (v >= 1000 ? `${v / 1000}k` : String(+v.toFixed(2))));
  const items = [];
  for (const n of names) {
    const vals = r.series[n];
    const total = vals.reduce((a, b) => a + b, 0);
    const pts = vals.map((v, i) => `${f.x(start + (i + 1) * interval).toFixed(1)},${f.y(v * perSec).toFixed(1)}`);
    f.g.append(svg("polyline", { class: "series", points: pts.join(" "), stroke: colorFor(n), "data-event": n }));
    const last = vals.length ? vals[vals.length - 1] * perSec : 0;
    items.push({ color: colorFor(n), label: `${n} — ${fmtInt(total)} in 5 min, now ${+last.toFixed(1)}/s` });
  }
  if (!max) emptyNote(f, "No events in the last 5 minutes");
  root.replaceChildren(f.s, legend(items));
}

function renderLatencies(st) {
  const root = $("latency-chart");
  const L = st.latencies || {};
  const interval = L.interval || 10000, start = L.start || 0, now = st.time || Date.now();
  const names = Object.keys(L.series || {}).sort();
  let max = 0;
  for (const n of names) for (const b of L.series[n]) if (b && b.p90 > max) max = b.p90;
  const f = chartFrame(root, now, max, "ms", (v) => String(+v.toPrecision(3)));
  const items = [];
  for (const n of names) {
    const color = colorFor(n);
    for (const q of ["p50", "p90"]) {
      let seg = [];
      const flush = () => {
        if (seg.length > 1) f.g.append(svg("polyline", { class: `series ${q}`, points: seg.join(" "), stroke: color, "data-request": n }));
        seg = [];
      };
      L.series[n].forEach((b, i) => {
        if (!b || b[q] === null || b[q] === undefined) { flush(); return; }
        const cx = f.x(start + (i + 0.5) * interval), cy = f.y(b[q]);
        seg.push(`${cx.toFixed(1)},${cy.toFixed(1)}`);
        const dot = svg("circle", { cx: cx.toFixed(1), cy: cy.toFixed(1), r: q === "p50" ? 3 : 2.5, class: `dot ${q}`, fill: color });
        dot.append(svg("title", null, `${n} ${q} ${fmtMs(b[q])} ms (${b.count} pairs) at ${clock(start + i * interval)}`));
        f.g.append(dot);
      });
      flush();
    }
    items.push({ color, label: `${n} p50` }, { color, label: `${n} p90`, dashed: true });
  }
  if (!names.some((n) => L.series[n].some(Boolean))) emptyNote(f, "No request/response pairs in the last 5 minutes");
  root.replaceChildren(f.s, legend(items));
  const overall = Object.entries(L.overall || {}).sort((a, b) => a[0].localeCompare(b[0]));
  syncRows($("latency-table").tBodies[0], overall, (e) => e[0], () => {
    const tr = el("tr", { className: "latency" });
    cells(tr, ["lat-request", "lat-count", "lat-p50", "lat-p90", "lat-p99"]);
    return tr;
  }, (tr, [n, o]) => {
    const c = tr._c;
    if (!c["lat-request"].firstChild) {
      const sw = el("span", { className: "swatch" });
      sw.style.setProperty("--c", colorFor(n));
      c["lat-request"].append(sw, el("span", { text: n }));
    }
    setText(c["lat-count"], fmtInt(o.count));
    setText(c["lat-p50"], fmtMs(o.p50));
    setText(c["lat-p90"], fmtMs(o.p90));
    setText(c["lat-p99"], fmtMs(o.p99));
  });
}

// ---------- ask ----------

function listOf(id) {
  return $(id).value.split(",").map((s) => s.trim()).filter(Boolean);
}

function showAskError(msg) {
  const e = $("ask-error");
  e.hidden = !msg;
  e.textContent = msg || "";
}

function updateAskKind() {
  const q = $("ask-kind").value === "query";
  for (const n of document.querySelectorAll("#ask-form .discover-only")) n.hidden = q;
  for (const n of document.querySelectorAll("#ask-form .query-only")) n.hidden = !q;
}

async function ask(ev) {
  ev.preventDefault();
  showAskError("");
  const kind = $("ask-kind").value;
  const body = { kind };
  const ot = listOf("ask-object-types"), ct = listOf("ask-core-types");
  if (ot.length) body.objectTypes = ot;
  if (ct.length) body.coreTypes = ct;
  if (kind === "discover" && $("ask-object-id").value.trim()) body.objectId = $("ask-object-id").value.trim();
  if (kind === "query" && $("ask-filter").value.trim()) {
    try { body.objectFilter = JSON.parse($("ask-filter").value); } catch (e) {
      showAskError(`The object filter is not valid JSON: ${e.message}`);
      return;
    }
  }
  const timeout = Number($("ask-timeout").value);
  body.timeout = Number.isFinite(timeout) && timeout > 0 ? timeout : 2000;
  const send = $("ask-send"), summary = $("ask-summary"), table = $("ask-table");
  send.disabled = true;
  summary.textContent = "Asking…";
  summary.className = "summary waiting";
  table.hidden = true;
  table.tBodies[0].replaceChildren();
  try {
    const res = await fetch("/api/ask", {
      method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
    });
    const data = await res.json().catch(() => null);
    if (!res.ok) throw new Error((data && data.error) || `HTTP ${res.status}`);
    showAnswers(data || {});
  } catch (e) {
    summary.textContent = "";
    showAskError(e.message || String(e));
  } finally {
    send.disabled = false;
    summary.classList.remove("waiting");
  }
}

function showAnswers(data) {
  const responses = data.responses || [];
  const nObjects = responses.reduce((a, r) => a + (r.objects || []).length, 0);
  const n = responses.length;
  $("ask-summary").textContent = `${n} response${n === 1 ? "" : "s"} in ${Math.round(data.elapsed || 0)} ms` +
    (nObjects !== n ? ` (${nObjects} object${nObjects === 1 ? "" : "s"})` : "");
  const frag = document.createDocumentFragment();
  const sorted = responses.slice().sort((a, b) => (a.latency || 0) - (b.latency || 0));
  for (const r of sorted) {
    const who = el("td", { className: "answer-responder", text: r.sourceName || shortId(r.sourceId), title: r.sourceId || "" });
    const lat = () => el("td", { className: "answer-latency num", text: fmtMs(r.latency) });
    if (!(r.objects || []).length) {
      frag.append(el("tr", { className: "answer-empty" }, who, lat(), el("td", { colspan: 4, className: "muted", text: "(no objects)" })));
      continue;
    }
    for (const o of r.objects) {
      frag.append(el("tr", { className: "answer" }, who.cloneNode(true), lat(),
        el("td", { className: "answer-object-type", text: o.objectType || "" }),
        el("td", { className: "answer-name", text: o.name || "" }),
        el("td", { className: "answer-object-id", text: o.objectId || "", title: o.objectId || "" }),
        el("td", { className: "answer-json" }, el("details", null, el("summary", { text: "JSON" }),
          el("pre", { className: "json", text: pretty(o) })))));
    }
  }
  const table = $("ask-table");
  table.tBodies[0].replaceChildren(frag);
  table.hidden = responses.length === 0;
}

// ---------- start ----------

function start() {
  for (const t of TABS) $("tab-" + t).addEventListener("click", () => {
    if (location.hash !== "#" + t) location.hash = t; else selectTab(t);
  });
  window.addEventListener("hashchange", tabFromHash);
  $("event-filter").addEventListener("input", applyFilter);
  $("event-filter").addEventListener("change", applyFilter);  // also a clear that fires no input event
  $("pause").addEventListener("click", togglePause);
  $("type-refresh").addEventListener("click", loadTypeDetail);
  $("ask-kind").addEventListener("change", updateAskKind);
  $("ask-form").addEventListener("submit", ask);
  updateAskKind();
  tabFromHash();
  setStatus("connecting", "Connecting to the viewer…");
  renderEventCounts();
  connect();
}

if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
else start();
