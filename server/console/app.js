// The console shell: hash routing, the bank picker, theme, API key; each page is a module.

import { apiKey, get, setApiKey } from "./api.js";
import { clear, errorBox, h, loading } from "./ui.js";
import * as banks from "./pages/banks.js";
import * as memories from "./pages/memories.js";
import * as memory from "./pages/memory.js";
import * as recall from "./pages/recall.js";
import * as reflect from "./pages/reflect.js";
import * as graph from "./pages/graph.js";
import * as timeline from "./pages/timeline.js";
import * as observations from "./pages/observations.js";
import * as models from "./pages/models.js";
import * as operations from "./pages/operations.js";
import * as llm from "./pages/llm.js";

const BANK_PAGES = [
  ["memories", "Memories", memories],
  ["recall", "Recall", recall],
  ["reflect", "Reflect", reflect],
  ["graph", "Entity graph", graph],
  ["timeline", "Timeline", timeline],
  ["observations", "Observations", observations],
  ["models", "Mental models", models],
  ["operations", "Operations", operations],
  ["llm", "LLM calls", llm],
];
const HIDDEN_PAGES = { memory };
const LAST_BANK = "engram.bank";

const view = document.getElementById("view");
const nav = document.getElementById("nav");
const bankSelect = document.getElementById("bank-select");
let cleanups = [];
let bankList = [];

/** "#/b/<bank>/<page>/<arg>?a=1" → {bankId, page, arg, params}. */
function parseHash() {
  const raw = location.hash.replace(/^#/, "") || "/banks";
  const [path, search = ""] = raw.split("?");
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  const params = new URLSearchParams(search);
  if (parts[0] === "b" && parts[1]) return { bankId: parts[1], page: parts[2] || "memories", arg: parts[3], params };
  return { bankId: null, page: "banks", arg: null, params };
}

export function bankHref(bankId, page, arg, params) {
  let href = `#/b/${encodeURIComponent(bankId)}/${page}`;
  if (arg) href += `/${encodeURIComponent(arg)}`;
  const search = params ? new URLSearchParams(params).toString() : "";
  return search ? `${href}?${search}` : href;
}

function renderNav(route) {
  const links = [h("a", { href: "#/banks", "aria-current": route.page === "banks" ? "page" : null }, "Banks")];
  if (route.bankId) {
    for (const [page, label] of BANK_PAGES) {
      const current = route.page === page || (page === "memories" && route.page === "memory");
      links.push(h("a", { href: bankHref(route.bankId, page), "aria-current": current ? "page" : null }, label));
    }
  }
  clear(nav, links);
}

async function refreshBanks(selected) {
  try {
    const body = await get("/v1/default/banks", { limit: 1000 });
    bankList = body.banks.map((b) => b.bank_id);
  } catch {
    bankList = [];
  }
  const ids = selected && !bankList.includes(selected) ? [selected, ...bankList] : bankList;
  clear(
    bankSelect,
    h("option", { value: "" }, ids.length ? "Choose a bank…" : "No banks yet"),
    ids.map((id) => h("option", { value: id, selected: id === selected }, id)),
  );
}

async function route() {
  for (const fn of cleanups.splice(0)) fn();
  const current = parseHash();
  if (current.bankId) localStorage.setItem(LAST_BANK, current.bankId);
  renderNav(current);
  bankSelect.value = current.bankId || "";
  const pageModule =
    current.page === "banks"
      ? banks
      : HIDDEN_PAGES[current.page] || (BANK_PAGES.find(([p]) => p === current.page) || [])[2];
  clear(view, loading());
  if (!pageModule) {
    clear(view, errorBox(`No such page: ${current.page}`));
    return;
  }
  const controller = new AbortController();
  cleanups.push(() => controller.abort());
  const ctx = {
    view,
    bankId: current.bankId,
    arg: current.arg,
    params: current.params,
    signal: controller.signal,
    href: (page, arg, params) => bankHref(current.bankId, page, arg, params),
    /** Replace the query string without re-rendering (filters, the last query). */
    setParams(values) {
      const search = new URLSearchParams(Object.entries(values).filter(([, v]) => v !== "" && v != null)).toString();
      const base = location.hash.split("?")[0];
      history.replaceState(null, "", search ? `${base}?${search}` : base);
    },
    onCleanup: (fn) => cleanups.push(fn),
    banksChanged: (selected) => refreshBanks(selected),
  };
  try {
    await pageModule.render(ctx);
  } catch (error) {
    if (controller.signal.aborted) return;
    clear(view, errorBox(error));
  }
  document.title = `${nav.querySelector("[aria-current=page]")?.textContent || "Engram"} · Engram console`;
}

function setupTheme() {
  const button = document.getElementById("theme-button");
  const label = () => (button.textContent = document.documentElement.dataset.theme === "dark" ? "Light" : "Dark");
  const toggle = () => {
    const next = document.documentElement.dataset.theme === "dark" ? "light" : "dark";
    document.documentElement.dataset.theme = next;
    localStorage.setItem("engram.theme", next);
    label();
    window.dispatchEvent(new CustomEvent("engram:theme"));
  };
  button.addEventListener("click", toggle);
  label();
  return toggle;
}

function setupKey() {
  const dialog = document.getElementById("key-dialog");
  const input = document.getElementById("key-input");
  const reason = document.getElementById("key-reason");
  const button = document.getElementById("key-button");
  const label = () => (button.textContent = apiKey() ? "Key ✓" : "Key");
  const open = (why) => {
    if (dialog.open) return;
    if (why) reason.textContent = why;
    input.value = apiKey();
    dialog.showModal();
    input.focus();
  };
  button.addEventListener("click", () => open());
  dialog.addEventListener("close", () => {
    if (dialog.returnValue === "save") setApiKey(input.value.trim());
    if (dialog.returnValue === "clear") setApiKey("");
    label();
    if (dialog.returnValue === "save" || dialog.returnValue === "clear") {
      refreshBanks(parseHash().bankId);
      route();
    }
  });
  window.addEventListener("engram:unauthorized", () =>
    open("The server answered 401: it needs an API key. Enter one to continue."),
  );
  label();
}

function setupKeyboard(toggleTheme) {
  document.addEventListener("keydown", (event) => {
    const typing = event.target.closest("input, textarea, select, [contenteditable]");
    if (event.key === "/" && !typing) {
      const search = view.querySelector("[data-search]");
      if (search) {
        event.preventDefault();
        search.focus();
        search.select?.();
      }
    } else if (event.key === "t" && !typing && !event.ctrlKey && !event.metaKey && !event.altKey) {
      toggleTheme();
    } else if (event.key === "Escape" && typing && typing.matches("[data-search]")) {
      typing.blur();
    }
  });
}

bankSelect.addEventListener("change", () => {
  const current = parseHash();
  const page = current.page === "banks" || current.page === "memory" ? "memories" : current.page;
  location.hash = bankSelect.value ? bankHref(bankSelect.value, page) : "#/banks";
});

window.addEventListener("hashchange", route);
setupKey();
setupKeyboard(setupTheme());
// Reopen the last bank, if it still exists; otherwise start at the bank list.
refreshBanks(parseHash().bankId).then(() => {
  const last = localStorage.getItem(LAST_BANK);
  if (!location.hash && last && bankList.includes(last)) {
    history.replaceState(null, "", bankHref(last, "memories"));
    bankSelect.value = last;
  }
  route();
});
