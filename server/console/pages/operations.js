// Operations: retains, imports, consolidations and refreshes with their progress, refreshed
// live while any is open; errors in full; cancel what runs, retry what failed.

import { bankPath, del, get, post } from "../api.js";
import { badge, clear, empty, errorBox, h, num, table, toast, when } from "../ui.js";

const POLL_MS = 1500;
const IDLE_MS = 5000;
const OPEN = new Set(["pending", "processing"]);

function progress(op) {
  const p = op.progress || {};
  if (!p.total) return h("span.muted.small", p.stage || "—");
  const pct = Math.min(100, Math.round((100 * (p.processed || 0)) / p.total));
  return h("div.progress", { title: `${p.processed} of ${p.total}` }, h("span.bar", h("span", { style: `width:${pct}%` })), h("span.small", `${p.processed}/${p.total}`));
}

export async function render(ctx) {
  const { view, bankId, params } = ctx;
  const status = params.get("status") || "";
  const body = h("div");
  const live = h("span.live.muted.small");
  const filter = h(
    "select",
    { "aria-label": "Status", onchange: (e) => (location.hash = ctx.href("operations", null, { status: e.target.value })) },
    [["", "All"], ["pending", "Pending"], ["processing", "Running"], ["completed", "Completed"], ["failed", "Failed"], ["cancelled", "Cancelled"]].map(([v, l]) => h("option", { value: v, selected: v === status }, l)),
  );
  // What the last cancel or retry answered, kept on the page (a toast fades too soon to read
  // an error). Retry follows Hindsight's shape: {success, message, operation_id}.
  const answer = h("div.action-answer");
  const act = async (fn, done, label) => {
    clear(answer);
    try {
      const body = await fn();
      const message = (body && body.message) || done;
      clear(answer, h("div.notice.ok", { role: "status" }, `${label}: ${message}`));
      toast(message, "ok");
      load();
    } catch (error) {
      const unsupported = error.status === 404 || error.status === 405 || error.status === 501;
      clear(
        answer,
        h(
          "div.notice",
          { role: "status" },
          h("strong", `${label}: `),
          unsupported && error.status !== 404 ? "this server cannot do that yet" : "the server refused",
          ` (HTTP ${error.status || "error"}: ${error.detail || error.message}).`,
        ),
      );
    }
  };
  let timer = 0;
  ctx.onCleanup(() => clearTimeout(timer));
  async function load() {
    clearTimeout(timer);
    let listed;
    try {
      listed = await get(bankPath(bankId, "operations"), { status, limit: 50 }, ctx.signal);
    } catch (error) {
      if (!ctx.signal.aborted) clear(body, errorBox(error));
      return;
    }
    const ops = listed.operations || [];
    const anyOpen = ops.some((o) => OPEN.has(o.status));
    live.textContent = anyOpen ? "● live — updating every 1.5 s" : "● live — checking every 5 s";
    clear(
      body,
      ops.length
        ? table(
            [
              ["Started", (o) => when(o.created_at), "nowrap"],
              ["Type", (o) => o.task_type || o.operation_type],
              ["Status", (o) => badge(o.status)],
              ["Progress", progress],
              ["Updated", (o) => when(o.updated_at), "nowrap wide-only"],
              ["Items", (o) => num(o.items_count), "num wide-only"],
              ["Error", (o) => (o.error_message ? h("div.bad.small.pre", o.error_message) : h("span.muted", "—")), "grow"],
              [
                "",
                (o) =>
                  OPEN.has(o.status)
                    ? h("button.ghost.small", { type: "button", onclick: () => act(() => del(bankPath(bankId, "operations", o.id)), "Cancellation requested", `Cancel ${o.id}`) }, "Cancel")
                    : o.status === "failed"
                      ? h("button.ghost.small", { type: "button", onclick: () => act(() => post(bankPath(bankId, "operations", o.id, "retry")), "Retry started", `Retry ${o.id}`) }, "Retry")
                      : null,
              ],
            ],
            ops,
          )
        : empty(status ? `No ${status} operations.` : "No operations yet.", "Retains sent with async: true, imports and consolidations appear here while they run."),
    );
    if (!ctx.signal.aborted) timer = setTimeout(load, anyOpen ? POLL_MS : IDLE_MS);
  }
  clear(view, h("div.page-head", h("h1", "Operations"), h("span.muted", bankId), h("span.spacer"), live, filter, h("button.ghost.small", { type: "button", onclick: () => load() }, "Refresh")), answer, body);
  await load();
}
