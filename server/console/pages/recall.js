// Recall playground: a query with budget, max_tokens, types, tags and query time; results with
// their scores; the trace drawn per arm (hits and ranks), then fusion, rerank and the budget,
// so each result's path is visible.

import { bankPath, post } from "../api.js";
import { badge, card, clear, empty, errorBox, field, h, num, when } from "../ui.js";

const TYPES = ["world", "experience", "observation"];

function bar(value, max) {
  const width = max > 0 ? Math.max(2, Math.round((100 * value) / max)) : 0;
  return h("span.bar", h("span", { style: `width:${width}%` }));
}

function short(id) {
  return id.slice(0, 8);
}

/** For one result: where each arm ranked it and where fusion put it. */
function whyChips(id, trace) {
  if (!trace) return null;
  const chips = [];
  for (const [arm, data] of Object.entries(trace.arms || {})) {
    const hit = (data.hits || []).find((x) => x.id === id);
    if (hit) chips.push(h("span.chip", { title: `${arm} score ${num(hit.score)}` }, `${arm} #${hit.rank}`));
  }
  const fusedRank = (trace.fusion?.top || []).findIndex((f) => f.id === id);
  if (fusedRank >= 0) chips.push(h("span.chip.strong", `fused #${fusedRank + 1}`));
  if (!chips.length) chips.push(h("span.muted.small", "below the traced top of every arm"));
  return h("div.chips.why", h("span.muted.small", "Found by: "), chips);
}

function resultCard(item, index, trace, maxFinal, ctx) {
  const scores = item.scores || {};
  return h(
    "article.result",
    { dataset: { id: item.id } },
    h(
      "div.row",
      h("span.rank", `#${index + 1}`),
      badge(item.type),
      when(item.occurred_start || item.mentioned_at),
      h("span.spacer"),
      h("span.score", { title: "final score" }, num(scores.final)),
      bar(scores.final || 0, maxFinal),
    ),
    h("p", h("a", { href: ctx.href("memory", item.id) }, item.text)),
    whyChips(item.id, trace),
    h(
      "div.scores.small.muted",
      Object.entries(scores)
        .filter(([k, v]) => k !== "final" && v !== null && v !== undefined)
        .map(([k, v]) => h("span", `${k} ${num(v)}`)),
    ),
  );
}

function linkHover(root) {
  root.addEventListener("mouseover", (event) => {
    const el = event.target.closest("[data-id]");
    root.querySelectorAll(".hot").forEach((x) => x.classList.remove("hot"));
    if (el) root.querySelectorAll(`[data-id="${CSS.escape(el.dataset.id)}"]`).forEach((x) => x.classList.add("hot"));
  });
}

function traceView(trace, results, ctx) {
  const returned = new Map(results.map((r, i) => [r.id, i + 1]));
  const textOf = (id) => {
    const r = results.find((x) => x.id === id);
    return r ? r.text : `memory ${short(id)}…`;
  };
  const timings = Object.entries(trace.timings_ms || {});
  const maxTime = Math.max(1, ...timings.map(([, v]) => v));
  const arms = Object.entries(trace.arms || {});
  const armColumns = arms.map(([arm, data]) => {
    const hits = data.hits || [];
    const maxScore = Math.max(0, ...hits.map((x) => x.score));
    return h(
      "section.arm",
      h("h3", arm),
      h(
        "p.small.muted",
        `${data.candidates} candidates · ${num(data.elapsed_ms, 1)} ms · weight ${num(data.weight, 2)}`,
        data.cap ? ` · cap ${data.cap}` : "",
      ),
      data.note ? h("p.small.note", data.note) : null,
      hits.length
        ? h(
            "ol.hits",
            hits.map((x) =>
              h(
                `li${returned.has(x.id) ? ".kept" : ""}`,
                { dataset: { id: x.id }, title: textOf(x.id) },
                h("span.hit-rank", `${x.rank}`),
                h("a.hit-text", { href: ctx.href("memory", x.id) }, textOf(x.id)),
                h("span.hit-score", num(x.score)),
                bar(x.score, maxScore),
              ),
            ),
          )
        : h("p.muted.small", "No candidates."),
    );
  });
  const fusion = trace.fusion || {};
  const rerank = trace.rerank || {};
  const budget = trace.token_budget || {};
  const armNames = arms.map(([a]) => a);
  return h(
    "div.trace",
    card(
      "How this recall ran",
      h(
        "p.small",
        `Query terms: `,
        (trace.terms || []).length ? h("span.chips", trace.terms.map((t) => h("code.chip", t))) : h("span.muted", "none"),
        trace.window ? [" · time window ", when(trace.window.start), " → ", when(trace.window.end), ` (${trace.window.source}${trace.window.expression ? `: “${trace.window.expression}”` : ""})`] : "",
      ),
      h(
        "div.timings",
        timings.map(([name, ms]) => h("div.timing", h("span.t-name", name), bar(ms, maxTime), h("span.t-ms", `${num(ms, 1)} ms`))),
      ),
    ),
    h("h2.section", "Arms — what each retriever found (kept results are highlighted; hover to follow one)"),
    h("div.arms", armColumns),
    card(
      `Fusion — ${fusion.method || ""} (k=${fusion.k ?? "—"}): ${fusion.candidates ?? 0} candidates, top ${fusion.reranked ?? 0} reranked`,
      (fusion.top || []).length
        ? h(
            "div.table-wrap",
            h(
              "table.fusion",
              h("thead", h("tr", h("th", "#"), h("th", "Memory"), h("th.num", "Fused"), armNames.map((a) => h("th.num", a)), h("th", "Result"))),
              h(
                "tbody",
                fusion.top.map((f, i) =>
                  h(
                    `tr${returned.has(f.id) ? ".kept" : ""}`,
                    { dataset: { id: f.id } },
                    h("td", String(i + 1)),
                    h("td.grow", h("a", { href: ctx.href("memory", f.id) }, textOf(f.id))),
                    h("td.num", num(f.score, 4)),
                    armNames.map((a) => h("td.num", f.ranks && f.ranks[a] ? `#${f.ranks[a]}` : "—")),
                    h("td", returned.has(f.id) ? badge(`#${returned.get(f.id)}`, "ok") : h("span.muted", "not kept")),
                  ),
                ),
              ),
            ),
          )
        : empty("Nothing to fuse.", "No arm found a candidate."),
    ),
    h(
      "div.columns",
      card(
        "Rerank, scoring, diversity",
        h(
          "dl.kv",
          h("dt", "Reranker"), h("dd", `${rerank.reranker || "—"} (weight ${num(rerank.weight, 2)}, ${num(rerank.elapsed_ms, 1)} ms)`),
          h("dt", "Moved by rerank"), h("dd", String(rerank.moved ?? 0)),
          h("dt", "Moved by MMR"), h("dd", `${trace.mmr?.moved ?? 0} (λ ${num(trace.mmr?.lambda, 2)})`),
          h("dt", "Dropped by min scores"), h("dd", String(trace.scoring?.dropped_by_min_scores ?? 0)),
          h("dt", "Weights"), h("dd", `recency ${num(trace.scoring?.recency_weight, 2)} · temporal ${num(trace.scoring?.temporal_weight, 2)} · proof ${num(trace.scoring?.proof_weight, 2)}`),
        ),
      ),
      card(
        "Token budget",
        h("dl.kv", h("dt", "Used"), h("dd", `${budget.used ?? 0} of ${budget.max_tokens ?? "—"} tokens`), h("dt", "Results"), h("dd", String(budget.results ?? 0)), h("dt", "Skipped (over budget)"), h("dd", String(budget.skipped ?? 0))),
        bar(budget.used || 0, budget.max_tokens || 1),
      ),
    ),
  );
}

export async function render(ctx) {
  const { view, bankId, params } = ctx;
  const query = h("textarea", { name: "query", rows: 2, required: true, "data-search": true, placeholder: "What does Kai do on weekends?  ( / to focus, Ctrl+Enter to run)" }, params.get("q") || "");
  const form = h(
    "form.stack",
    field("Query", query),
    h(
      "div.filter-grid",
      field("Budget", h("select", { name: "budget" }, ["low", "mid", "high"].map((b) => h("option", { value: b, selected: (params.get("budget") || "mid") === b }, b)))),
      field("Max tokens", h("input", { name: "max_tokens", type: "number", min: 1, value: params.get("max_tokens") || "4096" })),
      field("Tags", h("input", { name: "tags", placeholder: "a,b", value: params.get("tags") || "" })),
      field("Query time", h("input", { name: "query_timestamp", type: "datetime-local", value: params.get("at") || "" }), "“last week” is read from here."),
    ),
    h("fieldset.inline", h("legend", "Types"), TYPES.map((t) => h("label.check", h("input", { type: "checkbox", name: "types", value: t, checked: true }), ` ${t}`))),
    h("div.row.end", h("button", { type: "submit" }, "Recall")),
  );
  const out = h("div.out", empty("Ask something.", "Results come with the trace of how they were found."));
  query.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) form.requestSubmit();
  });
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const data = new FormData(form);
    const body = {
      query: data.get("query"),
      budget: data.get("budget"),
      max_tokens: Number(data.get("max_tokens")) || undefined,
      types: data.getAll("types"),
      trace: true,
    };
    const tags = String(data.get("tags")).split(",").map((t) => t.trim()).filter(Boolean);
    if (tags.length) body.tags = tags;
    if (data.get("query_timestamp")) body.query_timestamp = new Date(String(data.get("query_timestamp"))).toISOString();
    ctx.setParams({ q: body.query, budget: body.budget, max_tokens: data.get("max_tokens"), tags: data.get("tags"), at: data.get("query_timestamp") });
    clear(out, h("div.loading", "Recalling…"));
    try {
      const started = performance.now();
      const result = await post(bankPath(bankId, "memories", "recall"), body);
      const elapsed = performance.now() - started;
      const results = result.results || [];
      const maxFinal = Math.max(0, ...results.map((r) => r.scores?.final || 0));
      clear(
        out,
        h("div.page-head", h("h2", `${results.length} result${results.length === 1 ? "" : "s"}`), h("span.muted", `${Math.round(elapsed)} ms round trip`)),
        results.length
          ? h("div.results", results.map((r, i) => resultCard(r, i, result.trace, maxFinal, ctx)))
          : empty("Nothing came back.", "Try other words, a bigger budget, or check the types and tags."),
        result.trace ? traceView(result.trace, results, ctx) : null,
      );
      linkHover(out);
    } catch (error) {
      clear(out, errorBox(error));
    }
  });
  clear(view, h("div.page-head", h("h1", "Recall"), h("span.muted", bankId)), card(null, form), out);
  if (params.get("q")) form.requestSubmit();
}
