// Entity graph: entities as nodes (size: mentions), edges where facts name both (width: how
// many). Drawn on a canvas so 1,000+ entities stay readable; click one to read its facts.

import { bankPath, get } from "../api.js";
import { GraphView } from "../graph-canvas.js";
import { badge, card, clear, empty, errorBox, field, h, loading, when } from "../ui.js";

// Links asked for at first, and at most (the route's cap): 1,000 links is ~2,000 entities,
// which lays out in seconds; 5,000 takes longer and the page stays usable while it does.
const DEFAULT_LIMIT = 1000;
const MAX_LIMIT = 5000;

async function entityPanel(ctx, panel, node) {
  if (!node) {
    clear(panel, h("p.muted", "Click an entity to read its facts. Drag to pan, scroll or + − to zoom, 0 to fit."));
    return;
  }
  clear(panel, loading());
  try {
    const entity = await get(bankPath(ctx.bankId, "entities", node.id), null, ctx.signal);
    const facts = entity.facts || [];
    clear(
      panel,
      h("h2", entity.canonical_name),
      h("p.small.muted", badge(entity.metadata?.kind || "entity", "tag"), ` ${entity.mention_count} mentions · first `, when(entity.first_seen), " · last ", when(entity.last_seen)),
      entity.metadata?.aliases?.length ? h("p.small", "Also: ", entity.metadata.aliases.join(", ")) : null,
      h("p", h("a", { href: ctx.href("memories", null, { entity: entity.canonical_name }) }, `All ${entity.facts_total ?? facts.length} memories →`)),
      facts.length
        ? h("ol.facts", facts.slice(0, 50).map((m) => h("li", badge(m.fact_type), " ", h("a", { href: ctx.href("memory", m.id) }, m.text))))
        : empty("No facts name this entity."),
    );
  } catch (error) {
    clear(panel, errorBox(error));
  }
}

export async function render(ctx) {
  const { view, bankId, params } = ctx;
  const limit = params.get("limit") || String(DEFAULT_LIMIT);
  const minCount = params.get("min_count") || "1";
  const data = await get(bankPath(bankId, "entities", "graph"), { limit, min_count: minCount }, ctx.signal);
  const head = h("div.page-head", h("h1", "Entity graph"), h("span.muted", bankId));
  if (!data.nodes.length) {
    clear(view, head, empty("No entities yet.", "Entities are the people, places and things named in retained memories. Retain a note that names someone, e.g. “Kai met Lena in Lisbon.”"));
    return;
  }
  const panel = h("aside.graph-panel.card");
  const canvas = h("canvas.graph", { tabindex: 0, "aria-label": "Entity graph; click a node to see its facts" });
  const search = h("input", { type: "search", list: "graph-names", placeholder: "Find an entity  ( / )", "data-search": true, "aria-label": "Find an entity" });
  const byName = new Map(data.nodes.map((n) => [n.label.toLowerCase(), n.id]));
  const controls = h(
    "form.row.graph-controls",
    { onsubmit: (e) => {
      e.preventDefault();
      const id = byName.get(search.value.trim().toLowerCase());
      if (id) graph.focusOn(id);
      else clear(panel, empty(`No entity named “${search.value}” in this graph.`));
    } },
    search,
    h("button.small", { type: "submit" }, "Find"),
    h("datalist#graph-names", data.nodes.map((n) => h("option", { value: n.label }))),
    field("Min. shared facts", h("input", { type: "number", min: 1, value: minCount, style: "width:5em", onchange: (e) => (location.hash = ctx.href("graph", null, { limit, min_count: e.target.value })) })),
    h("button.ghost.small", { type: "button", onclick: () => (graph.fit(), graph.draw()) }, "Fit"),
    h("span.muted.small", `${data.nodes.length} of ${data.total_entities} entities · ${data.edges.length} of ${data.total_edges} links`),
    // The strongest links first; more on request, up to the route's cap.
    data.edges.length < data.total_edges && Number(limit) < MAX_LIMIT
      ? h("button.ghost.small", { type: "button", onclick: () => (location.hash = ctx.href("graph", null, { limit: Math.min(MAX_LIMIT, Number(limit) * 2), min_count: minCount })) }, `Show more (up to ${Math.min(MAX_LIMIT, Number(limit) * 2).toLocaleString()} links)`)
      : null,
    Number(limit) > DEFAULT_LIMIT
      ? h("button.ghost.small", { type: "button", onclick: () => (location.hash = ctx.href("graph", null, { min_count: minCount })) }, "Show fewer")
      : null,
  );
  clear(view, head, controls, h("div.graph-layout", h("div.graph-box", canvas), panel));
  entityPanel(ctx, panel, null);
  const graph = new GraphView(
    canvas,
    data.nodes.map((n) => ({ id: n.id, label: n.label, weight: n.mention_count, group: n.kind })),
    data.edges.map((e) => ({ source: e.source, target: e.target, weight: e.cooccurrence_count })),
    { onSelect: (node) => entityPanel(ctx, panel, node) },
  );
  canvas.graphView = graph;
  ctx.onCleanup(() => graph.destroy());
}
