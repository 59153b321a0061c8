// One memory: text, dates, provenance (document, chunk), entities, links, evidence and
// history; correct or forget it through PATCH .../memories/{id} (Hindsight's curation shape).

import { bankPath, get, patch } from "../api.js";
import { badge, card, clear, diffView, empty, errorBox, field, h, num, table, toast, when } from "../ui.js";

function dl(pairs) {
  return h("dl.kv", pairs.filter(([, v]) => v !== undefined).flatMap(([k, v]) => [h("dt", k), h("dd", v === null || v === "" ? h("span.muted", "—") : v)]));
}

/** The chunk with the fact's words marked: no source offsets are stored, so this shows where
 * the fact's words sit in its source rather than an exact span. */
function markedChunk(chunkText, factText) {
  const words = new Set((factText.toLowerCase().match(/[\p{L}\p{N}]{4,}/gu) || []));
  const parts = chunkText.split(/([\p{L}\p{N}]+)/u);
  return h("blockquote.chunk", parts.map((part) => (words.has(part.toLowerCase()) ? h("mark", part) : part)));
}

const RELATED = { superseded: "Replaced by", supersedes: "Replaces" };
const STATE_LABELS = { valid: "active", invalidated: "archived", superseded: "superseded" };
const CHAIN_LIMIT = 10;

/** Older and newer versions of a fact, following `supersedes` in each one's history back and
 * `superseded_by` forward (at most CHAIN_LIMIT each way). */
async function supersessionChain(ctx, memory, history) {
  const older = [];
  let items = history;
  for (let i = 0; i < CHAIN_LIMIT; i++) {
    const link = items.find((item) => item.change === "supersedes" && item.related_id);
    if (!link || older.some((m) => m.id === link.related_id)) break;
    const previous = await get(bankPath(ctx.bankId, "memories", link.related_id), null, ctx.signal);
    older.unshift(previous);
    items = await get(bankPath(ctx.bankId, "memories", previous.id, "history"), null, ctx.signal);
  }
  const newer = [];
  let next = memory.superseded_by;
  while (next && newer.length < CHAIN_LIMIT && !newer.some((m) => m.id === next)) {
    const fact = await get(bankPath(ctx.bankId, "memories", next), null, ctx.signal);
    newer.push(fact);
    next = fact.superseded_by;
  }
  return older.length || newer.length ? [...older, memory, ...newer] : [];
}

function chainView(ctx, chain, current) {
  return h(
    "ol.chain",
    chain.map((m) =>
      h(
        m.id === current.id ? "li.current" : "li",
        h("div.row", badge(STATE_LABELS[m.state] || m.state || "active", m.state === "superseded" ? "warn" : "ok"), h("span.small.muted", m.valid_from ? when(m.valid_from) : "—", " → ", m.valid_to ? when(m.valid_to) : "now")),
        m.id === current.id ? h("strong", m.text, " (this memory)") : h("a", { href: ctx.href("memory", m.id) }, m.text),
      ),
    ),
  );
}

function historyList(ctx, items) {
  if (!items.length) return empty("No changes recorded.", "Corrections, supersession, archiving and re-consolidations show up here with a diff.");
  return h(
    "ol.history",
    items.map((item) =>
      h(
        "li",
        h(
          "div.row",
          item.version !== undefined ? badge(`v${item.version}`, "tag") : null,
          item.change ? badge(item.change) : null,
          when(item.changed_at || item.created_at),
          item.reason ? h("span.muted", item.reason) : null,
          RELATED[item.change] && item.related_id ? h("a.small", { href: ctx.href("memory", item.related_id) }, `${RELATED[item.change]} →`) : null,
        ),
        // Only a change of text has a diff (supersession, archiving and feedback have none).
        (item.previous_text ?? item.old_text ?? "") !== (item.text ?? item.new_text ?? "")
          ? diffView(item.previous_text ?? item.old_text ?? "", item.text ?? item.new_text ?? "")
          : null,
      ),
    ),
  );
}

function curation(ctx, memory, reload) {
  if (memory.fact_type === "observation") {
    return h("p.muted", "Observations are derived from facts: correct or forget the facts below and consolidation rewrites them.");
  }
  const box = h("div.stack");
  const send = async (body, done) => {
    try {
      await patch(bankPath(ctx.bankId, "memories", memory.id), body);
      toast(done, "ok");
      reload();
    } catch (error) {
      box.querySelector(".error")?.remove();
      box.prepend(
        error.status === 405 || error.status === 404
          ? errorBox(new Error("This server cannot edit memories yet (PATCH .../memories/{id} is not available)."))
          : errorBox(error),
      );
    }
  };
  const text = h("textarea", { name: "text", rows: 3 }, memory.text);
  const reason = h("input", { name: "reason", placeholder: "Why (kept with the memory)" });
  const correct = h(
    "form.stack",
    { onsubmit: (e) => (e.preventDefault(), send({ text: text.value, reason: reason.value || undefined }, "Corrected")) },
    field("Correct the text", text),
    field("Reason", reason),
    h("div.row.end", h("button", { type: "submit" }, "Save correction")),
  );
  const forgotten = memory.state === "invalidated";
  const forget = h(
    "div.row.end",
    forgotten
      ? h("button.ghost", { type: "button", onclick: () => send({ state: "valid" }, "Restored") }, "Restore")
      : h(
          "button.danger",
          {
            type: "button",
            onclick: () => {
              if (confirm("Forget this memory? Recall stops returning it; it stays in the history and can be restored.")) {
                send({ state: "invalidated", reason: reason.value || "forgotten from the console" }, "Forgotten");
              }
            },
          },
          "Forget",
        ),
  );
  box.append(correct, forget);
  return box;
}

export async function render(ctx) {
  const { view, bankId, arg: memoryId } = ctx;
  const memory = await get(bankPath(bankId, "memories", memoryId), null, ctx.signal);
  const [history, chunk] = await Promise.all([
    memory.fact_type === "observation" && Array.isArray(memory.history)
      ? memory.history
      : get(bankPath(bankId, "memories", memoryId, "history"), null, ctx.signal),
    memory.chunk_id ? get(`/v1/default/chunks/${encodeURIComponent(memory.chunk_id)}`, null, ctx.signal) : null,
  ]);
  const historyItems = Array.isArray(history) ? history : history.items || [];
  const chain = memory.fact_type === "observation" ? [] : await supersessionChain(ctx, memory, historyItems);
  const reload = () => render(ctx);
  const entityLinks = (memory.entities || []).map((name) => h("a.chip", { href: ctx.href("memories", null, { entity: name }) }, name));
  const links = memory.links || [];
  const evidence = memory.evidence || [];
  clear(
    view,
    h("div.page-head", h("a", { href: ctx.href("memories") }, "← Memories"), h("span.spacer"), badge(memory.fact_type), badge(STATE_LABELS[memory.state] || memory.state || "active", memory.state && memory.state !== "valid" ? "warn" : "ok")),
    h("section.card.memory-text", h("p.lead", memory.text), memory.context ? h("p.muted", memory.context) : null),
    h(
      "div.columns",
      card(
        "When and where from",
        dl([
          ["Occurred", memory.occurred_start ? h("span", when(memory.occurred_start), memory.occurred_end && memory.occurred_end !== memory.occurred_start ? [" → ", when(memory.occurred_end)] : null) : null],
          ["Mentioned", when(memory.mentioned_at)],
          ["Retained", when(memory.created_at)],
          ["Updated", when(memory.updated_at)],
          ["Valid", memory.valid_from || memory.valid_to ? h("span", when(memory.valid_from), " → ", memory.valid_to ? when(memory.valid_to) : "now") : undefined],
          ["Superseded by", memory.superseded_by ? h("a", { href: ctx.href("memory", memory.superseded_by) }, "the newer fact →") : undefined],
          ["Document", memory.document_id ? h("a", { href: ctx.href("memories", null, { document_id: memory.document_id }) }, memory.document_id) : null],
          ["Chunk", memory.chunk_id ? h("code.small", memory.chunk_id) : null],
          ["Proof count", memory.proof_count !== undefined ? String(memory.proof_count) : undefined],
          ["Tags", (memory.tags || []).length ? memory.tags.map((t) => badge(t, "tag")) : null],
          ["Id", h("code.small", memory.id)],
        ]),
      ),
      card("Correct or forget", curation(ctx, memory, reload)),
    ),
    card("Entities", entityLinks.length ? h("div.chips", entityLinks) : empty("No entities.", "Extraction found no names in this memory.")),
    memory.details && Object.keys(memory.details).length ? card("Details", dl(Object.entries(memory.details).map(([k, v]) => [k, Array.isArray(v) ? v.join(", ") : String(v)]))) : null,
    chunk
      ? card("Source", h("p.muted.small", "The chunk this memory was extracted from; the memory's words are marked."), markedChunk(chunk.chunk_text, memory.text))
      : null,
    evidence.length
      ? card(
          "Evidence",
          table(
            [
              ["Stance", (e) => badge(e.stance)],
              ["Quote", (e) => h("div", e.quote ? h("q", e.quote) : null, h("div.small", h("a", { href: ctx.href("memory", e.memory_id) }, e.text)))],
              ["When", (e) => when(e.evidence_at), "wide-only"],
            ],
            evidence,
          ),
        )
      : null,
    card(
      `Links (${links.length})`,
      links.length
        ? table(
            [
              ["Type", (l) => badge(l.type)],
              ["Weight", (l) => num(l.weight, 2), "num"],
              ["Memory", (l) => h("a", { href: ctx.href("memory", l.memory_id) }, l.text), "grow"],
            ],
            links,
          )
        : empty("No links.", "Links appear when other memories share entities, meaning or time with this one."),
    ),
    chain.length ? card("Supersession", h("p.small.muted", "What this fact replaced and what replaced it, oldest first."), chainView(ctx, chain, memory)) : null,
    card("History", historyList(ctx, historyItems)),
  );
}
