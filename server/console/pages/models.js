// Mental models and reports: current text, what it is based on, refresh (with its operation's
// status), and the version history with diffs; a report's versions are its nightly editions.

import { bankPath, get, post } from "../api.js";
import { badge, card, clear, diffView, empty, errorBox, field, h, table, toast, when } from "../ui.js";

function createForm(ctx, kind) {
  const form = h(
    "form.stack",
    h(
      "div.filter-grid",
      field("Name", h("input", { name: "name", required: true, placeholder: kind === "report" ? "Daily digest" : "Kai's preferences" })),
      field(kind === "report" ? "Questions (one per line)" : "Question it answers", h("textarea", { name: "source_query", rows: 2, required: true, placeholder: "What does Kai like to eat?" })),
    ),
    h("div.row.end", h("button", { type: "submit" }, kind === "report" ? "Create report" : "Create model")),
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const data = new FormData(form);
    const body = { name: data.get("name"), source_query: data.get("source_query"), kind };
    if (kind === "report") body.questions = String(data.get("source_query")).split("\n").map((q) => q.trim()).filter(Boolean);
    try {
      const made = await post(bankPath(ctx.bankId, "mental-models"), body);
      toast(`Created ${made.name || made.id}`, "ok");
      location.hash = ctx.href("models", made.id || made.mental_model_id);
    } catch (error) {
      form.querySelector(".error")?.remove();
      form.prepend(errorBox(error));
    }
  });
  return h("details.card", h("summary", kind === "report" ? "New report" : "New mental model"), form);
}

async function detail(ctx, modelId) {
  const [model, history] = await Promise.all([
    get(bankPath(ctx.bankId, "mental-models", modelId), null, ctx.signal),
    get(bankPath(ctx.bankId, "mental-models", modelId, "history"), null, ctx.signal),
  ]);
  const refresh = async () => {
    try {
      const op = await post(bankPath(ctx.bankId, "mental-models", modelId, "refresh"));
      toast(`Refresh started (${op.operation_id})`, "ok");
      location.hash = ctx.href("operations");
    } catch (error) {
      toast(error.message, "bad");
    }
  };
  const trigger = model.trigger || {};
  const based = model.based_on || {};
  const basedMemories = Array.isArray(based) ? based : based.memories || [];
  return [
    h("div.page-head", h("a", { href: ctx.href("models") }, "← Mental models"), h("span.spacer"), badge(model.kind || "model"), model.is_stale ? badge("stale", "warn") : null),
    card(
      model.name,
      h("p.small.muted", "Answers: ", h("q", model.source_query)),
      model.content ? h("div.answer", model.content) : empty("Not written yet.", "Refresh it to write the first version."),
      h(
        "dl.kv",
        h("dt", "Version"), h("dd", String(model.version ?? "—")),
        h("dt", "Refreshed"), h("dd", when(model.last_refreshed_at)),
        h("dt", "Schedule"), h("dd", trigger.refresh_cron ? h("code", trigger.refresh_cron) : trigger.refresh_after_consolidation ? "after each consolidation" : "manual", model.schedule_id ? h("span.muted.small", ` (${model.schedule_id})`) : null),
        model.last_refresh_error ? [h("dt", "Last error"), h("dd.bad", model.last_refresh_error, " at ", when(model.last_refresh_failed_at))] : null,
      ),
      h("div.row.end", h("button", { type: "button", onclick: refresh }, "Refresh now")),
    ),
    basedMemories.length
      ? card(`Based on (${basedMemories.length})`, h("ol.cited", basedMemories.map((m) => h("li", m.id ? h("a", { href: ctx.href("memory", m.id) }, m.text || m.id) : String(m.text || JSON.stringify(m))))))
      : null,
    card(
      model.kind === "report" ? "Editions" : "Version history",
      history.length
        ? h(
            "ol.history",
            history.map((v) =>
              h("li", h("div.row", badge(`v${v.version ?? "?"}`, "tag"), when(v.changed_at), v.reason ? h("span.muted", v.reason) : null), diffView(v.previous_content || "", v.content || "")),
            ),
          )
        : empty("No versions yet.", "Each refresh keeps the previous text here with a diff."),
    ),
  ];
}

export async function render(ctx) {
  const { view, bankId, arg } = ctx;
  if (arg) {
    clear(view, ...(await detail(ctx, arg)));
    return;
  }
  const listed = await get(bankPath(bankId, "mental-models"), { detail: "content", limit: 100 }, ctx.signal);
  const items = listed.items || [];
  const section = (kind, title) => {
    const mine = items.filter((m) => (m.kind || "model") === kind);
    return card(
      title,
      mine.length
        ? table(
            [
              ["Name", (m) => h("a", { href: ctx.href("models", m.id) }, m.name)],
              ["Question", (m) => m.source_query, "grow wide-only"],
              ["Version", (m) => String(m.version ?? "—"), "num"],
              ["Refreshed", (m) => when(m.last_refreshed_at), "nowrap"],
              ["", (m) => (m.last_refresh_error ? badge("error", "bad") : m.is_stale ? badge("stale", "warn") : badge("fresh", "ok"))],
            ],
            mine,
            { onRow: (m) => (location.hash = ctx.href("models", m.id)) },
          )
        : empty(kind === "report" ? "No reports." : "No mental models yet.", kind === "report" ? "A report answers several questions on a schedule, e.g. every night." : "A mental model keeps a standing answer to one question up to date."),
    );
  };
  clear(view, h("div.page-head", h("h1", "Mental models"), h("span.muted", bankId)), section("model", "Models"), section("report", "Reports"), createForm(ctx, "model"), createForm(ctx, "report"));
}
