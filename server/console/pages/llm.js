// LLM calls: per call the model, tokens, latency and outcome, from the request log
// (`GET .../llm-requests`) when the server keeps one (`/version` feature `llm_trace`).

import { bankPath, get, serverFeatures } from "../api.js";
import { badge, clear, empty, h, num, table, when } from "../ui.js";

export async function render(ctx) {
  const { view, bankId } = ctx;
  const head = h("div.page-head", h("h1", "LLM calls"), h("span.muted", bankId));
  const features = await serverFeatures();
  if (!features.llm_trace) {
    clear(view, head, empty("This server does not keep a log of LLM calls.", "When it does (feature llm_trace in /version), each call's model, tokens, latency and outcome are listed here. Reflect's own steps and model timings are on the Reflect page."));
    return;
  }
  const listed = await get(bankPath(bankId, "llm-requests"), { limit: 100 }, ctx.signal);
  const items = listed.items || [];
  clear(
    view,
    head,
    items.length
      ? table(
          [
            ["Started", (c) => when(c.started_at), "nowrap"],
            ["Operation", (c) => [c.operation, c.scope ? h("span.muted.small", ` ${c.scope}`) : null]],
            ["Model", (c) => [c.model, c.provider ? h("span.muted.small", ` (${c.provider})`) : null], "wide-only"],
            ["Tokens in/out", (c) => `${num(c.input_tokens)} / ${num(c.output_tokens)}`, "num"],
            ["Latency", (c) => `${num(c.duration_ms, 0)} ms`, "num"],
            ["Outcome", (c) => (c.error ? h("span", badge(c.status || "error", "bad"), " ", h("span.small", c.error)) : badge(c.status || "ok", "ok"))],
          ],
          items,
        )
      : empty("No LLM calls yet.", "Retain with LLM extraction, reflect or a mental-model refresh to see calls here."),
  );
}
