// Reflect: ask, watch the agent's steps as they happen (tool calls with their inputs and
// evidence, read from `GET .../reflect/{request_id}` while the answer is written), then the
// answer and the memories it cites. Without a model the server answers with the evidence it
// gathered, and the page says so.

import { bankPath, get, post } from "../api.js";
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

const POLL_MS = 600;
const STAGES = {
  starting: "Reading the bank's mission and directives…",
  thinking: "The model is thinking…",
  synthesising: "Writing the answer from the evidence…",
  structuring: "Shaping the answer to the requested schema…",
  "gathering evidence": "Searching the memory…",
  done: "Finishing…",
};

/** A random id for this question (crypto.randomUUID needs a secure context; this does not). */
function requestId() {
  const bytes = crypto.getRandomValues(new Uint8Array(12));
  return "console-" + [...bytes].map((b) => b.toString(16).padStart(2, "0")).join("");
}

function stageText(stage) {
  if (stage && stage.startsWith("running ")) return `Running ${stage.slice(8)}…`;
  return STAGES[stage] || "Working…";
}

/** The steps so far, redrawn on every poll until the answer arrives. */
function liveView(steps, clock) {
  const calls = steps ? steps.tool_calls : [];
  return h(
    "section.card.live-steps",
    h("h2", "Steps so far"),
    h("div.loading", steps ? stageText(steps.stage) : "Sending the question…", " ", steps && steps.iteration ? badge(`turn ${steps.iteration}`, "tag") : null, " ", clock),
    calls.length ? h("ol.steps", calls.map(toolStep)) : h("p.muted.small", "No tool calls yet."),
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
    body.request_id = requestId();
    const started = performance.now();
    const clock = h("span.muted", "0 s");
    const timer = setInterval(() => (clock.textContent = `${Math.round((performance.now() - started) / 1000)} s`), 500);
    ctx.onCleanup(() => clearInterval(timer));
    const button = form.querySelector("button[type=submit]");
    button.disabled = true;
    clear(out, liveView(null, clock));
    // Poll the steps while the answer is being written; stop when it arrives.
    let answered = false;
    const watching = new AbortController();
    ctx.onCleanup(() => watching.abort());
    const watch = async () => {
      let shown = "";
      while (!answered) {
        try {
          const steps = await get(bankPath(bankId, "reflect", body.request_id), null, watching.signal);
          if (answered) return;
          // Redraw only on news, so an opened step stays open.
          const news = `${steps.stage}/${steps.iteration}/${steps.tool_calls.length}`;
          if (news !== shown) clear(out, liveView(steps, clock));
          shown = news;
          if (steps.status !== "running") return;
        } catch {
          return; // the answer (or its error) still arrives with the POST
        }
        await new Promise((resolve) => setTimeout(resolve, POLL_MS));
      }
    };
    watch();
    try {
      const answer = await post(bankPath(bankId, "reflect"), body);
      answered = true;
      watching.abort();
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
      answered = true;
      watching.abort();
      clear(out, errorBox(error));
    } finally {
      clearInterval(timer);
      button.disabled = false;
    }
  });
  clear(view, h("div.page-head", h("h1", "Reflect"), h("span.muted", bankId)), card(null, form), out);
}
