// The public v1 API, and nothing else: the console works the same against a remote Engram.

const KEY_STORAGE = "engram.apiKey";

export class ApiError extends Error {
  constructor(status, detail, field) {
    super(field ? `${detail} (${field})` : detail);
    this.status = status;
    this.detail = detail;
    this.field = field;
  }
}

export function apiKey() {
  return localStorage.getItem(KEY_STORAGE) || "";
}

export function setApiKey(key) {
  if (key) localStorage.setItem(KEY_STORAGE, key);
  else localStorage.removeItem(KEY_STORAGE);
}

/** `/v1/default/banks/{bank}` + rest, with every path segment encoded. */
export function bankPath(bankId, ...rest) {
  return ["/v1/default/banks", bankId, ...rest].map((s, i) => (i ? encodeURIComponent(s) : s)).join("/");
}

function withQuery(path, query) {
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(query || {})) {
    if (value === undefined || value === null || value === "") continue;
    for (const v of Array.isArray(value) ? value : [value]) params.append(name, String(v));
  }
  const text = params.toString();
  return text ? `${path}?${text}` : path;
}

/** One call; JSON in and out. A 401 also tells the page to ask for a key. */
export async function call(method, path, { query, body, signal } = {}) {
  const headers = { Accept: "application/json" };
  const key = apiKey();
  if (key) headers.Authorization = `Bearer ${key}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(withQuery(path, query), {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    signal,
  });
  const text = await response.text();
  let data = null;
  if (text) {
    try {
      data = JSON.parse(text);
    } catch {
      data = { detail: text };
    }
  }
  if (!response.ok) {
    if (response.status === 401) window.dispatchEvent(new CustomEvent("engram:unauthorized"));
    const detail = data && typeof data.detail === "string" ? data.detail : response.statusText;
    throw new ApiError(response.status, detail || `HTTP ${response.status}`, data && data.field);
  }
  return data;
}

export const get = (path, query, signal) => call("GET", path, { query, signal });
export const post = (path, body) => call("POST", path, { body });
export const put = (path, body) => call("PUT", path, { body });
export const patch = (path, body) => call("PATCH", path, { body });
export const del = (path) => call("DELETE", path);

let features = null;

/** The server's feature flags (`GET /version`), read once. */
export async function serverFeatures() {
  if (features === null) {
    const version = await get("/version");
    features = version.features || {};
  }
  return features;
}
