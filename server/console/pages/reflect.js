// Reflect: ask, then read the agent's steps (tool calls with their inputs and evidence), the
// answer and the memories it cites. Without a model the server answers with the evidence it
// gathered, and the page says so.

import { bankPath, post } from "../api.js";
import { badge, card, clear, empty, errorBox, field, h, num, when } from "../ui.js";

function toolStep(call, index) {
  const output = call.output;
  const found = output && Array.isArray(output.memories) ? output.memories.length : output && Array.isArray(output.results) ? output.results.length : null;
  return h(
    "li.step",
    h("div.row", h("span.rank", `${index + 1}`), h("strong", call.tool), call.iteration !== undefined ? badge(`turn ${call.iteration}`, "tag") : null, h("span.spacer"), h("span.muted.small", `${num(call.duration_ms, 0)} ms`)),
    h("details", h("summary", "Input", found !== null ? ` · ${found} found` : ""), h("pre.json", JSON.stringify(call.input, null, 2)), output ? h("pre.json", JSON.stringify(output, null, 2)) : null),
  );
}

function cited(ctx, basedOn) {
  const memories = basedOn.memories || [];
  const models = basedOn.mental_models || [];
  const directives = basedOn.directives || [];
  return [
    card(
      `Cited memories (${memories.length})`,
      memories.length
        ? h("ol.cited", memories.map((m) => h("li", badge(m.type), " ", when(m.occurred_start || m.mentioned_at), " ", h("a", { href: ctx.href("memory", m.id) }, m.text))))
        : empty("No memories were used.", "The bank may have nothing on this yet."),
    ),
    models.length ? card(`Mental models (${models.length})`, h("ul", models.map((m) => h("li", m.context ? h("strong", m.context, ": ") : null, m.text)))) : null,
    directives.length ? card("Directives followed", h("ul", directives.map((d) => h("li", d.content)))) : null,
  ];
}

export async function render(ctx) {
  const { view, bankId } = ctx;
  const question = h("textarea", { name: "query", rows: 2, required: true, "data-search": true, placeholder: "What should I know about Kai before our call?  (Ctrl+Enter to ask)" });
  const form = h(
    "form.stack",
    field("Question", question),
    h(
      "div.grid-narrow-wide",
      field("Budget", h("select", { name: "budget" }, ["low", "mid", "high"].map((b) => h("option", { value: b, selected: b === "mid" }, b)))),
      field("Context", h("input", { name: "context", placeholder: "optional: who is asking, why" })),
    ),
    h("div.row.end", h("button", { type: "submit" }, "Ask")),
  );
  const out = h("div.out", empty("Ask a question.", "Reflect searches the memory, reasons over what it finds and cites it."));
  question.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) form.requestSubmit();
  });
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const data = new FormData(form);
    const body = {
      query: data.get("query"),
      budget: data.get("budget"),
      include: { facts: {}, tool_calls: { output: true } },
    };
    if (data.get("context")) body.context = data.get("context");
    const started = performance.now();
    const clock = h("span", "0 s");
    const timer = setInterval(() => (clock.textContent = `${Math.round((performance.now() - started) / 1000)} s`), 500);
    ctx.onCleanup(() => clearInterval(timer));
    clear(out, h("div.loading", "Thinking… ", clock));
    try {
      const answer = await post(bankPath(bankId, "reflect"), body);
      const trace = answer.trace || {};
      const noModel = trace.stop_reason === "no_model";
      const calls = trace.tool_calls || [];
      clear(
        out,
        noModel
          ? h("div.notice", h("strong", "Evidence view. "), "No language model is configured on this server, so reflect shows what it would reason over instead of an answer.")
          : null,
        card(noModel ? "What the memory holds" : "Answer", h("div.answer", answer.text), h("p.small.muted", `${answer.usage?.total_tokens ?? 0} tokens · ${Math.round(performance.now() - started)} ms`)),
        ...cited(ctx, answer.based_on || {}),
        card(
          `Steps (${calls.length})`,
          calls.length ? h("ol.steps", calls.map(toolStep)) : empty("No tool calls.", noModel ? "Without a model the evidence is gathered in one search." : "The model answered directly."),
          (trace.llm_calls || []).length ? h("p.small.muted", `Model calls: ${trace.llm_calls.map((c) => `${c.scope} ${num(c.duration_ms, 0)} ms`).join(" · ")}`) : null,
        ),
      );
    } catch (error) {
      clear(out, errorBox(error));
    } finally {
      clearInterval(timer);
    }
  });
  clear(view, h("div.page-head", h("h1", "Reflect"), h("span.muted", bankId)), card(null, form), out);
}
