#!/usr/bin/env node
// Drives the published JavaScript client (@fuul/sdk, the version pinned in package.json) against a server.
//
// stdin: one JSON scenario
//   {"baseUrl": "http://127.0.0.1:8000/api/v1", "apiKey": "...",
//    "defaultQueryParams": {...}?, "debug": false?,
//    "browser": {"search": "?af=CODE", "pathname": "/", "origin": "http://localhost",
//                "referrer": "", "localStorage": {"fuul.tracking_id": "t-1"}}?,
//    "calls": [{"method": "getReferralCode", "args": [{"code": "ABC1234"}]}, ...]}
// stdout: one JSON line per call, in order:
//   {"ok": true, "value": <the resolved value>}                 (a method resolving to undefined: value null, "void": true)
//   {"ok": false, "error": {"name", "message", "status"?, "body"?, "code"?, "errors"?}}
//     status / body: the HTTP status and parsed answer body, when the client threw the AxiosError it got (most
//     methods: they do not catch); createAffiliateCode / updateAffiliateCode / updateRebateRate map a 4xx body
//     to their own errors (ValidationError with `errors`, CodeInUseError, AddressInUseError,
//     InvalidSignatureError, or a plain Error whose message is the body's `message` lowercased): no status then.
// A failing call does not stop the following ones. The exit code is 0 unless the scenario itself is unusable.
//
// Where the package is found: FUUL_SDK_NODE_MODULES (a node_modules folder), else each entry of NODE_PATH, else
// tests/compat/node_modules. (ES modules ignore NODE_PATH, so the entry point is resolved here by hand from the
// package's own `exports`, then imported by file URL.)
//
// Node vs browser: Fuul.init() and every data method work in plain Node (the bundled axios uses Node's global
// fetch: its XHR adapter needs XMLHttpRequest, and its Node http adapter is compiled out of dist/index.mjs).
// Only the tracking methods (sendEvent, sendPageview, identifyUser) demand a browser: they throw
// "Fuul SDK: Browser context required" unless `window` and `document` exist, read `navigator.webdriver`
// (must be falsy), keep the tracking id in localStorage["fuul.tracking_id"] (a nanoid made on first use), dedup
// sends through localStorage["fuul.sent_<name>"], and read the page from document.location and the
// af/referrer/source/category/title/tag parameters from window.location.search. The shims below are the least
// that satisfies them. They are installed AFTER the package is imported, on purpose: axios decides at load time
// whether it runs in a browser (it would then read document.cookie and window.location for XSRF handling);
// loaded first, it stays in its non-browser mode and only the SDK's own call-time checks see the shims.

import { readFileSync, existsSync } from "node:fs";
import { delimiter, dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const PACKAGE = "@fuul/sdk";
const here = dirname(fileURLToPath(import.meta.url));

function nodeModulesDirs() {
  const dirs = [];
  if (process.env.FUUL_SDK_NODE_MODULES) dirs.push(process.env.FUUL_SDK_NODE_MODULES);
  for (const entry of (process.env.NODE_PATH || "").split(delimiter)) if (entry) dirs.push(entry);
  dirs.push(join(here, "node_modules"));
  return dirs;
}

function expectedVersion() {
  const manifest = JSON.parse(readFileSync(join(here, "package.json"), "utf8"));
  return manifest.dependencies[PACKAGE];
}

async function loadSdk() {
  for (const dir of nodeModulesDirs()) {
    const root = join(dir, ...PACKAGE.split("/"));
    const manifestPath = join(root, "package.json");
    if (!existsSync(manifestPath)) continue;
    const manifest = JSON.parse(readFileSync(manifestPath, "utf8"));
    const wanted = expectedVersion();
    if (manifest.version !== wanted) {
      throw new Error(`${manifestPath}: version ${manifest.version}, tests/compat/package.json pins ${wanted}`);
    }
    const exported = manifest.exports?.["."];
    const entry = (typeof exported === "object" && exported.import) || manifest.module || manifest.main;
    return { module: await import(pathToFileURL(join(root, entry)).href), version: manifest.version };
  }
  throw new Error(`${PACKAGE} not found in: ${nodeModulesDirs().join(", ")} (tests/compat/driver.py installs it)`);
}

function installBrowserShims(browser = {}) {
  const origin = browser.origin ?? "http://localhost";
  const pathname = browser.pathname ?? "/";
  const search = browser.search ?? "";
  const location = { origin, pathname, search, href: `${origin}${pathname}${search}` };
  const store = new Map(Object.entries(browser.localStorage ?? {}).map(([k, v]) => [k, String(v)]));
  const localStorage = {
    getItem: (key) => (store.has(key) ? store.get(key) : null),
    setItem: (key, value) => void store.set(key, String(value)),
    removeItem: (key) => void store.delete(key),
    clear: () => store.clear(),
    key: (i) => [...store.keys()][i] ?? null,
    get length() {
      return store.size;
    },
  };
  const define = (name, value) =>
    Object.defineProperty(globalThis, name, { value, configurable: true, writable: true, enumerable: true });
  define("window", { location });
  define("document", { location, referrer: browser.referrer ?? "" });
  define("localStorage", localStorage);
  // Node >= 21 has a global navigator without `webdriver` (falsy: fine); Node 20 has none.
  if (typeof globalThis.navigator === "undefined") define("navigator", { webdriver: false });
}

function jsonSafe(value) {
  // Dates, Maps and the like as JSON.stringify renders them; undefined inside objects dropped.
  return value === undefined ? undefined : JSON.parse(JSON.stringify(value));
}

function describeError(err) {
  const out = { name: err?.name ?? "Error", message: String(err?.message ?? err) };
  if (err?.response) {
    out.status = err.response.status;
    out.body = jsonSafe(err.response.data);
  } else if (typeof err?.status === "number") {
    out.status = err.status;
  }
  if (err?.code !== undefined) out.code = err.code;
  if (Array.isArray(err?.errors)) out.errors = err.errors;
  if (err?.address !== undefined) out.address = err.address;
  return out;
}

async function readStdin() {
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(chunk);
  return Buffer.concat(chunks).toString("utf8");
}

async function main() {
  const scenario = JSON.parse(await readStdin());
  const { module: sdk } = await loadSdk();
  const Fuul = sdk.Fuul;
  installBrowserShims(scenario.browser);
  // init() runs once per process (a second call is ignored by the client): one scenario, one base URL and key.
  Fuul.init({
    apiKey: scenario.apiKey,
    baseApiUrl: scenario.baseUrl,
    ...(scenario.defaultQueryParams ? { defaultQueryParams: scenario.defaultQueryParams } : {}),
    ...(scenario.debug ? { debug: true } : {}),
  });
  for (const call of scenario.calls ?? []) {
    let line;
    try {
      if (typeof Fuul[call.method] !== "function") throw new TypeError(`Fuul.${call.method} is not a function`);
      const value = await Fuul[call.method](...(call.args ?? []));
      line = value === undefined ? { ok: true, value: null, void: true } : { ok: true, value: jsonSafe(value) };
    } catch (err) {
      line = { ok: false, error: describeError(err) };
    }
    process.stdout.write(JSON.stringify(line) + "\n");
  }
}

main().catch((err) => {
  process.stderr.write(`run.mjs: ${err?.stack ?? err}\n`);
  process.exit(2);
});
