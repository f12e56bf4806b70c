// The live web view: renders /ui/events (server-sent events) into the page, no reload.
// Every value is set as text, never as HTML, so nothing the swarm holds can inject markup.
"use strict";

const view = { state: null, selected: null, connected: false };

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "text") node.textContent = value;
    else if (key === "style") node.style.cssText = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function hue(name) {
  let h = 0;
  for (const ch of name) h = (h * 31 + ch.codePointAt(0)) % 360;
  return h;
}

function chip(service, text, extra) {
  return el("span", { class: "chip", style: `--hue: ${hue(service)}`, ...extra }, text);
}

// Times arrive as ISO 8601 in UTC; the page shows them in the viewer's own time zone, in
// the same order of fields (2026-12-01 20:22:44), with the UTC time on hover.
function pad(n) {
  return String(n).padStart(2, "0");
}

function localTime(iso) {
  const t = new Date(iso);
  if (Number.isNaN(t.getTime())) return iso;
  const day = `${t.getFullYear()}-${pad(t.getMonth() + 1)}-${pad(t.getDate())}`;
  return `${day} ${pad(t.getHours())}:${pad(t.getMinutes())}:${pad(t.getSeconds())}`;
}

function timeElement(iso) {
  return el("time", { datetime: iso, title: iso, text: localTime(iso) });
}

function renderStatus(state) {
  const link = view.connected ? "live" : "reconnecting…";
  const when = state ? `, last cycle ${localTime(state.time)} (local time)` : "";
  const role = state ? `${state.role}: ` : "";
  document.getElementById("status").textContent = `${role}${link}${when}`;
}

function preferredBy(state) {
  const preferred = new Map();
  const possible = new Map();
  for (const s of state.services) {
    s.preferred.forEach((host, i) => {
      if (!preferred.has(host)) preferred.set(host, []);
      preferred.get(host).push(`${s.service.name} #${i + 1}`);
    });
    for (const host of s.possible) {
      if (!possible.has(host)) possible.set(host, []);
      possible.get(host).push(s.service.name);
    }
  }
  return { preferred, possible };
}

function renderMap(state) {
  const owners = preferredBy(state);
  const preferredOf = new Map(state.services.map((s) => [s.service.name, new Set(s.preferred)]));
  const map = document.getElementById("map");
  map.replaceChildren(
    ...state.domains.map((domain) =>
      el(
        "section",
        { class: "domain", "aria-label": domain.name ? `fault domain ${domain.name}` : "nodes" },
        el("h3", { text: domain.name ? `${state.fault_domain_level} ${domain.name}` : "no fault domain" }),
        el(
          "div",
          { class: "nodes" },
          domain.nodes.map((node) => {
            const badges = [el("span", { class: `badge state-${node.state}`, text: node.state })];
            if (node.availability !== "active")
              badges.push(el("span", { class: "badge warn", text: node.availability }));
            if (node.role === "manager")
              badges.push(el("span", { class: "badge", text: node.leader ? "leader" : "manager" }));
            for (const mark of node.marks) badges.push(el("span", { class: "badge mark", text: mark }));
            const pref = owners.preferred.get(node.hostname) || [];
            const poss = owners.possible.get(node.hostname) || [];
            return el(
              "article",
              {
                class: `node state-${node.state}`,
                "data-node": node.hostname,
                "data-state": node.state,
                "aria-label": `node ${node.hostname}, ${node.state}`,
              },
              el("h4", { text: node.hostname }),
              el("div", { class: "badges" }, badges),
              pref.length ? el("p", { class: "owners", text: `preferred by ${pref.join(", ")}` }) : null,
              poss.length ? el("p", { class: "owners", text: `possible for ${poss.join(", ")}` }) : null,
              el(
                "ul",
                { class: "tasks", "aria-label": `tasks on ${node.hostname}` },
                node.tasks.map((task) => {
                  const star = preferredOf.get(task.service)?.has(node.hostname) ? " ★" : "";
                  return el(
                    "li",
                    {},
                    chip(task.service, `${task.service}.${task.slot}${star}`, {
                      "data-service": task.service,
                      "data-slot": String(task.slot),
                      title: `${task.service}.${task.slot} ${task.state}`,
                    }),
                    task.state !== "running" ? el("span", { class: "sub", text: ` ${task.state}` }) : null,
                  );
                }),
              ),
            );
          }),
        ),
      ),
    ),
  );
  const pending = state.services.flatMap((s) => s.pending.map((p) => ({ service: s.service.name, ...p })));
  document.getElementById("pending").replaceChildren(
    pending.length ? el("h3", { text: `Pending tasks (${pending.length})` }) : "",
    pending.length
      ? el(
          "ul",
          { class: "pending" },
          pending.map((p) =>
            el(
              "li",
              { "data-pending": `${p.service}.${p.slot}` },
              chip(p.service, `${p.service}.${p.slot}`),
              ` Swarm says: ${p.swarm}`,
              el(
                "details",
                {},
                el("summary", { text: "which filter refuses which node" }),
                el(
                  "ul",
                  {},
                  Object.entries(p.nodes).map(([host, refusals]) =>
                    el("li", { text: `${host}: ${refusals.length ? refusals.join("; ") : "eligible now"}` }),
                  ),
                ),
              ),
            ),
          ),
        )
      : "",
  );
}

function renderServices(state) {
  const body = document.querySelector("#services tbody");
  body.replaceChildren(
    ...state.services.map((s) => {
      const want = s.desired === null ? "global" : String(s.desired);
      const short = s.desired !== null && s.running < s.desired;
      return el(
        "tr",
        { "data-service": s.service.name, class: view.selected === s.service.name ? "selected" : null },
        el(
          "th",
          { scope: "row" },
          el("button", {
            type: "button",
            "aria-pressed": view.selected === s.service.name ? "true" : "false",
            onclick: () => select(s.service.name),
          }, chip(s.service.name, s.service.name)),
        ),
        el("td", { class: short ? "short" : null, text: `${s.running} / ${want}` }),
        el("td", { text: s.managed ? "yes" : "no" }),
        el("td", { text: s.preferred.join(", ") || "–" }),
        el(
          "td",
          {},
          s.possible.join(", ") || "any",
          s.possible_unenforced ? el("div", { class: "gap", "data-gap": s.service.name, text: `⚠ not yet enforced: ${gapTasks(s.possible_unenforced)}` }) : "",
        ),
      );
    }),
  );
  renderDetail(state);
}

// Tasks on nodes that are no possible owner of their service, which the controller
// could not move yet (core/kernel/possible_gaps).
function gapTasks(gap) {
  return `${gap.count} task(s) on ${Object.keys(gap.tasks).join(", ")}`;
}

function select(name) {
  view.selected = view.selected === name ? null : name;
  if (view.state) renderServices(view.state);
  const detail = document.getElementById("detail");
  if (view.selected) detail.querySelector("h3")?.focus();
}

function table(caption, heads, rows) {
  return el(
    "table",
    { class: "small" },
    el("caption", { text: caption }),
    el("thead", {}, el("tr", {}, heads.map((h) => el("th", { scope: "col", text: h })))),
    el("tbody", {}, rows.map((r) => el("tr", {}, r.map((c) => el("td", { text: c ?? "–" }))))),
  );
}

function renderDetail(state) {
  const detail = document.getElementById("detail");
  const s = state.services.find((x) => x.service.name === view.selected);
  if (!s) {
    detail.replaceChildren(el("p", { class: "hint", text: "Choose a service to see why its tasks run where they run." }));
    return;
  }
  detail.replaceChildren(
    el("h3", { tabindex: "-1", text: `${s.service.name}: why its tasks run where they run` }),
    s.record ? el("p", { text: s.record }) : "",
    s.possible_unenforced
      ? el("p", { class: "gap", role: "note", text: `Possible owners not yet enforced: ${gapTasks(s.possible_unenforced)}. Why: ${s.possible_unenforced.why}` })
      : "",
    table("Replicas", ["Task", "Node", "State", "Why there"], s.replicas.map((r) => [
      `${s.service.name}.${r.slot}`, r.node, r.state, r.reasons.join(" · "),
    ])),
    s.constraints.length
      ? table("Constraints", ["Constraint", "Whose"], s.constraints.map((c) => [c.constraint, c.whose]))
      : "",
    table("The controller now", ["Rule", "Outcome", "Reason"], s.now.map((d) => [d.rule, d.outcome, d.reason])),
    s.settings.length
      ? table("Effective settings", ["Setting", "Value", "From"], s.settings.map((x) => [x.setting, x.value, x.source]))
      : el("p", { text: "Not managed: no settings apply." }),
  );
}

function options(select, values) {
  const keep = select.value;
  select.replaceChildren(el("option", { value: "", text: "all" }), ...values.map((v) => el("option", { value: v, text: v })));
  select.value = values.includes(keep) ? keep : "";
}

function renderDecisions(state) {
  const decisions = state.decisions;
  const uniq = (xs) => [...new Set(xs)].sort();
  options(document.getElementById("f-service"), uniq(state.services.map((s) => s.service.name)));
  options(document.getElementById("f-rule"), uniq(decisions.map((d) => d.rule)));
  options(document.getElementById("f-outcome"), uniq(decisions.map((d) => d.outcome)));
  const service = document.getElementById("f-service").value;
  const rule = document.getElementById("f-rule").value;
  const outcome = document.getElementById("f-outcome").value;
  const text = document.getElementById("f-text").value.toLowerCase();
  const shown = decisions.filter(
    (d) =>
      (!service || d.subject === `service ${service}`) &&
      (!rule || d.rule === rule) &&
      (!outcome || d.outcome === outcome) &&
      (!text || `${d.subject} ${d.reason} ${d.action ?? ""}`.toLowerCase().includes(text)),
  );
  document.querySelector("#decisions tbody").replaceChildren(
    ...shown.slice(0, 200).map((d) =>
      el(
        "tr",
        { "data-outcome": d.outcome },
        el("td", {}, timeElement(d.time)),
        el("td", { text: d.rule }),
        el("td", { text: d.subject }),
        el("td", {}, el("span", { class: `outcome o-${d.outcome}`, text: d.outcome })),
        el(
          "td",
          {},
          d.reason,
          d.action ? el("div", { class: "action", text: `→ ${d.action}` }) : null,
          state.trace_url && d.trace_id
            ? el("a", { href: state.trace_url.replace("{trace_id}", d.trace_id), rel: "noopener", text: "trace" })
            : null,
        ),
      ),
    ),
  );
}

function render(state) {
  view.state = state;
  renderStatus(state);
  renderMap(state);
  renderServices(state);
  renderDecisions(state);
}

function connect() {
  const events = new EventSource("/ui/events");
  events.addEventListener("open", () => {
    view.connected = true;
    renderStatus(view.state);
  });
  events.addEventListener("state", (event) => {
    view.connected = true;
    render(JSON.parse(event.data));
  });
  events.addEventListener("error", () => {
    view.connected = false; // EventSource reconnects by itself, unless refused
    renderStatus(view.state);
    if (events.readyState === EventSource.CLOSED) setTimeout(reconnect, 2000);
  });
}

// Refused, not cut: a session that ended goes back to the login, anything else retries.
async function reconnect() {
  try {
    const reply = await fetch("/ui/state", { credentials: "same-origin" });
    if (reply.status === 401) {
      location.assign("/ui/login");
      return;
    }
  } catch (_) {
    // the controller is away: try again below
  }
  connect();
}

for (const kind of ["input", "change"])
  document.getElementById("filters").addEventListener(kind, () => view.state && renderDecisions(view.state));
document.getElementById("filters").addEventListener("submit", (e) => e.preventDefault());
connect();
