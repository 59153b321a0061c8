// A small renderer for Engram's OpenAPI document: no framework, nothing from a CDN.
"use strict";

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, value);
  for (const child of children) node.append(child);
  return node;
}

function resolve(doc, schema, depth) {
  // Inline $refs to components a few levels deep, so a reader sees the shape in one place.
  if (depth > 4 || schema === null || typeof schema !== "object") return schema;
  if (Array.isArray(schema)) return schema.map((s) => resolve(doc, s, depth));
  if (typeof schema.$ref === "string") {
    const name = schema.$ref.split("/").pop();
    const target = doc.components.schemas[name];
    return target ? { title: name, ...resolve(doc, target, depth + 1) } : schema;
  }
  const out = {};
  for (const [key, value] of Object.entries(schema)) out[key] = resolve(doc, value, depth);
  return out;
}

function renderOperation(doc, path, method, op) {
  const body = el("div");
  if (op.parameters && op.parameters.length) {
    const table = el("table", {}, el("tr", {}, el("th", {}, "parameter"), el("th", {}, "in"),
      el("th", {}, "required"), el("th", {}, "schema")));
    for (const p of op.parameters) {
      table.append(el("tr", {}, el("td", {}, el("code", {}, p.name)), el("td", {}, p.in),
        el("td", {}, p.required ? "yes" : ""), el("td", {}, el("code", {}, JSON.stringify(p.schema)))));
    }
    body.append(el("h4", {}, "Parameters"), table);
  }
  if (op.requestBody) {
    for (const [media, content] of Object.entries(op.requestBody.content)) {
      body.append(el("h4", {}, "Request body (" + media + ")"),
        el("pre", {}, JSON.stringify(resolve(doc, content.schema, 0), null, 2)));
    }
  }
  for (const [status, answer] of Object.entries(op.responses || {})) {
    const schema = answer.content && answer.content["application/json"]
      ? answer.content["application/json"].schema : {};
    body.append(el("h4", {}, status + " — " + answer.description),
      el("pre", {}, JSON.stringify(resolve(doc, schema, 0), null, 2)));
  }
  const summary = el("summary", {}, el("span", { class: "method " + method }, method.toUpperCase()),
    el("code", {}, path), " ", op.summary || "");
  const section = el("section", { class: "op", "data-search": (path + " " + (op.summary || "") + " " +
    (op.tags || []).join(" ")).toLowerCase() }, el("details", {}, summary, body));
  if (op["x-unsupported"]) section.classList.add("unsupported");
  return section;
}

async function main() {
  const doc = await (await fetch("/openapi.json")).json();
  const byTag = new Map();
  for (const [path, methods] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(methods)) {
      const tag = (op.tags || ["other"])[0];
      if (!byTag.has(tag)) byTag.set(tag, []);
      byTag.get(tag).push(renderOperation(doc, path, method, op));
    }
  }
  const main = document.getElementById("ops");
  const toc = document.getElementById("toc");
  main.replaceChildren();
  for (const [tag, sections] of [...byTag.entries()].sort()) {
    toc.append(el("a", { href: "#tag-" + tag }, tag));
    main.append(el("h2", { id: "tag-" + tag }, tag), ...sections);
  }
  document.getElementById("filter").addEventListener("input", (event) => {
    const needle = event.target.value.toLowerCase();
    for (const section of main.querySelectorAll("section.op")) {
      section.hidden = needle !== "" && !section.dataset.search.includes(needle);
    }
  });
}

main().catch((error) => {
  document.getElementById("ops").textContent = "Could not load /openapi.json: " + error;
});
