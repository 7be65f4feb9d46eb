// sluice dashboard: the queue tree, each open queue's jobs, the decisions and the Topologies'
// domains with their free room, kept live by server-sent events. With window.SLUICE_DATA set (sluice simulate --html) it renders that
// data instead and talks to no server.
"use strict";

const STATIC = window.SLUICE_DATA || null;
const open = new Set(["root"]);
const shown = new Map(); // queue -> how many of its jobs are listed
let tree = { queues: [], timeline: [] };
const jobPages = new Map(); // queue -> {total, jobs}
let topologies = []; // the domain view: per Topology and level, its domains
const levelShown = new Map(); // Topology -> the level whose domains are listed
const allDomains = new Set(); // "topology:level" listed whole

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value);
  }
  for (const child of children) {
    if (child !== null && child !== undefined) node.append(child);
  }
  return node;
}

function amount(map, resource) {
  return map && map[resource] ? map[resource] : null;
}

// ``flavor``: the flavor a bar of a queue with flavors stands for, named in its label.
function bar(queue, resource, flavor) {
  const parts = ["guarantee", "deserved", "allocated", "capability"].map((k) => amount(queue[k], resource));
  const [g, d, a, c] = parts;
  const scale = Math.max(...parts.map((p) => (p ? p.m : 0)), 1);
  const pct = (p) => `${Math.min(100, (100 * p.m) / scale)}%`;
  const b = el("div", { class: "bar", title: flavor ? `${flavor} ${resource}` : resource });
  if (flavor) b.dataset.flavor = flavor;
  if (a) b.append(el("div", { class: "fill", style: `width:${pct(a)}` }));
  if (g) b.append(el("div", { class: "g", style: `left:${pct(g)}` }));
  if (d) b.append(el("div", { class: "d", style: `left:${pct(d)}` }));
  const words = [
    `${flavor ? `${flavor} ` : ""}${resource}: allocated ${a ? a.s : "0"}`,
    g ? `guarantee ${g.s}` : null,
    d ? `deserved ${d.s}` : null,
    c ? `capability ${c.s}` : null,
  ].filter(Boolean);
  return el("div", {}, b, el("div", { class: "bar-label" }, words.join(" · ")));
}

function resourcesOf(queue) {
  const names = new Set();
  for (const k of ["guarantee", "deserved", "allocated", "capability"]) {
    for (const r of Object.keys(queue[k] || {})) names.add(r);
  }
  return [...names].sort();
}

function jobTable(name) {
  const page = jobPages.get(name);
  if (!page || !page.jobs.length) return null;
  const rows = page.jobs.map((j) =>
    el("tr", { "data-job": `${j.namespace}/${j.name}`, "data-state": j.state },
      el("td", {}, `${j.namespace}/${j.name}`), el("td", {}, j.state),
      el("td", {}, j.position === null ? "-" : String(j.position)),
      el("td", { class: "reason" }, j.reason || "-"), el("td", {}, j.admittedAt || "-"),
      // The domain it runs in, or what it asks of a Topology while it waits.
      el("td", { "data-domain": "" }, j.domain || (j.asks ? `asks ${j.asks}` : "-")),
      // A resizable workload's pods admitted of those asked, its minimum and growth on hover.
      el("td", { "data-size": "", title: j.sizeWords || "" }, j.size || "-")));
  const table = el("table", { class: "jobs" },
    el("thead", {}, el("tr", {}, ...["job", "state", "position", "reason", "admitted", "domain", "size"].map((h) => el("th", {}, h)))),
    el("tbody", {}, ...rows));
  const box = el("div", {}, table);
  if (page.total > page.jobs.length) {
    box.append(el("button", { class: "more", onclick: () => more(name) },
      `${page.total - page.jobs.length} more`));
  }
  return box;
}

function renderQueue(queue, children) {
  const isOpen = open.has(queue.name);
  const state = el("span", { class: queue.valid === false ? "bad" : "" },
    queue.valid === false ? `${queue.state} (not valid)` : queue.state);
  if (queue.valid === false) state.title = queue.invalidReason;
  if (queue.overCapability) {
    // Its workloads' pods ask more than they were admitted with: it admits nothing more
    // that asks for a resource it is over in.
    state.className = "bad";
    state.textContent = `${state.textContent} (over capability)`;
    state.title = queue.overCapability;
  }
  const row = el("div", { class: "row", "data-queue": queue.name },
    el("span", { class: "name", onclick: () => toggle(queue.name), title: queue.name }, queue.name),
    state,
    el("span", { class: "num", title: "weight" }, `w${queue.weight ?? "-"}`),
    el("span", { class: "num", title: "share" }, (queue.share ?? 0).toFixed(2)),
    el("span", { class: "num", title: "pending / running", "data-counts": "" },
      `${queue.pending ?? 0}/${queue.running ?? 0}`),
    // Usage over time (the usage plugin): the resource that weighs most, in hours.
    ...(queue.usage ? [el("span", { class: "num usage", title: "usage over time", "data-usage": "" }, queue.usage)] : []),
    el("div", { class: "bars" }, ...resourcesOf(queue).map((r) => bar(queue, r)),
      // One bar per flavor and resource its entry counts (or what it holds there).
      ...(queue.flavors || []).flatMap((f) => f.resources.map((r) => bar(f, r, f.name)))));
  const node = el("div", { class: isOpen ? "queue open" : "queue" }, row);
  if (isOpen) {
    const table = jobTable(queue.name);
    if (table) node.append(table);
    if (STATIC && STATIC.history && STATIC.history[queue.name]) node.append(historyChart(queue.name));
    for (const child of children.get(queue.name) || []) node.append(renderQueue(child, children));
  }
  return node;
}

function historyChart(name) {
  // deserved vs allocated of each resource, before the simulated cycles and after them
  const h = STATIC.history[name];
  const box = el("div", { class: "chart" });
  for (const [resource, v] of Object.entries(h)) {
    const max = Math.max(v.deservedBefore, v.deservedAfter, v.allocatedBefore, v.allocatedAfter, 1);
    const w = (x) => Math.round((240 * x) / max);
    const svg = `<svg width="320" height="44" role="img" aria-label="${resource}">` +
      `<text x="0" y="10" font-size="10">${resource}</text>` +
      `<rect x="60" y="14" height="6" width="${w(v.deservedBefore)}" fill="#f79009" opacity=".5"/>` +
      `<rect x="60" y="21" height="6" width="${w(v.allocatedBefore)}" fill="#2e90fa" opacity=".5"/>` +
      `<rect x="60" y="30" height="6" width="${w(v.deservedAfter)}" fill="#f79009"/>` +
      `<rect x="60" y="37" height="6" width="${w(v.allocatedAfter)}" fill="#2e90fa"/>` +
      `<text x="0" y="27" font-size="9">before</text><text x="0" y="43" font-size="9">after</text></svg>`;
    const holder = el("div", { title: `${resource}: deserved ${v.deservedBefore}→${v.deservedAfter}, allocated ${v.allocatedBefore}→${v.allocatedAfter}` });
    holder.innerHTML = svg;
    box.append(holder);
  }
  return box;
}

function render() {
  const children = new Map();
  const roots = [];
  for (const q of tree.queues) {
    if (q.parent) {
      if (!children.has(q.parent)) children.set(q.parent, []);
      children.get(q.parent).push(q);
    } else {
      roots.push(q);
    }
  }
  const target = document.getElementById("tree");
  target.replaceChildren(...roots.map((q) => renderQueue(q, children)));
  document.getElementById("queue-count").textContent = `(${tree.queues.length})`;
  const items = tree.timeline.map((t) =>
    el("li", { "data-action": t.action },
      el("span", { class: `act ${t.action}` }, t.action), " ",
      t.job, " in ", t.queue, t.for ? ` for ${t.for}` : "", t.size ? ` at ${t.size}` : "",
      el("time", {}, t.time)));
  document.getElementById("timeline").replaceChildren(...items);
}

function roomBar(domain, resource) {
  const total = domain.total[resource];
  const free = domain.free[resource] || { m: 0, s: "0" };
  const b = el("div", { class: "bar" });
  b.append(el("div", { class: "fill", style: `width:${100 - Math.min(100, (100 * free.m) / Math.max(total.m, 1))}%` }));
  return el("div", { "data-room": resource }, b,
    el("div", { class: "bar-label" }, `${resource} ${free.s} free of ${total.s}`));
}

function domainTable(topology, level) {
  const rows = level.domains.map((d) => {
    const nodes = d.unusable ? `${d.nodes} (${d.unusable} not usable)` : String(d.nodes);
    const jobs = d.jobCount ? `${d.jobCount}: ${d.jobs.join(", ")}${d.jobCount > d.jobs.length ? " …" : ""}` : "-";
    return el("tr", { "data-domain": `${level.nodeLabel}=${d.value}` },
      el("td", {}, d.value), el("td", { "data-nodes": "" }, nodes),
      el("td", {}, ...Object.keys(d.total).sort().map((r) => roomBar(d, r))),
      el("td", { class: "jobs-in", "data-jobs": "" }, jobs));
  });
  const box = el("div", {}, el("table", { class: "domains" },
    el("thead", {}, el("tr", {}, ...["domain", "nodes", "free / total", "jobs admitted"].map((h) => el("th", {}, h)))),
    el("tbody", {}, ...rows)));
  if (level.domains.length < level.domainCount) {
    const key = `${topology.name}:${level.nodeLabel}`;
    box.append(el("button", { class: "more", onclick: () => {
      levelShown.set(topology.name, level.nodeLabel);
      allDomains.add(key);
      fetchDomains();
    } },
      `${level.domainCount - level.domains.length} more`));
  }
  return box;
}

function renderDomains() {
  const section = document.getElementById("domains");
  section.hidden = !topologies.length;
  const parts = topologies.map((t) => {
    const level = t.levels.find((l) => l.nodeLabel === t.shown);
    const buttons = t.levels.map((l) => el("button", {
      class: l.nodeLabel === t.shown ? "on" : "", "data-level": l.nodeLabel,
      onclick: () => { levelShown.set(t.name, l.nodeLabel); fetchDomains(); },
    }, `${l.nodeLabel} (${l.domainCount})`));
    return el("div", { class: "topology", "data-topology": t.name },
      el("h3", {}, t.name),
      t.notNested ? el("p", { class: "bad", "data-not-nested": "" }, `not nested: ${t.notNested}`) : null,
      el("div", { class: "levels" }, ...buttons), domainTable(t, level));
  });
  document.getElementById("topologies").replaceChildren(...parts);
}

async function fetchDomains() {
  if (STATIC) return;
  // Only the level shown of each Topology travels: a level of hosts may have thousands.
  const query = new URLSearchParams();
  for (const [name, level] of levelShown) query.append("show", `${name}:${level}`);
  const shown = [...levelShown].map(([name, level]) => `${name}:${level}`);
  if (shown.some((key) => allDomains.has(key))) query.set("all", "1");
  const resp = await fetch(`api/topology?${query}`);
  if (resp.ok) topologies = (await resp.json()).topologies;
  renderDomains();
}

async function fetchJobs(name) {
  const limit = shown.get(name) || 50;
  if (STATIC) {
    const all = STATIC.jobs[name] || [];
    jobPages.set(name, { total: all.length, jobs: all.slice(0, limit) });
    return;
  }
  const resp = await fetch(`api/queues/${encodeURIComponent(name)}/jobs?offset=0&limit=${limit}`);
  if (resp.ok) jobPages.set(name, await resp.json());
}

async function toggle(name) {
  if (open.has(name)) {
    open.delete(name);
  } else {
    open.add(name);
    await fetchJobs(name);
  }
  render();
}

async function more(name) {
  shown.set(name, (shown.get(name) || 50) + 200);
  await fetchJobs(name);
  render();
}

let refreshing = null;
async function refresh() {
  if (refreshing) return refreshing;
  refreshing = (async () => {
    try {
      const resp = await fetch("api/tree");
      if (!resp.ok) return;
      tree = await resp.json();
      await Promise.all([...open].map(fetchJobs));
      render();
      await fetchDomains();
    } finally {
      refreshing = null;
    }
  })();
  return refreshing;
}

function live() {
  const status = document.getElementById("status");
  const events = new EventSource("api/events");
  events.onopen = () => { status.textContent = "live"; status.className = "status live"; };
  events.onerror = () => { status.textContent = "reconnecting…"; status.className = "status"; };
  events.onmessage = () => refresh();
  refresh();
  // Free room changes with pods, which the event stream does not tell.
  setInterval(fetchDomains, 5000);
}

function openDepth(depth) {
  // the top of the tree starts open: root and its children
  const parent = new Map(tree.queues.map((q) => [q.name, q.parent]));
  for (const q of tree.queues) {
    let d = 0;
    for (let p = q.parent; p; p = parent.get(p)) d += 1;
    if (d < depth) open.add(q.name);
  }
}

if (STATIC) {
  tree = STATIC.tree;
  document.getElementById("status").textContent = STATIC.title || "report";
  openDepth(2);
  Promise.all([...open].map(fetchJobs)).then(render);
} else {
  live();
}
