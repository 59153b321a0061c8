// Banks: every bank with its counts; create, configure (mission, directives, disposition,
// extraction mode) and delete with a typed confirmation.

import { bankPath, del, get, put } from "../api.js";
import { bankHref } from "../app.js";
import { card, clear, confirmTyped, empty, errorBox, field, h, table, toast, when } from "../ui.js";

const TRAITS = [
  ["skepticism", "Skepticism", "1 trusting … 5 doubtful"],
  ["literalism", "Literalism", "1 reads between the lines … 5 literal"],
  ["empathy", "Empathy", "1 detached … 5 empathetic"],
];
const MODES = [
  ["", "Server default (LLM with a key, else local)"],
  ["llm", "LLM extraction"],
  ["local", "Local extraction (no LLM)"],
  ["none", "Verbatim chunks"],
];

async function countOf(bankId, type) {
  const body = await get(bankPath(bankId, "memories", "list"), { type, limit: 1 });
  return body.total;
}

async function bankRow(bank) {
  const id = bank.bank_id;
  const [stats, world, experience, ops] = await Promise.all([
    get(bankPath(id, "stats")),
    countOf(id, "world"),
    countOf(id, "experience"),
    get(bankPath(id, "operations"), { limit: 100 }),
  ]);
  const open = ops.operations.filter((o) => o.status === "pending" || o.status === "processing");
  const times = [bank.updated_at, ...ops.operations.map((o) => o.updated_at || o.created_at)].filter(Boolean);
  return {
    ...bank,
    world,
    experience,
    observations: stats.total_observations,
    entities: stats.total_entities,
    documents: stats.total_documents,
    pending: open.length,
    failed: ops.operations.filter((o) => o.status === "failed").length,
    last: times.sort().at(-1),
  };
}

function slider(name, label, hint, value) {
  const output = h("output", String(value));
  const input = h("input", { type: "range", name, min: 1, max: 5, step: 1, value: String(value) });
  input.addEventListener("input", () => (output.value = input.value));
  return h("label.field.slider", h("span", label, " ", output), input, h("small.muted", hint));
}

/** The create/configure form; `profile` is null when creating. */
function bankForm(profile, onSaved) {
  const config = (profile && profile.config) || {};
  const disposition = (profile && profile.disposition) || { skepticism: 3, literalism: 3, empathy: 3 };
  const idInput = profile
    ? null
    : h("input", { name: "bank_id", required: true, maxlength: 200, placeholder: "e.g. support-agent", autocomplete: "off" });
  const form = h(
    "form.stack.bank-form",
    idInput ? field("Bank id", idInput, "Up to 200 characters, no “/”.") : null,
    field("Name", h("input", { name: "name", value: (profile && profile.name) || "" })),
    field("Mission", h("textarea", { name: "mission", rows: 2, placeholder: "What this memory is for; reflect reads it." }, (profile && profile.mission) || "")),
    field(
      "Directives",
      h("textarea", { name: "directives", rows: 3, placeholder: "One rule per line, e.g. Never reveal phone numbers." }, (config.directives || []).join("\n")),
      "Hard rules reflect follows, one per line.",
    ),
    h("fieldset.traits", h("legend", "Disposition"), TRAITS.map(([name, label, hint]) => slider(name, label, hint, disposition[name]))),
    field(
      "Extraction mode",
      h("select", { name: "extraction_mode" }, MODES.map(([value, label]) => h("option", { value, selected: (config.extraction_mode || "") === value }, label))),
    ),
    field("Retain mission", h("input", { name: "retain_mission", value: config.retain_mission || "", placeholder: "What extraction should focus on" })),
    h("label.check", h("input", { type: "checkbox", name: "enable_observations", checked: config.enable_observations !== false }), " Build observations (consolidation)"),
    h("div.row.end", h("button", { type: "submit" }, profile ? "Save" : "Create bank")),
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const values = Object.fromEntries(new FormData(form));
    const bankId = profile ? profile.bank_id : values.bank_id.trim();
    const body = {
      name: values.name,
      mission: values.mission,
      directives: values.directives.split("\n").map((s) => s.trim()).filter(Boolean),
      disposition_skepticism: Number(values.skepticism),
      disposition_literalism: Number(values.literalism),
      disposition_empathy: Number(values.empathy),
      retain_mission: values.retain_mission,
      enable_observations: form.elements.enable_observations.checked,
    };
    if (values.extraction_mode) body.extraction_mode = values.extraction_mode;
    // Hindsight's "concise" maps to the server default: the way back from an explicit mode.
    else if (config.extraction_mode) body.retain_extraction_mode = "concise";
    try {
      await put(bankPath(bankId), body);
      toast(profile ? `Saved ${bankId}` : `Created ${bankId}`, "ok");
      onSaved(bankId);
    } catch (error) {
      form.querySelector(".error")?.remove();
      form.prepend(errorBox(error));
    }
  });
  return form;
}

export async function render(ctx) {
  const { view } = ctx;
  const listed = await get("/v1/default/banks", { limit: 1000 }, ctx.signal);
  const rows = await Promise.all(listed.banks.map(bankRow));
  const panel = h("div.panel");
  const rerender = (selected) => {
    ctx.banksChanged(selected);
    render(ctx);
  };
  const openConfig = async (bankId) => {
    const profile = await get(bankPath(bankId, "profile"));
    clear(panel, card(`Configure ${bankId}`, bankForm(profile, rerender)));
    panel.scrollIntoView({ block: "nearest" });
  };
  const remove = async (bankId) => {
    const sure = await confirmTyped(
      `Deleting ${bankId} removes its memories, documents, entities, observations and mental models. This cannot be undone.`,
      bankId,
    );
    if (!sure) return;
    try {
      await del(bankPath(bankId));
      toast(`Deleted ${bankId}`, "ok");
      rerender(null);
    } catch (error) {
      toast(error.message, "bad");
    }
  };
  const newButton = h("button", { type: "button", onclick: () => clear(panel, card("New bank", bankForm(null, (id) => (location.hash = bankHref(id, "memories"))))) }, "New bank");
  const list = rows.length
    ? table(
        [
          ["Bank", (b) => h("a", { href: bankHref(b.bank_id, "memories") }, b.bank_id)],
          ["Name", (b) => b.name || h("span.muted", "—"), "wide-only"],
          ["World", (b) => b.world, "num"],
          ["Experience", (b) => b.experience, "num"],
          ["Observations", (b) => b.observations, "num"],
          ["Entities", (b) => b.entities, "num wide-only"],
          ["Documents", (b) => b.documents, "num wide-only"],
          ["Pending ops", (b) => (b.pending ? h("a", { href: bankHref(b.bank_id, "operations") }, b.pending) : "0"), "num wide-only"],
          ["Last activity", (b) => when(b.last), "wide-only"],
          [
            "",
            (b) =>
              h(
                "div.row.actions",
                h("button.ghost.small", { type: "button", onclick: () => openConfig(b.bank_id) }, "Configure"),
                h("button.ghost.small.danger", { type: "button", onclick: () => remove(b.bank_id) }, "Delete"),
              ),
          ],
        ],
        rows,
      )
    : empty(
        "No banks yet.",
        "Create one with “New bank”, or retain a note and the bank is created for you: ",
        h("code", 'engram retain --bank notes "Kai moved to Lisbon in May."'),
      );
  clear(view, h("div.page-head", h("h1", "Banks"), h("span.muted", `${rows.length} bank${rows.length === 1 ? "" : "s"}`), h("span.spacer"), newButton), list, panel);
}
