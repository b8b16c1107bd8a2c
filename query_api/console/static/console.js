// The operator console: reads the API with the key the operator signs in with, as any client would.
// The key lives in this tab's sessionStorage and travels in the Authorization header only: never in an address,
// never in the page. Amounts stay the API's exact decimal strings; only the charts turn them into numbers.
"use strict";

(function () {
  const API = document.body.dataset.api;
  const KEY_ITEM = "rewards-console-key";
  const PROJECT_ITEM = "rewards-console-project";
  const PROJECT_NAME_ITEM = "rewards-console-project-name";
  const REFRESH_MS = 2000;
  const DELIVERIES_SHOWN = 10; // per webhook endpoint, the newest
  const AUTO_REFRESHED = new Set(["health", "payouts", "claims"]);
  const $ = (selector) => document.querySelector(selector);

  let key = sessionStorage.getItem(KEY_ITEM);
  let current = null; // the page shown: {name, arg}
  let loading = false;
  let reload = false;
  const charts = {};
  const affiliatesSeen = new Map(); // affiliate id → its listing row, for its page
  const listing = { page: 1 };

  // -- the API ---------------------------------------------------------------------------------------------------

  async function api(path, params) {
    const url = new URL(API + path, location.origin);
    for (const [name, value] of Object.entries(params || {})) {
      if (value !== undefined && value !== null && value !== "") url.searchParams.set(name, value);
    }
    try {
      const response = await fetch(url, { headers: { Authorization: "Bearer " + key }, cache: "no-store" });
      let body = null;
      try {
        body = await response.json();
      } catch (_) {
        body = null;
      }
      return { ok: response.ok, status: response.status, body };
    } catch (_) {
      return { ok: false, status: 0, body: { message: "The server did not answer" } };
    }
  }

  function messageOf(answer) {
    const message = answer.body && answer.body.message;
    if (Array.isArray(message)) return message.join("; ");
    return message || `HTTP ${answer.status}`;
  }

  class SignedOut extends Error {}

  // A failed read: a 401 signs out (the key is unknown or revoked), a 403 says which scope the part needs.
  function problem(section, answer) {
    if (answer.status === 401) {
      signOut(messageOf(answer));
      throw new SignedOut();
    }
    const banner = section.querySelector(".scope");
    const scope = /requires the (\S+) scope/.exec(messageOf(answer));
    banner.textContent = scope
      ? `This part needs a key with the ${scope[1]} scope. The API answered: “${messageOf(answer)}”`
      : `The API answered ${answer.status}: ${messageOf(answer)}`;
    banner.hidden = false;
  }

  function clearProblem(section) {
    const banner = section.querySelector(".scope");
    if (banner) banner.hidden = true;
  }

  // -- formatting (exact: amounts are decimal strings) --------------------------------------------------------------

  function grouped(text) {
    const [whole, fraction] = String(text).split(".");
    const digits = whole.replace(/\B(?=(\d{3})+(?!\d))/g, ",");
    return fraction ? `${digits}.${fraction}` : digits;
  }

  function tokenAmount(raw, decimals) {
    // A raw integer in the token's smallest unit, as whole tokens: moved by `decimals` places, without a float.
    const digits = String(raw).padStart(decimals + 1, "0");
    const whole = digits.slice(0, digits.length - decimals);
    const fraction = decimals ? digits.slice(digits.length - decimals).replace(/0+$/, "") : "";
    return grouped(fraction ? `${whole}.${fraction}` : whole);
  }

  function shortText(text, keep) {
    return text.length > keep * 2 + 1 ? `${text.slice(0, keep)}…${text.slice(-keep)}` : text;
  }

  function when(iso) {
    return iso ? iso.replace("T", " ").replace(/\.\d{3}Z$/, " UTC") : "–";
  }

  function duration(ms) {
    if (ms === null || ms === undefined) return "–";
    return ms < 1000 ? `${ms} ms` : `${(ms / 1000).toFixed(ms < 10000 ? 2 : 1)} s`;
  }

  function cell(text, className) {
    const td = document.createElement("td");
    td.textContent = text;
    if (className) td.className = className;
    return td;
  }

  function fillRows(table, rows, emptyText) {
    const body = table.querySelector("tbody");
    const columns = table.querySelectorAll("thead th").length;
    body.replaceChildren();
    if (!rows.length) {
      const tr = document.createElement("tr");
      const td = cell(emptyText, "empty");
      td.colSpan = columns;
      tr.append(td);
      body.append(tr);
      return;
    }
    for (const cells of rows) {
      const tr = document.createElement("tr");
      tr.append(...cells);
      body.append(tr);
    }
  }

  // -- charts (uPlot, vendored) ------------------------------------------------------------------------------------

  function chart(name, element, series, data, bars) {
    const width = Math.max(element.clientWidth, 320);
    if (charts[name] && charts[name].root.isConnected) {
      charts[name].setData(data);
      if (Math.abs(charts[name].width - width) > 4) charts[name].setSize({ width, height: 220 });
      return;
    }
    element.replaceChildren();
    const colors = ["#2f6fed", "#17a673", "#e8a317"];
    const options = {
      width,
      height: 220,
      legend: { show: false },
      cursor: { drag: { x: false, y: false } },
      scales: { x: { time: true }, y: { range: (u, min, max) => [0, Math.max(max, 1) * 1.1] } },
      axes: [{ stroke: "#5b6578" }, { stroke: "#5b6578", size: 60 }],
      series: [{}].concat(
        series.map((label, i) => ({
          label,
          stroke: colors[i],
          width: 2,
          fill: bars ? colors[i] + "cc" : colors[i] + "22",
          paths: bars ? uPlot.paths.bars({ size: [0.7, 40] }) : undefined,
          points: { show: false },
        }))
      ),
    };
    charts[name] = new uPlot(options, data, element);
  }

  const seconds = (iso) => Date.parse(iso) / 1000;

  // -- pages -------------------------------------------------------------------------------------------------------

  async function showHealth(section) {
    const answer = await api("/console/health");
    if (!answer.ok) return problem(section, answer);
    clearProblem(section);
    const health = answer.body;
    showProject(health.project_id, health.project_name);
    $("#accepted-rate").textContent = health.accepted_per_s.toFixed(2);
    $("#processed-rate").textContent = health.processed_per_s.toFixed(2);
    $("#freshness").textContent = duration(health.freshness.average_ms);
    $("#freshness-detail").textContent =
      health.freshness.max_ms === null
        ? "nothing written in the last 5 minutes"
        : `average wait, accepted to queryable (max ${duration(health.freshness.max_ms)})`;
    const backlog = health.backlog.messages;
    $("#backlog").textContent = backlog === null ? "–" : grouped(backlog);
    $("#backlog-detail").textContent =
      backlog === null
        ? "measured by the ingest API (rewards_pipeline_backlog on its /metrics)"
        : "messages not yet written (whole pipeline)";
    $("#dead-letters-24h").textContent = grouped(health.dead_letters.last_24h);
    const minutes = health.minutes;
    const figure = $("#events-figure");
    figure.dataset.accepted = minutes.reduce((sum, m) => sum + m.accepted, 0);
    figure.dataset.processed = minutes.reduce((sum, m) => sum + m.processed, 0);
    chart("events", $("#events-chart"), ["accepted", "processed"], [
      minutes.map((m) => seconds(m.minute)),
      minutes.map((m) => m.accepted),
      minutes.map((m) => m.processed),
    ]);
    fillRows(
      $("#dead-letters"),
      health.dead_letters.latest.map((d) => [
        cell(when(d.failed_at)), cell(d.record_type), cell(d.source_id), cell(d.reason, "wrap"),
      ]),
      "No dead letters: every record was written"
    );
    await showWebhooks();
  }

  // The project's webhook endpoints and each one's newest deliveries (service_role: another key sees the 403's message).
  async function showWebhooks() {
    const endpoints = await api("/webhooks");
    const error = $("#webhooks-error");
    error.hidden = endpoints.ok;
    if (!endpoints.ok) {
      error.textContent = messageOf(endpoints);
      fillRows($("#webhooks"), [], "–");
      fillRows($("#webhook-deliveries"), [], "–");
      return;
    }
    const listed = endpoints.body.results; // the first page (25) holds them all: a project has at most 20
    fillRows(
      $("#webhooks"),
      listed.map((e) => [
        cell(shortText(e.url, 40)), cell(e.events.join(", "), "wrap"), cell(e.enabled ? "yes" : "no"), cell(when(e.created_at)),
      ]),
      "No endpoint: the project's backend polls"
    );
    const pages = await Promise.all(
      listed.map((e) => api(`/webhooks/${encodeURIComponent(e.id)}/deliveries`, { page_size: DELIVERIES_SHOWN }))
    );
    // An endpoint deleted since it was listed (404) has nothing to show; another failure is said.
    const failed = pages.find((a) => !a.ok && a.status !== 404);
    if (failed) {
      error.textContent = messageOf(failed);
      error.hidden = false;
    }
    fillRows(
      $("#webhook-deliveries"),
      listed.flatMap((e, i) =>
        (pages[i].ok ? pages[i].body.results : []).map((d) => [
          cell(when(d.created_at)), cell(shortText(e.url, 24)), cell(d.event_type), cell(d.status),
          cell(d.attempts, "num"), cell(d.last_status_code === null ? "–" : d.last_status_code, "num"),
          cell(d.last_error || "–", "wrap"),
        ])
      ),
      listed.length ? "No delivery yet" : "–"
    );
  }

  async function showPayouts(section) {
    const [summary, points, affiliates, users] = await Promise.all([
      api("/payouts/summary", { currency: "point" }),
      api("/console/points", { hours: 48 }),
      api("/payouts/leaderboard/payouts", { page_size: 10 }),
      api("/payouts/leaderboard/users", { page_size: 10 }),
    ]);
    const failed = [summary, points, affiliates, users].find((a) => !a.ok);
    if (failed) return problem(section, failed);
    clearProblem(section);
    $("#summary-total").textContent = grouped(summary.body.total_payouts);
    $("#summary-total").dataset.value = summary.body.total_payouts;
    const hours = points.body.hours;
    $("#points-figure").dataset.points = JSON.stringify(hours.map((h) => [h.hour, h.points]));
    chart("points", $("#points-chart"), ["points"], [hours.map((h) => seconds(h.hour)), hours.map((h) => Number(h.points))], true);
    for (const [table, board, label] of [
      [$("#leaderboard-payouts"), affiliates.body, "No affiliate has earned points yet"],
      [$("#leaderboard-users"), users.body, "No user has earned points yet"],
    ]) {
      fillRows(
        table,
        board.results.map((r) => [
          cell(r.rank), cell(shortText(r.user_identifier, 10)), cell(grouped(r.total_amount), "num"),
          cell(r.total_attributions, "num"),
        ]),
        label
      );
    }
    await showIntegrity();
  }

  // What the rules refused, the budgets and the blocklist (read-only; a key without service_role sees their 403).
  async function showIntegrity() {
    const [integrity, budgets, blocklist, approvals] = await Promise.all([
      api("/console/integrity", { limit: 10 }),
      api("/projects/budgets"),
      api("/projects/blocklist", { page_size: 25 }),
      api("/payouts/pending-approval", { page_size: 10 }),
    ]);
    const currency = (c) => (c === "point" ? "points" : shortText(c, 10));
    showBudgets(budgets, currency);
    showApprovals(approvals, currency);
    if (integrity.ok) {
      fillRows(
        $("#rejected-totals"),
        integrity.body.rejected.map((r) => [
          cell(r.reason), cell(currency(r.currency)), cell(r.payouts, "num"), cell(grouped(r.amount), "num"),
        ]),
        "No payout refused"
      );
      fillRows(
        $("#rejected-latest"),
        integrity.body.latest_rejected.map((r) => [
          cell(when(r.happened_at)), cell(shortText(r.user_identifier, 10)),
          cell(r.level ? `${r.kind} (level ${r.level})` : r.kind), cell(`${grouped(r.amount)} ${currency(r.currency)}`, "num"),
          cell(r.reason),
        ]),
        "–"
      );
      fillRows(
        $("#reversed-totals"),
        integrity.body.reversed.map((r) => [
          cell(currency(r.currency)), cell(r.movements, "num"), cell(grouped(r.amount), "num"),
        ]),
        "Nothing reversed"
      );
      fillRows(
        $("#reversals-latest"),
        integrity.body.latest_reversals.map((r) => [
          cell(when(r.reversed_at)), cell(shortText(r.dedup_id, 24)), cell(shortText(r.reason, 24)),
          cell(r.fraction, "num"), cell(r.reversed === "1" ? "whole" : r.reversed, "num"),
        ]),
        "–"
      );
    }
    const error = $("#blocklist-error");
    error.hidden = blocklist.ok;
    if (!blocklist.ok) {
      error.textContent = messageOf(blocklist);
      fillRows($("#blocklist"), [], "–");
      return;
    }
    fillRows(
      $("#blocklist"),
      blocklist.body.results.map((b) => [
        cell(`${b.user_identifier_type}:${shortText(b.user_identifier, 10)}`), cell(b.reason || "–"), cell(when(b.created_at)),
      ]),
      "No user blocked"
    );
  }

  // The payouts held for approval, newest first (service_role: another key sees the 403's message).
  function showApprovals(approvals, currency) {
    const error = $("#approvals-error");
    error.hidden = approvals.ok;
    if (!approvals.ok) {
      error.textContent = messageOf(approvals);
      fillRows($("#approvals"), [], "–");
      return;
    }
    fillRows(
      $("#approvals"),
      approvals.body.results.map((p) => [
        cell(when(p.happened_at)), cell(shortText(p.user_identifier, 10)),
        cell(p.level ? `${p.kind} (level ${p.level})` : p.kind), cell(`${grouped(p.amount)} ${currency(p.currency)}`, "num"),
        cell(shortText(p.id, 28)),
      ]),
      "No payout waits for approval"
    );
  }

  function showBudgets(budgets, currency) {
    const error = $("#budgets-error");
    error.hidden = budgets.ok;
    if (!budgets.ok) {
      error.textContent = messageOf(budgets);
      fillRows($("#budgets"), [], "–");
      return;
    }
    fillRows(
      $("#budgets"),
      budgets.body.map((b) => [
        cell(currency(b.currency)), cell(grouped(b.amount), "num"), cell(grouped(b.paid), "num"),
        cell(grouped(b.reserved), "num"), cell(grouped(b.remaining), "num"),
      ]),
      "No budget: the configuration sets none"
    );
  }

  function filterParams() {
    const form = $("#affiliate-filters");
    const params = Object.fromEntries(new FormData(form).entries());
    for (const name of Object.keys(params)) params[name] = params[name].trim();
    return { ...params, page: listing.page };
  }

  async function showAffiliates(section) {
    const params = filterParams();
    const answer = await api("/affiliates", params);
    const error = $("#affiliates-error");
    error.hidden = true;
    if (!answer.ok) {
      if (answer.status === 400) {
        error.textContent = messageOf(answer);
        error.hidden = false;
        return;
      }
      return problem(section, answer);
    }
    clearProblem(section);
    const body = answer.body;
    for (const th of section.querySelectorAll("th[data-sort]")) {
      th.classList.toggle("sorted-desc", th.dataset.sort === params.sort_by && params.sort_order === "desc");
      th.classList.toggle("sorted-asc", th.dataset.sort === params.sort_by && params.sort_order === "asc");
    }
    fillRows(
      $("#affiliates-table"),
      body.results.map((a) => {
        affiliatesSeen.set(a.id, a);
        const status = cell("");
        const badge = document.createElement("span");
        badge.className = `status ${a.status}`;
        badge.textContent = a.status;
        status.append(badge);
        const name = cell(a.name || "(no name)");
        name.dataset.id = a.id;
        return [
          name, cell(shortText(a.user_identifier, 10)), status, cell(a.region || "–"),
          cell(a.tier ? a.tier.name : "–"), cell(a.referred_users, "num"), cell(grouped(a.total_volume), "num"),
          cell(grouped(a.r1_volume), "num"), cell(grouped(a.total_earnings), "num"), cell(when(a.created_at)),
        ];
      }),
      "No affiliate matches"
    );
    const pages = Math.max(body.total_pages, 1);
    $("#affiliates-count").textContent =
      `page ${body.page} of ${pages} · ${body.total_count} affiliate${body.total_count === 1 ? "" : "s"}`;
    $("#affiliates-prev").disabled = body.page <= 1;
    $("#affiliates-next").disabled = body.page >= pages;
  }

  function splitId(id) {
    const at = id.indexOf(":");
    return { type: id.slice(0, at), identifier: id.slice(at + 1) };
  }

  async function listingRow(id, identifier) {
    if (affiliatesSeen.has(id)) return affiliatesSeen.get(id);
    const answer = await api("/affiliates", { query: identifier, per_page: 100 });
    if (!answer.ok) return answer;
    return answer.body.results.find((a) => a.id === id) || null;
  }

  async function showAffiliate(section, id) {
    const { type, identifier } = splitId(id);
    $("#affiliate-id").textContent = id;
    const [info, row, tree, breakdown, config] = await Promise.all([
      api(`/affiliates/${encodeURIComponent(identifier)}`, { identifier_type: type }),
      listingRow(id, identifier),
      api("/affiliate-portal/referral-tree", { user_identifier: identifier }),
      api("/affiliate-portal/stats-breakdown", { user_identifier: identifier, group_by: "day", date_range: "30d" }),
      api("/projects/config"),
    ]);
    for (const answer of [info, tree, breakdown, row]) {
      if (answer && answer.status === 401) return problem(section, answer);
    }
    clearProblem(section);
    if (row && row.status === 403) problem(section, row);
    showVolumeCurrency(config);
    showFigures(row && row.id ? row : null);
    showCodes(info);
    showTree(tree);
    showBreakdown(breakdown);
  }

  // The referral tree's and the breakdown's volumes and revenues are in the project's volume currency (docs/api.md §6);
  // the listing's volumes in points.
  function showVolumeCurrency(config) {
    const currency = config && config.ok && config.body.volume_currency;
    const name = currency ? currency.name || shortText(currency.identifier, 10) : "";
    for (const element of document.querySelectorAll(".volume-currency")) element.textContent = name ? `in ${name}` : "";
  }

  function showFigures(row) {
    $("#affiliate-referred").textContent = row ? row.referred_users : "–";
    $("#affiliate-volume").textContent = row ? grouped(row.total_volume) : "–";
    $("#affiliate-earnings").textContent = row ? grouped(row.total_earnings) : "–";
    $("#affiliate-tier").textContent = row && row.tier ? row.tier.name : "–";
    $("#affiliate-rates").textContent = row ? `r1 ${row.r1} · r2 ${row.r2} · r3 ${row.r3} · r4 ${row.r4}` : "";
  }

  function showCodes(info) {
    const error = $("#affiliate-codes-error");
    error.hidden = info.ok;
    if (!info.ok) {
      error.textContent = messageOf(info);
      fillRows($("#affiliate-codes"), [], "–");
      return;
    }
    $("#affiliate-name").textContent = info.body.name || "(no name)";
    fillRows(
      $("#affiliate-codes"),
      info.body.codes.map((c) => [
        cell(c.code), cell(when(c.created_at)), cell(c.uses, "num"), cell(c.clicks, "num"),
        cell(c.total_users, "num"), cell(grouped(c.total_earnings), "num"),
        cell(c.rebate_rate === null || c.rebate_rate === undefined ? "–" : c.rebate_rate, "num"),
      ]),
      "No codes"
    );
  }

  function notAvailable(element, answer) {
    const note = document.createElement("p");
    note.className = "unavailable";
    note.textContent =
      answer.status === 404 && messageOf(answer) === "Not Found"
        ? "Not available: this server does not answer the affiliate portal (GET /affiliate-portal/...) yet."
        : `Not available: ${messageOf(answer)} (HTTP ${answer.status})`;
    element.replaceChildren(note);
  }

  function treeNode(node) {
    const li = document.createElement("li");
    const box = document.createElement("div");
    box.className = "node";
    const who = document.createElement(node.project_affiliate_id ? "a" : "strong");
    who.textContent = shortText(node.user_identifier, 10);
    if (node.project_affiliate_id) who.href = "#/affiliate/" + encodeURIComponent(node.project_affiliate_id);
    const figures = document.createElement("span");
    figures.textContent =
      `${node.traders} trader${node.traders === 1 ? "" : "s"} · volume ${node.total_volume} · revenue ${node.total_revenue}`;
    box.append(who, figures);
    li.append(box);
    if (node.children && node.children.length) {
      const ul = document.createElement("ul");
      ul.append(...node.children.map(treeNode));
      li.append(ul);
    }
    return li;
  }

  function showTree(tree) {
    const element = $("#referral-tree");
    if (!tree.ok) return notAvailable(element, tree);
    const ul = document.createElement("ul");
    ul.append(treeNode(tree.body));
    element.replaceChildren(ul);
  }

  function showBreakdown(breakdown) {
    const figure = $("#breakdown-figure");
    const table = $("#breakdown");
    const unavailable = $("#breakdown-unavailable");
    figure.hidden = table.hidden = !breakdown.ok;
    unavailable.hidden = breakdown.ok;
    if (!breakdown.ok) return notAvailable(unavailable, breakdown);
    const rows = breakdown.body.results;
    chart("breakdown", $("#breakdown-chart"), ["r1", "r2", "r3"], [
      rows.map((r) => seconds(r.date)),
      rows.map((r) => r.r1_volume),
      rows.map((r) => r.r2_volume),
      rows.map((r) => r.r3_volume),
    ]);
    const active = (r) =>
      [r.r1_volume, r.r2_volume, r.r3_volume, r.revenue, r.attributions, r.referred_users, r.earnings].some(
        (figure) => Number(figure) !== 0
      );
    fillRows(
      table,
      rows.filter(active).reverse().map((r) => [
        cell(r.date.slice(0, 10)), cell(r.r1_volume, "num"), cell(r.r2_volume, "num"), cell(r.r3_volume, "num"),
        cell(r.revenue, "num"), cell(r.attributions, "num"), cell(r.referred_users, "num"),
        cell(`${r.earnings}${r.earnings_currency ? " " + r.earnings_currency : ""}`, "num"),
      ]),
      "Nothing in the last 30 days"
    );
  }

  async function showClaims(section) {
    const answer = await api("/console/claim-checks", { limit: 10 });
    if (!answer.ok) return problem(section, answer);
    clearProblem(section);
    const currency = (c) => `${c.currency_name || "token"} ${shortText(c.currency_address, 6)}`;
    fillRows(
      $("#claim-totals"),
      answer.body.totals.map((t) => [
        cell(currency(t)), cell(t.currency_chain_id), cell(tokenAmount(t.open, t.currency_decimals), "num"),
        cell(tokenAmount(t.closed, t.currency_decimals), "num"),
        cell(tokenAmount(t.claimed, t.currency_decimals), "num"),
        cell(tokenAmount(t.expired, t.currency_decimals), "num"), cell(t.checks, "num"),
      ]),
      "No claim checks: nothing was paid in an on-chain currency"
    );
    fillRows(
      $("#latest-claims"),
      answer.body.latest_claims.map((c) => [
        cell(when(c.claimed_at)), cell(shortText(c.hash, 8)), cell(shortText(c.user_identifier, 8)),
        cell(`${tokenAmount(c.amount, c.currency_decimals)} ${c.currency_name}`, "num"), cell(c.checks, "num"),
      ]),
      "No claims yet"
    );
  }

  const PAGES = {
    health: showHealth,
    payouts: showPayouts,
    affiliates: showAffiliates,
    affiliate: showAffiliate,
    claims: showClaims,
  };

  // -- navigation, sign-in, refresh --------------------------------------------------------------------------------

  function route() {
    const match = /^#\/([a-z]+)(?:\/(.+))?$/.exec(location.hash);
    if (!match || !PAGES[match[1]]) return { name: "health", arg: null };
    if (!match[2]) return { name: match[1], arg: null };
    try {
      return { name: match[1], arg: decodeURIComponent(match[2]) };
    } catch {
      return { name: "health", arg: null }; // a link whose escapes are malformed: the first page, not an error
    }
  }

  function showSection(name) {
    for (const section of document.querySelectorAll(".page")) section.hidden = section.id !== `page-${name}`;
    for (const link of document.querySelectorAll("nav a")) {
      const page = name === "affiliate" ? "affiliates" : name;
      link.classList.toggle("active", link.dataset.page === page);
    }
  }

  // One read of the page at a time; a load asked for meanwhile (another page, other filters) runs right after it.
  async function load() {
    if (!key) return;
    if (loading) {
      reload = true;
      return;
    }
    loading = true;
    const page = current;
    try {
      await PAGES[page.name]($(`#page-${page.name}`), page.arg);
      $("#updated").textContent = "updated " + new Date().toLocaleTimeString();
    } catch (error) {
      if (!(error instanceof SignedOut)) throw error;
    } finally {
      loading = false;
      if (reload) {
        reload = false;
        load();
      }
    }
  }

  function navigate() {
    if (!key) return;
    current = route();
    showSection(current.name);
    load();
  }

  // The project's name in the header, its id in the title (a name need not be unique; the id is).
  function showProject(id, name) {
    const shown = $("#project-name");
    shown.textContent = name || id || "";
    shown.title = id ? "project id " + id : "";
  }

  function signedIn() {
    showProject(sessionStorage.getItem(PROJECT_ITEM), sessionStorage.getItem(PROJECT_NAME_ITEM));
    $("#nav").hidden = false;
    $("#session").hidden = false;
    $("#signin-error").hidden = true;
    $("#signin-error").textContent = "";
    navigate();
  }

  function signOut(message) {
    key = null;
    sessionStorage.removeItem(KEY_ITEM);
    sessionStorage.removeItem(PROJECT_ITEM);
    sessionStorage.removeItem(PROJECT_NAME_ITEM);
    for (const name of Object.keys(charts)) {
      charts[name].destroy();
      delete charts[name];
    }
    affiliatesSeen.clear();
    $("#nav").hidden = true;
    $("#session").hidden = true;
    showSection("signin");
    const error = $("#signin-error");
    error.textContent = message || "";
    error.hidden = !message;
  }

  $("#signin-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const input = $("#key");
    key = input.value.trim();
    input.value = "";
    const answer = await api("/console/health");
    if (answer.status === 401) return signOut(messageOf(answer));
    sessionStorage.setItem(KEY_ITEM, key);
    if (answer.ok) {
      sessionStorage.setItem(PROJECT_ITEM, answer.body.project_id);
      sessionStorage.setItem(PROJECT_NAME_ITEM, answer.body.project_name || "");
    }
    signedIn();
  });

  $("#sign-out").addEventListener("click", () => signOut(""));
  $("#refresh").addEventListener("click", () => load());
  window.addEventListener("hashchange", navigate);

  $("#affiliate-filters").addEventListener("submit", (event) => {
    event.preventDefault();
    listing.page = 1;
    load();
  });
  $("#affiliate-filters").addEventListener("change", (event) => {
    if (event.target.tagName === "SELECT") {
      listing.page = 1;
      load();
    }
  });
  let typing = null;
  $("#affiliate-filters").addEventListener("input", (event) => {
    if (event.target.tagName !== "INPUT") return;
    clearTimeout(typing);
    typing = setTimeout(() => {
      listing.page = 1;
      load();
    }, 350);
  });
  $("#affiliates-table thead").addEventListener("click", (event) => {
    const column = event.target.closest("th[data-sort]");
    if (!column) return;
    const form = $("#affiliate-filters");
    const same = form.sort_by.value === column.dataset.sort;
    form.sort_by.value = column.dataset.sort;
    form.sort_order.value = same && form.sort_order.value === "desc" ? "asc" : "desc";
    listing.page = 1;
    load();
  });
  $("#affiliates-table tbody").addEventListener("click", (event) => {
    const row = event.target.closest("tr");
    const name = row && row.querySelector("td[data-id]");
    if (name) location.hash = "#/affiliate/" + encodeURIComponent(name.dataset.id);
  });
  $("#affiliates-prev").addEventListener("click", () => {
    listing.page = Math.max(1, listing.page - 1);
    load();
  });
  $("#affiliates-next").addEventListener("click", () => {
    listing.page += 1;
    load();
  });
  window.addEventListener("resize", () => {
    for (const name of Object.keys(charts)) {
      const element = charts[name].root.parentElement;
      if (element && element.clientWidth) charts[name].setSize({ width: element.clientWidth, height: 220 });
    }
  });

  setInterval(() => {
    if (key && current && AUTO_REFRESHED.has(current.name) && !document.hidden) load();
  }, REFRESH_MS);

  if (key) signedIn();
  else signOut("");
})();
