"use strict";
// Polls /admin/state once a second (the session cookie authenticates) and renders it.
// Rates are differences between consecutive polls; charts keep the last two minutes.
const HISTORY = 120;
const history = [];
let previous = null;

const $ = (id) => document.getElementById(id);
const fmt = (n) => {
  if (n === null || n === undefined || Number.isNaN(n)) return "–";
  const a = Math.abs(n);
  if (a >= 1e9) return (n / 1e9).toFixed(1) + "G";
  if (a >= 1e6) return (n / 1e6).toFixed(1) + "M";
  if (a >= 1e4) return (n / 1e3).toFixed(1) + "k";
  return Number.isInteger(n) ? String(n) : n.toFixed(1);
};
const secs = (s) => (s === null ? "–" : s < 1 ? Math.round(s * 1000) + " ms" : s.toFixed(2) + " s");
const el = (tag, props, ...children) => {
  const node = document.createElement(tag);
  Object.assign(node, props || {});
  for (const c of children) node.append(c);
  return node;
};

// Quantile from cumulative histogram buckets [[le, count], ...] (linear within a bucket).
function quantile(buckets, q) {
  if (!buckets.length) return null;
  const total = buckets[buckets.length - 1][1];
  if (total <= 0) return null;
  const rank = q * total;
  let lower = 0, below = 0;
  for (const [le, count] of buckets) {
    const upper = le === "+Inf" ? lower : le;
    if (count >= rank) {
      const inBucket = count - below;
      return inBucket > 0 ? lower + (upper - lower) * ((rank - below) / inBucket) : upper;
    }
    lower = upper; below = count;
  }
  return lower;
}

function deltaBuckets(now, before) {
  if (!before) return now;
  return now.map(([le, n], i) => [le, n - ((before[i] && before[i][1]) || 0)]);
}

function drawChart(canvas, series) {
  const ctx = canvas.getContext("2d");
  const ratio = window.devicePixelRatio || 1;
  const w = canvas.clientWidth || canvas.width, h = canvas.clientHeight || canvas.height;
  canvas.width = w * ratio; canvas.height = h * ratio;
  ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
  ctx.clearRect(0, 0, w, h);
  const max = Math.max(1e-9, ...series.flatMap((s) => s.values));
  ctx.strokeStyle = "#26313c"; ctx.fillStyle = "#8b98a5"; ctx.font = "11px system-ui";
  for (const f of [0, 0.5, 1]) {
    const y = h - 14 - f * (h - 24);
    ctx.beginPath(); ctx.moveTo(36, y); ctx.lineTo(w, y); ctx.stroke();
    ctx.fillText(fmt(max * f), 0, y + 4);
  }
  for (const s of series) {
    ctx.strokeStyle = s.color; ctx.lineWidth = 2; ctx.beginPath();
    s.values.forEach((v, i) => {
      const x = 36 + (i / (HISTORY - 1)) * (w - 40);
      const y = h - 14 - (v / max) * (h - 24);
      if (i === 0) ctx.moveTo(x, y); else ctx.lineTo(x, y);
    });
    ctx.stroke();
  }
}

function renderBuckets(target, scopes) {
  const box = $(target);
  box.replaceChildren();
  for (const scope of scopes) {
    const rows = (scope.limits || []).map((l) => ({ name: l.limiter, left: l.remaining, size: l.burst, limit: l.limit }));
    if (scope.concurrency) rows.push({ name: "concurrency", left: scope.concurrency - scope.in_flight, size: scope.concurrency, limit: scope.concurrency });
    if (!rows.length) rows.push({ name: "unlimited", left: 1, size: 1, limit: null });
    for (const r of rows) {
      const pct = Math.max(0, Math.min(100, (100 * r.left) / Math.max(1, r.size)));
      const fill = el("div", { className: "fill" + (pct < 5 ? " empty" : pct < 35 ? " low" : "") });
      fill.style.width = pct.toFixed(1) + "%";
      const name = el("span", { className: "name", title: scope.name }, scope.name);
      if (scope.held) name.append(el("span", { className: "paused" }, " paused"));
      const num = r.limit === null ? "" : `${fmt(r.left)} / ${fmt(r.size)} (of ${fmt(r.limit)})`;
      box.append(el("div", { className: "bucket" }, name, el("span", {}, r.name), el("div", { className: "bar" }, fill), el("span", { className: "num" }, num)));
    }
  }
}

// Money budgets of every scope that has one: the bar fills as the budget is spent
// (amber from 80 %, red when spent), with the time to the period's reset.
const until = (ms) => {
  const m = Math.ceil(ms / 60000);
  return m >= 60 ? `${Math.floor(m / 60)} h ${m % 60} min` : `${m} min`;
};

function renderBudgets(target, scopes) {
  const rows = [];
  for (const scope of scopes) {
    for (const b of scope.budgets || []) {
      const pct = Math.max(0, Math.min(100, (100 * b.used) / Math.max(1e-9, b.limit)));
      const fill = el("div", { className: "fill" + (pct >= 100 ? " empty" : pct >= 80 ? " low" : "") });
      fill.style.width = pct.toFixed(1) + "%";
      const name = el("span", { className: "name", title: `${scope.kind} ${scope.name}` }, `${scope.kind} ${scope.name}`);
      const num = `${b.used.toFixed(2)} / ${b.limit.toFixed(2)} · resets in ${until(b.reset_ms)}`;
      rows.push(el("div", { className: "bucket budget" }, name, el("span", {}, b.period), el("div", { className: "bar" }, fill), el("span", { className: "num" }, num)));
    }
  }
  $(target).replaceChildren(...(rows.length ? rows : [el("span", { className: "meta" }, "no budgets configured")]));
}

function renderTables(state) {
  const rows = [];
  for (const q of state.queues) {
    if (!q.classes.length) rows.push(el("tr", {}, el("td", {}, q.deployment), el("td", {}, "–"), el("td", {}, "0")));
    for (const c of q.classes) rows.push(el("tr", {}, el("td", {}, q.deployment), el("td", {}, c.class), el("td", {}, fmt(c.depth))));
  }
  $("queues").tBodies[0].replaceChildren(...rows);
  const pools = [];
  for (const p of state.pools || []) {
    for (const m of p.members) {
      const health = m.breaker_open ? `cooling down ${Math.ceil(m.cooldown_ms / 1000)} s` : m.held ? "held" : "serving";
      const free = m.free == null ? "–" : `${Math.round(m.free * 100)} %`;
      pools.push(el("tr", {}, el("td", {}, `${p.model} (${p.strategy}, ${fmt(p.waiting)} waiting)`), el("td", {}, m.deployment), el("td", {}, String(m.tier)), el("td", {}, free), el("td", { className: m.breaker_open ? "paused" : "" }, health)));
    }
  }
  $("pools").tBodies[0].replaceChildren(...(pools.length ? pools : [el("tr", {}, el("td", { colSpan: 5 }, "no pools"))]));
  const fallbacks = Object.entries(state.counters.fallbacks || {});
  $("fallbacks").tBodies[0].replaceChildren(...(fallbacks.length ? fallbacks.map(([r, n]) => el("tr", {}, el("td", {}, r), el("td", {}, fmt(n)))) : [el("tr", {}, el("td", { colSpan: 2 }, "none"))]));
  $("classes").tBodies[0].replaceChildren(...state.classes.map((c) => el("tr", {}, el("td", {}, c.name), el("td", {}, String(c.priority)), el("td", { className: c.paused ? "paused" : "" }, c.paused ? "paused" : "running"))));
}

function renderSpend(spend) {
  if (!spend) return;
  $("spend-currency").textContent = spend.currency;
  const rows = spend.tenants.map((t) => el("tr", {}, el("td", {}, t.tenant), el("td", {}, t.spend.toFixed(4))));
  $("spend").tBodies[0].replaceChildren(...(rows.length ? rows : [el("tr", {}, el("td", { colSpan: 2 }, "nothing priced yet"))]));
}

function render(state) {
  const c = state.counters;
  const prevented = c.gateway_refusals + c.queued;
  const requests = Object.values(c.requests || {}).reduce((a, b) => a + b, 0);
  const dt = previous ? Math.max(0.001, (performance.now() - previous.at) / 1000) : 1;
  const rate = (key, value) => (previous ? Math.max(0, (value - previous[key]) / dt) : 0);
  const waitWindow = deltaBuckets(c.queue_wait_buckets, previous && previous.wait);
  const point = {
    prevented: rate("prevented", prevented), seen: rate("seen", c.provider_429), rps: rate("requests", requests),
    reserved: rate("reserved", c.tokens_reserved), used: rate("used", c.tokens_used), depth: c.queue_depth,
    p95: quantile(waitWindow, 0.95) || 0,
  };
  history.push(point);
  if (history.length > HISTORY) history.shift();
  previous = { at: performance.now(), prevented, seen: c.provider_429, requests, reserved: c.tokens_reserved, used: c.tokens_used, wait: c.queue_wait_buckets };

  $("store").textContent = state.store.degraded ? "store degraded" : "store ok";
  $("store").className = "pill " + (state.store.degraded ? "degraded" : "ok");
  $("open").textContent = fmt(state.store.open_reservations);
  $("updated").textContent = new Date().toLocaleTimeString();
  $("prevented").textContent = fmt(prevented);
  $("refused").textContent = fmt(c.gateway_refusals);
  $("queued").textContent = fmt(c.queued);
  $("seen").textContent = fmt(c.provider_429);
  $("seen-rate").textContent = fmt(point.seen);
  $("rps").textContent = fmt(point.rps);
  $("statuses").textContent = Object.entries(c.requests || {}).map(([k, v]) => `${k}: ${fmt(v)}`).join(" · ") || "no requests yet";
  $("depth").textContent = fmt(c.queue_depth);
  $("p50").textContent = secs(quantile(c.queue_wait_buckets, 0.5));
  $("p95").textContent = secs(quantile(c.queue_wait_buckets, 0.95));
  $("ratio").textContent = c.tokens_used > 0 ? (c.tokens_reserved / c.tokens_used).toFixed(2) + "×" : "–";
  $("reserved").textContent = fmt(c.tokens_reserved);
  $("used").textContent = fmt(c.tokens_used);
  $("fallbacks-total").textContent = fmt(Object.values(c.fallbacks || {}).reduce((a, b) => a + b, 0));
  $("retries").textContent = fmt(c.retries);

  const pad = (key) => Array(HISTORY - history.length).fill(0).concat(history.map((p) => p[key]));
  drawChart($("chart-429"), [{ values: pad("prevented"), color: "#3fb950" }, { values: pad("seen"), color: "#f85149" }]);
  drawChart($("chart-tokens"), [{ values: pad("reserved"), color: "#d29922" }, { values: pad("used"), color: "#58a6ff" }]);
  drawChart($("chart-queue"), [{ values: pad("depth"), color: "#bc8cff" }, { values: pad("p95"), color: "#39c5cf" }]);
  renderBuckets("buckets-deployment", state.scopes.filter((s) => s.kind === "deployment"));
  renderBuckets("buckets-tenant", state.scopes.filter((s) => s.kind === "tenant"));
  renderBudgets("budgets", state.scopes);
  renderTables(state);
  renderSpend(state.spend);
}

async function poll() {
  try {
    const response = await fetch("/admin/state", { credentials: "same-origin", cache: "no-store" });
    if (response.status === 401 || response.status === 404) {
      window.location.assign("/dashboard");
      return;
    }
    if (!response.ok) throw new Error("HTTP " + response.status);
    render(await response.json());
    $("error").hidden = true;
  } catch (e) {
    $("error").hidden = false;
    $("error").textContent = "Cannot reach the gateway: " + e.message;
  }
}

poll();
setInterval(poll, 1000);
