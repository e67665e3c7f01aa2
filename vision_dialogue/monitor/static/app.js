// The monitor page: renders the server's session snapshot (GET /api/state) and every update
// pushed on /events (server-sent events). No libraries, no network beyond this server.
"use strict";
const $ = (sel) => document.querySelector(sel);
const LABELS = { llm: "LLM", vfm: "VFM", camera: "camera" };

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined && text !== null) e.textContent = text;
  return e;
}

function thumb(frame, small) {
  const img = el("img", "thumb " + frame.status + (small ? " small" : ""));
  img.alt = "frame " + frame.id + " (" + frame.status + ")";
  img.title = img.alt + (frame.observation ? ": " + frame.observation : "");
  if (frame.thumbnail) img.src = frame.thumbnail;
  return img;
}

function secs(v) { return v === null || v === undefined ? "–" : Number(v).toFixed(1); }

function renderItem(item, frames) {
  const li = el("li", item.kind);
  if (item.kind === "frame") {
    li.classList.add(item.status);
    li.dataset.frame = item.id;
    li.append(thumb(item, false));
    const body = el("div");
    body.append(el("div", "status", "frame " + item.id + " · " + item.status));
    body.append(el("div", "observation", item.observation ||
                   (item.objects ? "detector: " + item.objects : "") || (item.dark ? "dark" : "")));
    li.append(body);
  } else if (item.kind === "image") {
    const img = el("img", "thumb generated");
    img.alt = img.title = "made by a tool: " + (item.image_file || "");
    if (item.thumbnail) img.src = item.thumbnail;
    li.append(img, el("div", "status", "image made by a tool: " + (item.image_file || "")));
  } else if (item.kind === "summary") {
    const body = el("div");
    const ids = item.frame_ids;
    body.append(el("div", "status", "summary of frames " + ids[0] +
                   (ids.length > 1 ? "–" + ids[ids.length - 1] : "") + " (" + item.method + ")"));
    const row = el("div", "replaced");
    for (const id of ids) if (frames[id]) row.append(thumb(frames[id], true));
    body.append(row, el("div", "text", item.text));
    li.append(body);
  } else if (item.kind === "user" || item.kind === "robot") {
    li.append(el("span", "who", item.kind === "user" ? "you:" : "robot:"));
    const body = el("div");
    body.append(el("div", "text", item.text));
    if (item.kind === "robot" && item.skill) {
      body.append(el("div", "meta", "said for the application (skill/" + item.skill + ")"));
    } else if (item.kind === "robot") {
      if (item.fallback) li.classList.add("fallback");
      body.append(el("div", "meta", "first sentence " + secs(item.first_sentence_s) +
                     " s · reply " + secs(item.reply_s) + " s · " +
                     (item.frames_in_prompt || []).length + " frames in the prompt" +
                     (item.fallback ? " · fallback: " + (item.error || "") : "")));
      if (item.tools && item.tools.length) {
        const ul = el("ul", "tools");
        for (const t of item.tools) {
          ul.append(el("li", "tool", "tool " + t.name + "(" + JSON.stringify(t.arguments) + ") → " +
                       (t.error ? "error: " + t.error : (t.image_file || t.text || ""))));
        }
        body.append(ul);
      }
    }
    li.append(body);
  } else {
    if (item.level) li.classList.add(item.level);
    li.append(el("span", "text", item.text));
  }
  return li;
}

function plot(svg, series, colours, least) {
  // series: list of arrays of numbers (one point per turn), drawn on a shared y scale whose top
  // is at least `least` (so a flat line of fast turns does not fill the plot)
  svg.replaceChildren();
  const W = 320, H = 140, L = 34, B = 16, T = 8;
  const all = series.flat().filter((v) => v !== null && v !== undefined);
  const n = Math.max(...series.map((s) => s.length), 0);
  const top = Math.max(least, ...all);
  const ns = "http://www.w3.org/2000/svg";
  const add = (tag, attrs, text) => {
    const e = document.createElementNS(ns, tag);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    svg.append(e);
  };
  add("line", { class: "axis", x1: L, y1: H - B, x2: W, y2: H - B });
  add("line", { class: "axis", x1: L, y1: T, x2: L, y2: H - B });
  add("text", { x: 2, y: T + 8 }, top >= 100 ? Math.round(top) : top.toFixed(1));
  add("text", { x: 2, y: H - B }, "0");
  add("text", { x: W - 40, y: H - 3 }, n ? "turn " + n : "no turns");
  series.forEach((s, k) => {
    const pts = s.map((v, i) => (v === null || v === undefined) ? null :
      (L + (n > 1 ? i * (W - L - 4) / (n - 1) : 0)).toFixed(1) + "," +
      (H - B - v / top * (H - B - T)).toFixed(1)).filter((p) => p);
    if (pts.length) add("polyline", { class: colours[k], points: pts.join(" ") });
  });
}

function render(state) {
  $("#source").textContent = state.source === "live" ? "live" : "session " + state.source;
  const sp = $("#speech");
  sp.textContent = "speech: " + state.speech.state;
  sp.className = "badge " + state.speech.state;
  for (const [name, h] of Object.entries(state.health)) {
    const b = $("#health-" + name);
    if (!b) continue;
    b.className = "badge " + (h.ok === true ? "ok" : h.ok === false ? "bad" : "unknown");
    b.title = h.detail || "";
    b.textContent = (LABELS[name] || name) + (h.ok === false ? " ✗" : h.ok === true ? " ✓" : " ?");
  }
  const frames = {};
  for (const it of state.items) if (it.kind === "frame") frames[it.id] = it;
  const list = $("#timeline");
  const atBottom = list.scrollTop + list.clientHeight >= list.scrollHeight - 20;
  list.replaceChildren(...state.items.map((it) => renderItem(it, frames)));
  if (atBottom) list.scrollTop = list.scrollHeight;
  const turns = state.turns;
  plot($("#prompt-plot"), [turns.map((t) => t.prompt_chars)], ["prompt"], 1000);
  plot($("#latency-plot"), [turns.map((t) => t.first_sentence_s), turns.map((t) => t.reply_s)],
       ["first", "reply"], 1.0);
  const body = $("#turns tbody");
  body.replaceChildren(...turns.slice(-12).map((t) => {
    const tr = el("tr");
    for (const v of [t.turn_id, secs(t.first_sentence_s), secs(t.reply_s), t.frames_in_prompt,
                     t.prompt_chars === null || t.prompt_chars === undefined ? "–" : t.prompt_chars]) {
      tr.append(el("td", "", String(v)));
    }
    return tr;
  }));
  renderPeople(state.people || []);
  document.body.dataset.version = state.version;
}

// people_node's people/state: who is recognised, how sure, and whether they said yes
function renderPeople(people) {
  const body = $("#people tbody");
  if (!people.length) {
    const tr = el("tr");
    const td = el("td", "", "nobody in view");
    td.colSpan = 4;
    tr.append(td);
    body.replaceChildren(tr);
    return;
  }
  body.replaceChildren(...people.map((p) => {
    const tr = el("tr", p.known ? "known" : "stranger");
    tr.append(el("td", "", p.name || (p.known ? "(no name)" : "stranger")),
              el("td", "", p.person_id),
              el("td", "", p.known && p.confidence !== null ? Number(p.confidence).toFixed(2) : "–"),
              el("td", "consent " + p.consent, p.consent));
    return tr;
  }));
}

function connect() {
  const es = new EventSource("events");
  es.addEventListener("state", (ev) => {
    $("#connection").textContent = "live";
    $("#connection").className = "badge ok";
    render(JSON.parse(ev.data));
  });
  es.onerror = () => {
    $("#connection").textContent = "reconnecting";
    $("#connection").className = "badge bad";
  };
}

fetch("api/state").then((r) => r.json()).then(render).finally(connect);
