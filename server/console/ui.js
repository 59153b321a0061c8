// Small DOM helpers shared by the pages: element building, tables, dates, states, toasts.

/** h("div.card#id", {attrs}, ...children): an element; strings become text, never HTML. */
export function h(spec, attrs, ...children) {
  const [, tag = "div", rest = ""] = /^([a-z0-9-]*)(.*)$/i.exec(spec);
  const el = document.createElement(tag || "div");
  for (const part of rest.match(/[.#][^.#]+/g) || []) {
    if (part[0] === ".") el.classList.add(part.slice(1));
    else el.id = part.slice(1);
  }
  if (attrs && (typeof attrs !== "object" || attrs instanceof Node || Array.isArray(attrs))) {
    children.unshift(attrs);
    attrs = null;
  }
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on")) el.addEventListener(name.slice(2), value);
    else if (name === "dataset") Object.assign(el.dataset, value);
    else if (name in el && typeof value !== "string") el[name] = value;
    else el.setAttribute(name, value === true ? "" : value);
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

export function clear(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

/** An absolute date in the reader's zone: "2026-12-01 17:30" (title: the full ISO value). */
export function when(iso) {
  if (!iso) return h("span.muted", "—");
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return h("span", iso);
  const pad = (n) => String(n).padStart(2, "0");
  const text = `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}`;
  return h("time", { datetime: iso, title: iso }, text);
}

export function num(value, digits = 3) {
  if (value === null || value === undefined) return "—";
  return typeof value === "number" && !Number.isInteger(value) ? value.toFixed(digits) : String(value);
}

export function badge(text, kind) {
  return h(`span.badge.${kind || String(text).replace(/[^a-z0-9_-]/gi, "")}`, text);
}

/** A table: columns are [header, row => cell, optional class]. */
export function table(columns, rows, { onRow, caption } = {}) {
  const head = h("thead", h("tr", columns.map(([label, , cls]) => h("th", { class: cls }, label))));
  const body = h(
    "tbody",
    rows.map((row) => {
      const tr = h("tr", columns.map(([, cell, cls]) => h("td", { class: cls }, cell(row))));
      if (onRow) {
        tr.classList.add("clickable");
        tr.tabIndex = 0;
        tr.addEventListener("click", (event) => {
          if (!event.target.closest("a, button, input, select")) onRow(row);
        });
        tr.addEventListener("keydown", (event) => {
          if (event.key === "Enter") onRow(row);
        });
      }
      return tr;
    }),
  );
  return h("div.table-wrap", h("table", caption ? h("caption", caption) : null, head, body));
}

export function empty(title, ...hint) {
  return h("div.empty", h("strong", title), hint.length ? h("p", ...hint) : null);
}

export function errorBox(error) {
  const status = error && error.status ? `HTTP ${error.status}: ` : "";
  return h("div.error", { role: "alert" }, status + (error && error.message ? error.message : String(error)));
}

export function loading(text = "Loading…") {
  return h("div.loading", text);
}

export function toast(message, kind = "info") {
  const box = document.getElementById("toasts");
  const item = h(`div.toast.${kind}`, message);
  box.append(item);
  setTimeout(() => item.remove(), 5000);
}

export function card(title, ...children) {
  return h("section.card", title ? h("h2", title) : null, ...children);
}

/** A confirmation the user must type to pass (for deletions that cannot be undone). */
export function confirmTyped(message, expected) {
  return new Promise((resolve) => {
    const input = h("input", { "aria-label": "Confirmation", autocomplete: "off" });
    const ok = h("button.danger", { type: "submit", value: "ok", disabled: true }, "Delete");
    input.addEventListener("input", () => (ok.disabled = input.value !== expected));
    const dialog = h(
      "dialog",
      h(
        "form.stack",
        { method: "dialog" },
        h("h2", "Are you sure?"),
        h("p", message),
        h("label", "Type ", h("code", expected), " to confirm", input),
        h("div.row.end", h("button.ghost", { type: "submit", value: "cancel" }, "Cancel"), ok),
      ),
    );
    dialog.addEventListener("close", () => {
      resolve(dialog.returnValue === "ok");
      dialog.remove();
    });
    document.body.append(dialog);
    dialog.showModal();
  });
}

/** Line diff (longest common subsequence), for version histories: [{op, text}]. */
export function diffLines(before, after) {
  const a = (before || "").split("\n");
  const b = (after || "").split("\n");
  const dp = Array.from({ length: a.length + 1 }, () => new Array(b.length + 1).fill(0));
  for (let i = a.length - 1; i >= 0; i--)
    for (let j = b.length - 1; j >= 0; j--)
      dp[i][j] = a[i] === b[j] ? dp[i + 1][j + 1] + 1 : Math.max(dp[i + 1][j], dp[i][j + 1]);
  const out = [];
  let i = 0;
  let j = 0;
  while (i < a.length && j < b.length) {
    if (a[i] === b[j]) {
      out.push({ op: "same", text: a[i++] });
      j++;
    } else if (dp[i + 1][j] >= dp[i][j + 1]) out.push({ op: "del", text: a[i++] });
    else out.push({ op: "add", text: b[j++] });
  }
  while (i < a.length) out.push({ op: "del", text: a[i++] });
  while (j < b.length) out.push({ op: "add", text: b[j++] });
  return out;
}

export function diffView(before, after) {
  return h(
    "pre.diff",
    diffLines(before, after).map(({ op, text }) =>
      h(`div.${op}`, (op === "add" ? "+ " : op === "del" ? "- " : "  ") + text),
    ),
  );
}

/** Form values as an object (checkboxes as booleans, multi-selects as arrays). */
export function formValues(form) {
  const values = {};
  for (const el of form.elements) {
    if (!el.name) continue;
    if (el.type === "checkbox") {
      if (el.dataset.group) (values[el.dataset.group] ||= []).push(...(el.checked ? [el.value] : []));
      else values[el.name] = el.checked;
    } else values[el.name] = el.value;
  }
  return values;
}

export function field(label, control, hint) {
  return h("label.field", h("span", label), control, hint ? h("small.muted", hint) : null);
}

export function debounce(fn, ms) {
  let timer = 0;
  return (...args) => {
    clearTimeout(timer);
    timer = setTimeout(() => fn(...args), ms);
  };
}
