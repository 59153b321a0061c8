// Timeline: memories per day or week, stacked by type (by when they happened, else when they
// were mentioned); click a bar to list that period's memories.

import { bankPath, get } from "../api.js";
import { badge, card, clear, empty, h, table, when } from "../ui.js";

const TYPES = ["world", "experience", "observation"];
const PAGE = 1000;
const MAX_MEMORIES = 10000;
const DAY = 86400000;

function bucketStart(date, unit) {
  if (unit === "month") return new Date(date.getFullYear(), date.getMonth(), 1);
  const d = new Date(date.getFullYear(), date.getMonth(), date.getDate());
  if (unit === "week") d.setDate(d.getDate() - ((d.getDay() + 6) % 7)); // Monday
  return d;
}

function label(d, unit) {
  const pad = (n) => String(n).padStart(2, "0");
  if (unit === "month") return `${d.getFullYear()}-${pad(d.getMonth() + 1)}`;
  const text = `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}`;
  return unit === "week" ? `week of ${text}` : text;
}

async function fetchAll(ctx) {
  const items = [];
  let total = 0;
  for (let offset = 0; offset < MAX_MEMORIES; offset += PAGE) {
    const body = await get(bankPath(ctx.bankId, "memories", "list"), { limit: PAGE, offset }, ctx.signal);
    items.push(...body.items);
    total = body.total;
    if (items.length >= total || !body.items.length) break;
  }
  return { items, total };
}

export async function render(ctx) {
  const { view, bankId, params } = ctx;
  const { items, total } = await fetchAll(ctx);
  const head = h("div.page-head", h("h1", "Timeline"), h("span.muted", bankId));
  const dated = items.filter((m) => m.date || m.mentioned_at).map((m) => ({ ...m, when: new Date(m.date || m.mentioned_at) }));
  if (!dated.length) {
    clear(view, head, empty("No memories yet.", "Retain notes with a date (“On 3 May Kai moved to Lisbon”) and they line up here by when they happened."));
    return;
  }
  const times = dated.map((m) => m.when.getTime());
  const span = (Math.max(...times) - Math.min(...times)) / DAY;
  const unit = params.get("unit") || (span > 5 * 365 ? "month" : span > 120 ? "week" : "day");
  const buckets = new Map();
  const first = bucketStart(new Date(Math.min(...times)), unit);
  const last = bucketStart(new Date(Math.max(...times)), unit);
  for (let d = new Date(first); d <= last; unit === "month" ? d.setMonth(d.getMonth() + 1) : d.setDate(d.getDate() + (unit === "week" ? 7 : 1))) {
    buckets.set(d.getTime(), { start: new Date(d), items: [], counts: { world: 0, experience: 0, observation: 0 } });
  }
  for (const m of dated) {
    const b = buckets.get(bucketStart(m.when, unit).getTime());
    b.items.push(m);
    b.counts[m.fact_type] = (b.counts[m.fact_type] || 0) + 1;
  }
  const list = h("div.timeline-list");
  const all = [...buckets.values()];
  // A date under every few bars, so a long range still reads as a time axis.
  const every = Math.max(1, Math.ceil(all.length / 12));
  all.forEach((b, i) => (b.tick = i % every === 0 ? label(b.start, unit === "week" ? "day" : unit) : ""));
  const max = Math.max(...all.map((b) => b.items.length));
  const chart = h(
    "div.timeline",
    { role: "list" },
    all.map((b) =>
      h(
        "button.tl-bar",
        {
          type: "button",
          role: "listitem",
          title: `${label(b.start, unit)}: ${b.items.length} (${TYPES.map((t) => `${b.counts[t]} ${t}`).join(", ")})`,
          disabled: !b.items.length,
          dataset: { start: b.start.toISOString(), count: String(b.items.length) },
          onclick: (e) => {
            chart.querySelectorAll(".active").forEach((x) => x.classList.remove("active"));
            e.currentTarget.classList.add("active");
            clear(
              list,
              card(
                `${label(b.start, unit)} — ${b.items.length} memor${b.items.length === 1 ? "y" : "ies"}`,
                table(
                  [
                    ["When", (m) => when(m.date || m.mentioned_at), "nowrap"],
                    ["Type", (m) => badge(m.fact_type)],
                    ["Memory", (m) => h("a", { href: ctx.href("memory", m.id) }, m.text), "grow"],
                  ],
                  b.items,
                  { onRow: (m) => (location.hash = ctx.href("memory", m.id)) },
                ),
              ),
            );
          },
        },
        h("span.tl-tick", b.tick || ""),
        h(
          "span.stack-bar",
          { style: `height:${(100 * b.items.length) / max}%` },
          TYPES.filter((t) => b.counts[t]).map((t) => h(`span.seg.${t}`, { style: `flex:${b.counts[t]}` })),
        ),
      ),
    ),
  );
  const unitLink = (u) => h(`a${u === unit ? ".active" : ""}`, { href: ctx.href("timeline", null, { unit: u }) }, `Per ${u}`);
  clear(
    view,
    head,
    card(
      null,
      h(
        "div.row",
        unitLink("day"),
        unitLink("week"),
        unitLink("month"),
        h("span.spacer"),
        TYPES.map((t) => h("span.legend", h(`span.swatch.${t}`), t)),
      ),
      h("div.timeline-scroll", chart),
      h("p.small.muted", `${all.length} ${unit}s from ${label(first, unit)} to ${label(last, unit)}; hover a bar for its counts, click it for its memories.`),
      total > items.length ? h("p.small.muted", `Showing the newest ${items.length} of ${total} memories.`) : null,
    ),
    list,
  );
}
