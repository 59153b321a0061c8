// Observations: what consolidation concluded from the facts, with their evidence counts and
// versions; the consolidation backlog and a button to run it. Each opens on the memory page
// (evidence with quotes, history with diffs).

import { bankPath, get, post } from "../api.js";
import { badge, card, clear, empty, errorBox, h, table, toast, when } from "../ui.js";

const POLL_MS = 2000;

function statusCard(ctx, status, reload) {
  const running = status.operation_status === "running" || status.operation_status === "pending";
  return card(
    "Consolidation",
    h(
      "div.row",
      h("span", `${status.pending_facts} fact${status.pending_facts === 1 ? "" : "s"} waiting · ${status.observations} observations · last run `, when(status.last_consolidated_at)),
      status.operation_status ? badge(status.operation_status) : null,
      h("span.spacer"),
      h(
        "button.small",
        {
          type: "button",
          disabled: running,
          onclick: async () => {
            try {
              await post(bankPath(ctx.bankId, "consolidate"));
              toast("Consolidation started", "ok");
              reload();
            } catch (error) {
              toast(error.message, "bad");
            }
          },
        },
        running ? "Running…" : "Consolidate now",
      ),
    ),
  );
}

export async function render(ctx) {
  const { view, bankId } = ctx;
  const [status, listed] = await Promise.all([
    get(bankPath(bankId, "consolidation"), null, ctx.signal),
    get(bankPath(bankId, "memories", "list"), { type: "observation", limit: 200 }, ctx.signal),
  ]);
  const reload = () => render(ctx);
  const running = status.operation_status === "running" || status.operation_status === "pending";
  if (running) {
    const timer = setTimeout(reload, POLL_MS);
    ctx.onCleanup(() => clearTimeout(timer));
  }
  clear(
    view,
    h("div.page-head", h("h1", "Observations"), h("span.muted", bankId)),
    statusCard(ctx, status, reload),
    listed.items.length
      ? table(
          [
            ["Updated", (m) => when(m.updated_at), "nowrap"],
            ["Observation", (m) => h("a", { href: ctx.href("memory", m.id) }, m.text), "grow"],
            ["Evidence", (m) => String((m.source_memory_ids || []).length || m.proof_count || 0), "num"],
            ["Tags", (m) => (m.tags || []).map((t) => badge(t, "tag")), "wide-only"],
          ],
          listed.items,
          { onRow: (m) => (location.hash = ctx.href("memory", m.id)) },
        )
      : empty(
          "No observations yet.",
          status.pending_facts
            ? `${status.pending_facts} facts are waiting: press “Consolidate now”. Without a language model only facts that repeat each other are merged.`
            : "Observations are built from retained facts by consolidation, after retain.",
        ),
  );
}
