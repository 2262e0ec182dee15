"use strict";
// The tirlab trajectory viewer. Every text on the page comes from a model, a dataset or a user: it is only ever
// set as textContent, never parsed as HTML. The state (filters, page, open episode) lives in the URL's #hash, so
// a link names an episode, or a side-by-side view, exactly.
window.tirlabViewer = (() => {
  const data = JSON.parse(document.getElementById("tirlab-index").textContent);
  const rows = data.rows;
  rows.forEach((r, k) => { r.k = k; r.text = [r.id, r.q, r.pred, r.truth].join("\n").toLowerCase(); });
  const PAGE = 100;
  const STATUSES = ["correct", "wrong", "partial", "unscored", "reference"];
  const SORTS = {row: "order of the run", id: "id", score: "score", calls: "calls", turns: "turns", tok: "tokens",
                 lat: "latency", rew: "reward", step: "step"};
  const AGREE = {all: "all tasks", differ: "where they differ", a: "only A right", b: "only B right",
                 both: "both right", neither: "both wrong"};
  const $ = (id) => document.getElementById(id);
  const groups = unique(rows.map((r) => r.g));
  const timing = {};  // milliseconds: ready (since the page began loading), render (the last list and filters)
  let state = {};
  let shown = [];  // the rows (or pairs) the list shows, in order
  let detailKey = null;  // the episode (or pair) the detail pane shows

  function unique(values) {  // "step 50" before "step 100"
    return [...new Set(values)].sort((a, b) => a.localeCompare(b, undefined, {numeric: true}));
  }

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value == null || value === false) continue;
      if (key === "class") node.className = value;
      else if (key === "text") node.textContent = value;
      else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else node.setAttribute(key, value === true ? "" : value);
    }
    for (const child of children.flat(Infinity)) {
      if (child == null || child === false) continue;
      node.appendChild(typeof child === "object" ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  // -- the episodes' full text, loaded a chunk at a time --------------------------------------------------------
  const chunks = new Map();
  const waiting = new Map();
  function chunk(number, episodes) {
    chunks.set(number, episodes);
    (waiting.get(number) || []).forEach((waiter) => waiter.resolve());
    waiting.delete(number);
  }
  function episode(k) {
    const number = Math.floor(k / data.chunk);
    const pick = () => chunks.get(number)[k % data.chunk];
    if (chunks.has(number)) return Promise.resolve(pick());
    return new Promise((resolve, reject) => {
      if (!waiting.has(number)) {
        waiting.set(number, []);
        const script = el("script", {src: data.prefix + String(number).padStart(5, "0") + ".js"});
        script.onerror = () => {  // every episode waiting on this file hears of it; a later open tries again
          const failed = waiting.get(number) || [];
          waiting.delete(number);
          script.remove();
          failed.forEach((waiter) => waiter.reject(new Error(script.src)));
        };
        document.head.appendChild(script);
      }
      waiting.get(number).push({resolve: () => resolve(pick()), reject});
    });
  }

  // -- filters and the URL --------------------------------------------------------------------------------------
  const FIELDS = {q: "f-search", g: "f-group", cat: "f-cat", st: "f-status", stop: "f-stop", tool: "f-tool",
                  cmin: "f-cmin", cmax: "f-cmax", sort: "f-sort", dir: "f-dir", a: "f-a", b: "f-b", agree: "f-agree"};
  function fill(id, values, counts, blank) {
    const select = $(id);
    select.replaceChildren(el("option", {value: ""}, blank));
    for (const value of values) {
      select.appendChild(el("option", {value}, counts ? `${value} (${counts.get(value) || 0})` : value));
    }
  }
  function count(values) {
    const counts = new Map();
    values.forEach((v) => counts.set(v, (counts.get(v) || 0) + 1));
    return counts;
  }
  function setupFilters() {
    $("title").textContent = data.title;
    $("note").textContent = data.note;
    document.title = data.title;
    fill("f-group", groups, count(rows.map((r) => r.g)), "all");
    fill("f-cat", unique(rows.map((r) => r.cat)), count(rows.map((r) => r.cat)), "all");
    fill("f-status", STATUSES.filter((s) => rows.some((r) => r.st === s)), count(rows.map((r) => r.st)), "all");
    fill("f-stop", unique(rows.map((r) => r.stop)), count(rows.map((r) => r.stop)), "all");
    fill("f-tool", unique(rows.flatMap((r) => r.tools)).concat(["(none)"]),
         count(rows.flatMap((r) => (r.tools.length ? r.tools : ["(none)"]))), "any");
    const sorts = Object.keys(SORTS).filter((key) => key === "row" || key === "id" || rows.some((r) => r[key] != null));
    $("f-sort").replaceChildren(...sorts.map((key) => el("option", {value: key}, SORTS[key])));
    fill("f-a", groups, null, "-");
    fill("f-b", groups, null, "-");
    $("f-agree").replaceChildren(...Object.entries(AGREE).map(([key, label]) => el("option", {value: key}, label)));
    $("compare-controls").hidden = groups.length < 2;
    for (const [key, id] of Object.entries(FIELDS)) {
      $(id).addEventListener(id === "f-search" ? "input" : "change", () => {
        state[key] = $(id).value;
        state.page = 0;
        if (key === "a" || key === "b") { delete state.id; delete state.og; }
        update();
      });
    }
    $("f-reset").addEventListener("click", () => { state = {}; update(); });
    $("filters").addEventListener("submit", (event) => event.preventDefault());
    window.addEventListener("hashchange", () => { readHash(); render(); });
    document.addEventListener("keydown", (event) => {
      if (event.target.closest("input, select") || !["j", "k"].includes(event.key)) return;
      step(event.key === "j" ? 1 : -1);
    });
  }
  function readHash() {
    state = Object.fromEntries(new URLSearchParams(location.hash.slice(1)));
    state.page = Math.max(0, Math.floor(Number(state.page)) || 0);
  }
  function hashOf(values) {
    const params = new URLSearchParams();
    for (const [key, value] of Object.entries(values)) {
      if (value !== "" && value != null && value !== 0 && key !== "paged") params.set(key, value);
    }
    return "#" + params.toString();
  }
  function update() {
    history.replaceState(null, "", hashOf(state));
    render();
  }
  const comparing = () => state.a && state.b && state.a !== state.b;

  function passes(r) {
    if (state.g && !comparing() && r.g !== state.g) return false;
    if (state.cat && r.cat !== state.cat) return false;
    if (state.st && r.st !== state.st) return false;
    if (state.stop && r.stop !== state.stop) return false;
    if (state.tool && !(state.tool === "(none)" ? r.tools.length === 0 : r.tools.includes(state.tool))) return false;
    if (state.cmin !== undefined && state.cmin !== "" && r.calls < Number(state.cmin)) return false;
    if (state.cmax !== undefined && state.cmax !== "" && r.calls > Number(state.cmax)) return false;
    if (state.q && !r.text.includes(state.q.toLowerCase())) return false;
    return true;
  }
  function sortKey(r) {
    const key = state.sort || "row";
    return key === "row" ? r.k : r[key];
  }
  function ordered(list, of) {
    const sign = state.dir === "desc" ? -1 : 1;
    return list.sort((x, y) => {
      const a = sortKey(of(x)), b = sortKey(of(y));
      if (a == null || b == null) return a == null ? (b == null ? 0 : 1) : -1;  // no value: last
      return (a < b ? -1 : a > b ? 1 : 0) * sign || of(x).k - of(y).k;
    });
  }
  function pairs() {
    const byId = new Map();
    for (const r of rows) {
      if (r.g !== state.a && r.g !== state.b) continue;
      const pair = byId.get(r.id) || {id: r.id};
      pair[r.g === state.a ? "A" : "B"] = r;
      byId.set(r.id, pair);
    }
    // right: correct or partly (a score above 0); wrong: scored 0. Unscored and missing sides are neither.
    const right = (r) => r && r.score != null && r.score > 0;
    const wrong = (r) => r && r.score != null && r.score <= 0;
    const agree = state.agree || "all";
    return [...byId.values()].filter((p) => {
      if (!((p.A && passes(p.A)) || (p.B && passes(p.B)))) return false;
      p.differ = !p.A || !p.B || p.A.st !== p.B.st || p.A.score !== p.B.score || p.A.pred !== p.B.pred;
      if (agree === "differ") return p.differ;
      if (agree === "a") return right(p.A) && wrong(p.B);
      if (agree === "b") return right(p.B) && wrong(p.A);
      if (agree === "both") return right(p.A) && right(p.B);
      if (agree === "neither") return wrong(p.A) && wrong(p.B);
      return true;
    });
  }

  // -- the list ---------------------------------------------------------------------------------------------------
  function render() {
    const began = performance.now();
    for (const [key, id] of Object.entries(FIELDS)) {
      const field = $(id);
      const fallback = {"f-sort": "row", "f-dir": "asc", "f-agree": "all"}[id] || "";
      if (field.tagName === "SELECT" && ![...field.options].some((o) => o.value === (state[key] || fallback))) {
        delete state[key];  // a link from another page: a value this page does not have is no filter
      }
      field.value = state[key] || fallback;
    }
    const compare = comparing();
    shown = compare ? ordered(pairs(), (p) => p.A || p.B) : ordered(rows.filter(passes), (r) => r);
    const pages = Math.max(1, Math.ceil(shown.length / PAGE));
    if (state.id && !state.paged) {  // an episode opened by a link: show the page that holds it
      const at = shown.findIndex((x) => x.id === state.id && (compare || x.g === state.og));
      if (at >= 0) state.page = Math.floor(at / PAGE);
      state.paged = true;
    }
    state.page = Math.max(0, Math.min(state.page || 0, pages - 1));
    const start = state.page * PAGE;
    $("count").textContent = compare ? `${shown.length} of ${new Set(rows.filter((r) => r.g === state.a || r.g === state.b).map((r) => r.id)).size} tasks`
                                     : `${shown.length} of ${rows.length} episodes`;
    const go = (page) => el("button", {type: "button", disabled: page < 0 || page >= pages,
                                       onclick: () => { state.page = page; update(); }});
    $("pager").replaceChildren(
      Object.assign(go(state.page - 1), {textContent: "‹ previous"}),
      el("span", {}, `page ${state.page + 1} of ${pages}`),
      Object.assign(go(state.page + 1), {textContent: "next ›"}));
    const slice = shown.slice(start, start + PAGE);
    if (compare) {
      $("rows-head").replaceChildren(el("tr", {}, el("th", {}, ""), el("th", {}, "task"), el("th", {}, "A"),
                                        el("th", {}, "B"), el("th", {}, "calls A / B")));
      $("rows-body").replaceChildren(...slice.map(pairRow));
    } else {
      const extra = ["tok", "lat", "rew", "step"].filter((key) => rows.some((r) => r[key] != null));
      $("rows-head").replaceChildren(el("tr", {}, ["", "episode", groups.length > 1 ? "group" : null, "category",
                                                   "result", "stop", "calls", "turns", ...extra.map((k) => SORTS[k])]
                                                   .filter((h) => h !== null).map((h) => el("th", {}, h))));
      $("rows-body").replaceChildren(...slice.map((r) => row(r, extra)));
    }
    scrollToOpen();
    const shownKey = [state.id, state.og, compare && state.a, compare && state.b].join("\u0000");
    if (shownKey !== detailKey) renderDetail();  // filters and pages leave the open episode as it is
    detailKey = shownKey;
    timing.render = performance.now() - began;
  }
  function scrollToOpen() {  // up or down only: the list keeps its sideways scroll
    const open = $("rows-body").querySelector("tr.open");
    if (!open) return;
    const list = $("list"), row = open.getBoundingClientRect(), view = list.getBoundingClientRect();
    const top = view.top + $("pager").offsetHeight + $("rows-head").offsetHeight;
    if (row.top < top) list.scrollTop -= top - row.top;
    else if (row.bottom > view.bottom) list.scrollTop += row.bottom - view.bottom;
  }
  function thumb(r) {
    return el("td", {class: "thumb"}, r && r.thumb ? el("img", {src: r.thumb, loading: "lazy", alt: ""}) : "");
  }
  function badge(r) {
    if (!r) return el("span", {class: "badge missing"}, "missing");
    const score = r.score != null && r.st !== "correct" && r.st !== "wrong" ? ` ${Number(r.score).toFixed(2)}` : "";
    return el("span", {class: "badge " + r.st}, r.st + score);
  }
  function number(value) {
    if (typeof value !== "number") return value == null ? "-" : String(value);
    return Number.isInteger(value) ? String(value) : value.toFixed(3);
  }
  function row(r, extra) {
    const open = state.id === r.id && state.og === r.g;
    return el("tr", {class: open ? "open" : null, "data-k": r.k, onclick: () => openEpisode(r.g, r.id)},
      thumb(r), idCell(r), groups.length > 1 ? el("td", {}, r.g) : null, el("td", {}, r.cat), el("td", {}, badge(r)),
      el("td", {}, r.stop), el("td", {title: r.tools.join(", ")}, r.calls), el("td", {}, r.turns),
      ...extra.map((key) => el("td", {}, number(r[key]))));
  }
  function idCell(r) {
    return el("td", {class: "id"}, el("div", {class: "ident"}, r.id), el("div", {class: "q", title: r.q}, r.q));
  }
  function pairRow(p) {
    const open = state.id === p.id;
    return el("tr", {class: (open ? "open " : "") + (p.differ ? "differ" : ""), "data-id": p.id,
                     onclick: () => openEpisode(null, p.id)},
      thumb(p.A || p.B), idCell(p.A || p.B), el("td", {class: "pairst"}, badge(p.A)),
      el("td", {class: "pairst"}, badge(p.B)), el("td", {}, `${p.A ? p.A.calls : "-"} / ${p.B ? p.B.calls : "-"}`));
  }
  function openEpisode(group, id) {
    state.id = id;
    if (group == null) delete state.og; else state.og = group;
    update();
  }
  function step(delta) {
    const compare = comparing();
    const at = shown.findIndex((x) => (compare ? x.id === state.id : x.id === state.id && x.g === state.og));
    const next = shown[Math.max(0, Math.min(shown.length - 1, at + delta))];
    if (!next) return;
    state.page = Math.floor(shown.indexOf(next) / PAGE);
    openEpisode(compare ? null : next.g, next.id);
  }

  // -- one episode ------------------------------------------------------------------------------------------------
  function renderDetail() {
    const pane = $("detail");
    if (!state.id) {
      pane.replaceChildren(el("p", {class: "hint"}, "Pick an episode on the left (keys: j / k for next / previous)."));
      return;
    }
    const find = (group) => rows.find((r) => r.id === state.id && r.g === group);
    const sides = comparing() ? [["A", find(state.a)], ["B", find(state.b)]] : [[null, find(state.og)]];
    if (sides.every(([, r]) => !r)) {
      pane.replaceChildren(el("p", {class: "failed"}, `No episode ${state.id} here.`));
      return;
    }
    const slots = sides.map(([label, r]) => {
      const body = el("div", {}, el("p", {class: "loading"}, r ? "loading…" : "No episode of this task."));
      if (r) {
        episode(r.k).then((e) => body.replaceChildren(e && e.id === r.id ? showEpisode(e, r) : el("p", {class: "failed"},
                            "This page was written again since it opened: reload it.")),
                          (err) => body.replaceChildren(el("p", {class: "failed"}, `Could not load ${err.message}: ` +
                            `keep the ${decodeURI(data.prefix.split("/")[0])} folder beside this page.`)));
      }
      return el("div", {}, label ? el("div", {class: "side"}, `${label}: ${label === "A" ? state.a : state.b}`) : "", body);
    });
    pane.replaceChildren(slots.length > 1 ? el("div", {class: "pair"}, slots) : slots[0]);
    pane.scrollTop = 0;
  }
  function link(r) {
    return hashOf({id: r.id, og: r.g});
  }
  function showEpisode(e, r) {
    const facts = [["group", e.group], ["category", e.category], ["stop", e.stop], ["turns", e.turns],
                   ["calls", e.calls], ["prompt tokens", e.prompt_tokens], ["completion tokens", e.completion_tokens],
                   ["latency (s)", e.latency], ["step", e.step], ["reward", e.reward]]
      .filter(([, v]) => v != null).map(([k, v]) => el("span", {}, `${k} `, el("b", {}, number(v))));
    const scores = Object.entries(e.scores || {}).map(([k, v]) => el("span", {}, `${k} score `, el("b", {}, number(v))));
    const rewards = Object.entries(e.rewards || {}).map(([k, v]) => el("span", {}, `${k} `, el("b", {}, number(v))));
    return el("div", {class: "episode"},
      el("h2", {}, e.id, " ", el("a", {class: "link", href: link(r), title: "a link to this episode"}, "link")),
      el("div", {class: "facts"}, badge(r), e.score != null ? el("span", {}, "score ", el("b", {}, number(e.score))) : "",
         scores, rewards, facts),
      el("dl", {class: "answer"}, el("dt", {}, "answer"), el("dd", {}, e.prediction || "-"),
         el("dt", {}, "truth"), el("dd", {}, e.truth || "-")),
      e.messages.map(message),
      el("details", {}, el("summary", {}, "record"), el("pre", {}, e.record)));
  }
  function message(m) {
    const label = m.role + (m.name ? ` · ${m.name}` : "") + (m.error ? " · error" : "");
    if (m.role === "system") {  // the same long prompt in every episode: folded
      const size = m.parts.reduce((n, p) => n + (p.text || "").length, 0);
      return el("details", {class: "msg system"}, el("summary", {class: "role"}, `system prompt (${size} characters)`),
                m.parts.map((p) => ("image" in p ? figure(p.image) : el("pre", {}, p.text))));
    }
    return el("div", {class: `msg ${m.role}` + (m.error ? " error" : "")}, el("div", {class: "role"}, label),
              m.parts.map((p) => ("image" in p ? figure(p.image) : m.role === "assistant" ? thinking(p.text)
                                                                                          : el("pre", {}, p.text))),
              m.calls.map(call));
  }
  function thinking(text) {
    // <think>...</think> folded; the rest shown as written
    const out = [];
    const pattern = /<think>([\s\S]*?)(<\/think>|$)/g;
    let last = 0, match;
    while ((match = pattern.exec(text)) !== null) {
      if (match.index > last) out.push(el("pre", {}, text.slice(last, match.index)));
      out.push(el("details", {class: "think"}, el("summary", {}, `thinking (${match[1].length} characters)`),
                  el("pre", {}, match[1])));
      last = pattern.lastIndex;
      if (match[0].length === 0) break;
    }
    if (last < text.length) out.push(el("pre", {}, text.slice(last)));
    return out;
  }
  function pretty(args) {  // short arguments as the model wrote them, long ones laid out
    if (args.length <= 120) return args;
    try { return JSON.stringify(JSON.parse(args), null, 1); } catch (err) { return args; }
  }
  function call(c) {
    return el("div", {class: "call"}, el("span", {class: "name"}, c.name), el("pre", {}, pretty(c.arguments)),
              c.region ? figure(c.region.image, c.region.box) : "");
  }
  function figure(src, box) {
    const frame = el("div", {class: "frame"}, el("a", {href: src, target: "_blank"},
                                                   el("img", {src, loading: "lazy", alt: ""})));
    if (!box) return el("figure", {}, frame);
    const [x1, y1, x2, y2] = box;
    frame.appendChild(el("div", {class: "box", style: `left:${100 * x1}%;top:${100 * y1}%;` +
                                                `width:${100 * (x2 - x1)}%;height:${100 * (y2 - y1)}%`}));
    return el("figure", {class: "region"}, frame, el("figcaption", {}, "the region the call named"));
  }

  setupFilters();
  readHash();
  render();
  timing.ready = performance.now();
  return {chunk, timing};
})();
