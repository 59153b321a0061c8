// Memories: a searchable, filterable table (type, tag, document, entity, dates, state), and a
// box to retain new notes through the same API the CLI uses.

import { bankPath, get, post } from "../api.js";
import { badge, card, clear, debounce, empty, errorBox, field, h, table, toast, when } from "../ui.js";

const PAGE = 50;
const FILTERS = ["q", "type", "tags", "document_id", "entity", "time_field", "start_date", "end_date", "state", "offset"];

const STATE_LABELS = { valid: "active", invalidated: "archived", superseded: "superseded" };

/** The state, and for a superseded fact how long it held and what replaced it. */
export function stateCell(ctx, m) {
  const state = m.state || "valid";
  const label = badge(STATE_LABELS[state] || state, state === "valid" ? "ok" : "warn");
  if (state !== "superseded") return label;
  return h(
    "div",
    label,
    h("div.small.muted.nowrap", m.valid_from ? [when(m.valid_from), " → "] : "until ", when(m.valid_to)),
    m.superseded_by ? h("a.small", { href: ctx.href("memory", m.superseded_by) }, "newer fact →") : null,
  );
}

function retainBox(ctx, reload) {
  const text = h("textarea", { name: "content", rows: 3, required: true, placeholder: "Kai moved to Lisbon in May 2024 and started learning to surf." });
  const form = h(
    "form.stack",
    field("Text", text),
    h(
      "div.grid3",
      field("Tags", h("input", { name: "tags", placeholder: "comma,separated" })),
      field("Context", h("input", { name: "context", placeholder: "e.g. chat with Kai" })),
      field("When", h("input", { name: "timestamp", type: "datetime-local" }), "Empty: now."),
    ),
    h("div.row.end", h("button", { type: "submit" }, "Retain")),
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const values = Object.fromEntries(new FormData(form));
    const item = { content: values.content };
    const tags = values.tags.split(",").map((t) => t.trim()).filter(Boolean);
    if (tags.length) item.tags = tags;
    if (values.context) item.context = values.context;
    if (values.timestamp) item.timestamp = new Date(values.timestamp).toISOString();
    const button = form.querySelector("button[type=submit]");
    button.disabled = true;
    button.textContent = "Retaining…";
    try {
      await post(bankPath(ctx.bankId, "memories"), { items: [item] });
      toast("Retained", "ok");
      form.reset();
      ctx.banksChanged(ctx.bankId);
      reload();
    } catch (error) {
      form.querySelector(".error")?.remove();
      form.prepend(errorBox(error));
    } finally {
      button.disabled = false;
      button.textContent = "Retain";
    }
  });
  return h("details.card.retain", h("summary", "Add a memory"), form);
}

export async function render(ctx) {
  const { view, bankId } = ctx;
  const state = Object.fromEntries(FILTERS.map((name) => [name, ctx.params.get(name) || ""]));
  const entities = await get(bankPath(bankId, "entities"), { limit: 500 }, ctx.signal);
  const entityIds = new Map(entities.items.map((e) => [e.canonical_name, e.id]));
  const results = h("div.results");

  const input = (name, attrs = {}) => {
    const el = h("input", { name, value: state[name], ...attrs });
    el.addEventListener("input", debounce(() => update(name, el.value), 250));
    return el;
  };
  const select = (name, options) => {
    const el = h("select", { name }, options.map(([value, label]) => h("option", { value, selected: state[name] === value }, label)));
    el.addEventListener("change", () => update(name, el.value));
    return el;
  };
  const search = input("q", { type: "search", placeholder: "Search text and context  ( / )", "data-search": true, "aria-label": "Search memories" });
  const filters = h(
    "form.filters",
    { onsubmit: (e) => e.preventDefault() },
    h("div.search-row", search),
    h(
      "details.more-filters",
      // Open on wide screens; on a phone the search box comes first and filters fold away.
      { open: !matchMedia("(max-width: 760px)").matches || FILTERS.some((f) => f !== "q" && f !== "offset" && state[f]) },
      h("summary.small.muted", "Filters"),
      h(
      "div.filter-grid",
      field("Type", select("type", [["", "All types"], ["world", "World"], ["experience", "Experience"], ["observation", "Observation"]])),
      field("Tags", input("tags", { placeholder: "a,b" })),
      field("Document", input("document_id", { placeholder: "document id" })),
      field("Entity", input("entity", { list: "entity-names", placeholder: "name" })),
      field("Date of", select("time_field", [["", "Created"], ["mentioned_at", "Mentioned"], ["occurred_start", "Occurred"], ["updated_at", "Updated"]])),
      field("From", input("start_date", { type: "date" })),
      field("Before", input("end_date", { type: "date" })),
      field("State", select("state", [["", "Any state"], ["valid", "Active"], ["superseded", "Superseded"], ["invalidated", "Archived or forgotten"]])),
      ),
    ),
    h("datalist#entity-names", [...entityIds.keys()].map((name) => h("option", { value: name }))),
  );

  function update(name, value) {
    state[name] = value;
    if (name !== "offset") state.offset = "";
    ctx.setParams(state);
    load();
  }

  let sequence = 0;
  async function load() {
    const mine = ++sequence;
    const entityId = state.entity ? entityIds.get(state.entity) : undefined;
    if (state.entity && !entityId) {
      clear(results, empty(`No entity named “${state.entity}”.`, "Pick one from the suggestions."));
      return;
    }
    const offset = Number(state.offset || 0);
    const query = {
      q: state.q,
      type: state.type,
      tags: state.tags ? state.tags.split(",").map((t) => t.trim()).filter(Boolean) : undefined,
      tags_match: state.tags ? "all_strict" : undefined,
      document_id: state.document_id,
      entity_id: entityId,
      time_field: state.start_date || state.end_date ? state.time_field || "created_at" : undefined,
      start_date: state.start_date,
      end_date: state.end_date,
      state: state.state,
      limit: PAGE,
      offset,
    };
    let body;
    try {
      body = await get(bankPath(bankId, "memories", "list"), query, ctx.signal);
    } catch (error) {
      if (mine === sequence && !ctx.signal.aborted) clear(results, errorBox(error));
      return;
    }
    if (mine !== sequence) return;
    const filtered = FILTERS.some((f) => f !== "offset" && state[f]);
    if (!body.items.length) {
      clear(
        results,
        filtered
          ? empty("No memories match these filters.", "Clear a filter or search for fewer words.")
          : empty("No memories yet.", "Retain one with “Add a memory” above, or ", h("code", `engram retain --bank ${bankId} "…"`), "."),
      );
      return;
    }
    const pager = h(
      "div.row.pager",
      h("span.muted", `${offset + 1}–${offset + body.items.length} of ${body.total}`),
      h("span.spacer"),
      h("button.ghost.small", { type: "button", disabled: offset === 0, onclick: () => update("offset", String(Math.max(0, offset - PAGE))) }, "← Newer"),
      h("button.ghost.small", { type: "button", disabled: offset + PAGE >= body.total, onclick: () => update("offset", String(offset + PAGE)) }, "Older →"),
    );
    clear(
      results,
      table(
        [
          ["Date", (m) => when(m.date || m.mentioned_at), "nowrap"],
          ["Type", (m) => badge(m.fact_type)],
          ["Memory", (m) => h("div", h("a", { href: ctx.href("memory", m.id) }, m.text), m.context ? h("div.muted.small", m.context) : null), "grow"],
          ["Entities", (m) => m.entities || h("span.muted", "—"), "wide-only"],
          ["Tags", (m) => (m.tags || []).map((t) => badge(t, "tag")), "wide-only"],
          ["Document", (m) => m.document_id || h("span.muted", "—"), "wide-only clip"],
          ["State", (m) => stateCell(ctx, m), "wide-only"],
        ],
        body.items,
        { onRow: (m) => (location.hash = ctx.href("memory", m.id)) },
      ),
      pager,
    );
  }

  clear(view, h("div.page-head", h("h1", "Memories"), h("span.muted", bankId)), retainBox(ctx, load), card(null, filters), results);
  await load();
}
