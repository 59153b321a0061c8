// Banks: every bank with its counts; create, configure (mission, directives, disposition,
// extraction mode, lifecycle preset and overrides) and delete with a typed confirmation.

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

/** One row: the counts come from `.../stats` (Hindsight's shape, facts by type included). */
async function bankRow(bank) {
  const stats = await get(bankPath(bank.bank_id, "stats"));
  const byType = stats.nodes_by_fact_type || {};
  const times = [bank.updated_at, stats.last_memory_write_at].filter(Boolean);
  return {
    ...bank,
    world: byType.world || 0,
    experience: byType.experience || 0,
    observations: stats.total_observations,
    entities: stats.total_entities,
    documents: stats.total_documents,
    pending: stats.pending_operations,
    failed: stats.failed_operations,
    last: times.sort().at(-1),
  };
}

/** The lifecycle settings a form can override, with how each is entered. */
const LIFECYCLE_HINTS = {
  decay_rate: "strength kept per day without access, neutral importance (0–1)",
  importance_scaled_decay: "important facts decay slower, small talk faster",
  keep_current_values: "never archive the current value of an attribute",
  archive_threshold: "archive facts weaker than this (0–1)",
  merge_duplicates: "merge near-identical facts",
  merge_similarity: "cosine at which two facts may merge (0–1)",
  delete_archived: "delete archived facts (never a default)",
  delete_after_days: "… archived and untouched this many days",
  delete_below_importance: "… and less important than this (0–1)",
  reinforce_step: "strength gained per access (0–1)",
  feedback_step: "importance moved per feedback (0–1)",
  schedule_cron: "when the daily run happens (cron, UTC)",
  strength_weight: "ranking boost by strength (0–2)",
  importance_weight: "ranking boost by importance (0–2)",
  recency_weight: "ranking boost by recency (0–2)",
};

/** Preset selector and one input per setting: empty follows the preset (its value shown as
 * the placeholder), a value overrides it. */
function lifecycleFields(presets, config) {
  const current = config.lifecycle_preset || presets.default;
  const overrides = config.lifecycle || {};
  const select = h("select", { name: "lifecycle_preset" }, Object.keys(presets.presets).map((name) => h("option", { value: name, selected: name === current }, name)));
  const inputs = [];
  const rows = Object.entries(presets.presets[current] || {}).map(([name, value]) => {
    const set = overrides[name];
    let input;
    if (typeof value === "boolean") {
      input = h("select", { name: `lifecycle.${name}`, dataset: { kind: "boolean" } }, [["", "preset"], ["true", "yes"], ["false", "no"]].map(([v, l]) => h("option", { value: v, selected: set !== undefined && String(set) === v }, l)));
    } else {
      const numeric = typeof value === "number";
      input = h("input", { name: `lifecycle.${name}`, type: numeric ? "number" : "text", step: numeric ? "any" : null, value: set === undefined ? "" : String(set), dataset: { kind: numeric ? "number" : "text" } });
    }
    inputs.push([name, input]);
    return field(name.replaceAll("_", " "), input, LIFECYCLE_HINTS[name]);
  });
  const showPreset = () => {
    const values = presets.presets[select.value] || {};
    for (const [name, input] of inputs) {
      if (input.tagName === "SELECT") input.options[0].textContent = `preset (${values[name] ? "yes" : "no"})`;
      else input.placeholder = String(values[name]);
    }
  };
  select.addEventListener("change", showPreset);
  showPreset();
  const count = Object.keys(overrides).length;
  return {
    element: h(
      "fieldset.lifecycle",
      h("legend", "Lifecycle"),
      field("Preset", select, "assistant: chat memory that fades in months · documentation: reference text that stays · support: tickets that fade in weeks"),
      h("details", { open: count > 0 }, h("summary.small.muted", count ? `Overrides (${count})` : "Overrides"), h("div.filter-grid", rows)),
    ),
    /** {lifecycle_preset, lifecycle}: the overrides given, typed as the preset's values. */
    values() {
      const lifecycle = {};
      for (const [name, input] of inputs) {
        const raw = input.value.trim();
        if (raw === "") continue;
        const kind = input.dataset.kind;
        lifecycle[name] = kind === "boolean" ? raw === "true" : kind === "number" ? Number(raw) : raw;
      }
      return { lifecycle_preset: select.value, lifecycle };
    },
  };
}

function slider(name, label, hint, value) {
  const output = h("output", String(value));
  const input = h("input", { type: "range", name, min: 1, max: 5, step: 1, value: String(value) });
  input.addEventListener("input", () => (output.value = input.value));
  return h("label.field.slider", h("span", label, " ", output), input, h("small.muted", hint));
}

/** The create/configure form; `profile` is null when creating. */
function bankForm(profile, presets, onSaved) {
  const config = (profile && profile.config) || {};
  const lifecycle = presets ? lifecycleFields(presets, config) : null;
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
    lifecycle ? lifecycle.element : null,
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
      ...(lifecycle ? lifecycle.values() : {}),
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
  // Servers without lifecycle presets still get the rest of the form.
  const presets = () => get("/v1/default/lifecycle/presets").catch(() => null);
  const openConfig = async (bankId) => {
    const [profile, known] = await Promise.all([get(bankPath(bankId, "profile")), presets()]);
    clear(panel, card(`Configure ${bankId}`, bankForm(profile, known, rerender)));
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
  const newBank = async () => {
    const form = bankForm(null, await presets(), (id) => (location.hash = bankHref(id, "memories")));
    clear(panel, card("New bank", form));
    form.querySelector("input[name=bank_id]").focus();
  };
  const newButton = h("button", { type: "button", onclick: newBank }, "New bank");
  const list = rows.length
    ? table(
        [
          ["Bank", (b) => h("a", { href: bankHref(b.bank_id, "memories") }, b.bank_id)],
          ["Name", (b) => b.name || h("span.muted", "—"), "wide-only"],
          ["World", (b) => b.world, "num"],
          ["Experience", (b) => b.experience, "num wide-only"],
          ["Observations", (b) => b.observations, "num wide-only"],
          ["Entities", (b) => b.entities, "num wide-only"],
          ["Documents", (b) => b.documents, "num wide-only"],
          [
            "Pending ops",
            (b) => [
              b.pending ? h("a", { href: bankHref(b.bank_id, "operations") }, b.pending) : "0",
              b.failed ? h("a.bad.small", { href: bankHref(b.bank_id, "operations", null, { status: "failed" }), title: "failed operations" }, ` · ${b.failed} failed`) : null,
            ],
            "num wide-only",
          ],
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
