"""Issue 18: the operator console, `GET /console`, in a real headless browser (Debian's Chromium, driven by playwright,
as tests/web/test_docs_page.py does), on both shapes: the production shape through one base URL routed as its gateway
routes (tests.support.harness.Gateway). Each test signs in with a key and reads what a person would see; every
request the page makes is watched, and any to another host is refused and fails the test (the console needs no
network beyond the server). One browser for the module, a fresh tab (and session storage) per test.

`python -m tests.support.console_screenshots` writes docs/console.md's screenshots (docs/console-*.png) from the same
pages."""

import shutil
from decimal import Decimal
from urllib.parse import parse_qsl, quote, urlsplit

import httpx
import orjson
import pytest

from query_api.console import service
from rewards.domain.timestamps import format_timestamp, now_ms
from tests.ingest_api.test_claim_checks import SIGNING, USDC
from tests.ingest_api.test_webhooks import held, on_state
from tests.support.harness import Admin, Api, eventually, run_async
from tests.support.real_engines import missing
from tests.web.test_docs_page import CHROMIUM
from tests.web.test_hostile_input import OVERFLOWING

EVM = "evm_address"
SHOWN_WITHIN_S = 15  # the freshness bound (well under a second) plus the page's 2 s refresh, with room for 2 cores
CONFIG = {
    "default_tier": "base",
    "tiers": [
        {"id": "base", "name": "Base", "rank": 1, "rates": {"r1": "0.1", "r2": "0.05", "r3": "0.02", "r4": "0.01"}},
        {"id": "gold", "name": "Gold", "rank": 2, "rates": {"r1": "0.2", "r2": "0.1", "r3": "0.05", "r4": "0.02"}},
    ],
    "conversions": [
        {"event_name": "purchase", "base": {"rate_of": "value", "rate": "1"}, "currency": "point",
         "end_user_reward": {"fixed": "10"}},
        {"event_name": "swap", "base": {"rate_of": "revenue", "rate": "0.3"}, "currency": USDC,
         "end_user_reward": {"rate": "0.5"}},
        # A mint of OVERFLOWING pays past the payout limit: the workers set it aside (a dead letter).
        {"event_name": "mint", "base": {"rate_of": "value", "rate": OVERFLOWING}, "currency": "point"},
    ],
    "referral_reward": {"referrer": "50", "referred": "10"},
    **SIGNING,
}  # fmt: skip


def addr(n: int) -> str:
    return f"0x{n:040x}"


def who(n: int) -> dict:
    return {"user_identifier": addr(n), "user_identifier_type": EVM}


def purchase(dedup_id: str, buyer: int, value: str) -> dict:
    return {**who(buyer), "name": "purchase", "dedup_id": dedup_id,
            "args": {"value": {"amount": value, "currency": {"name": "USD"}}}}  # fmt: skip


def swap(dedup_id: str, trader: int, revenue: str) -> dict:
    return {**who(trader), "name": "swap", "dedup_id": dedup_id,
            "args": {"revenue": {"amount": revenue, "currency": {"name": "USD"}}}}  # fmt: skip


class Shop:
    """A fresh project on a shape's server, configured, with its keys and a plain HTTP client of its service key."""

    NAME = "Corner shop"

    def __init__(self, server, base_url: str):
        admin = Admin(server)
        self.server, self.base_url = server, base_url
        self.project_id = admin.project(self.NAME)
        self.service_key = admin.key(self.project_id, "service_role")
        self.standard_key = admin.key(self.project_id)
        self.http = Api(server, self.service_key, self.project_id)
        assert self.http.put("/projects/config", json=CONFIG).status_code == 200

    def ok(self, method: str, path: str, **kwargs) -> dict | list:
        response = self.http.request(method, path, **kwargs)
        assert response.status_code in (200, 201), response.text
        return response.json()

    def refer(self, referrer: int, *referred: int) -> str:
        code = self.ok("POST", "/referral_codes", json={**who(referrer), "quantity": 1})[0]["code"]
        for user in referred:
            self.ok("PATCH", f"/referral_codes/{code}/use", json=who(user))
        return code

    def send(self, *events: dict) -> None:
        self.ok("POST", "/events/batch", json={"events": list(events)})
        self.http.wait_processed(*(e["dedup_id"] for e in events), timeout_s=30)

    def register(self, n: int, name: str, **attributes) -> None:
        self.ok("POST", "/affiliates", json={**who(n), "name": name, **attributes})


class Console:
    """One browser tab on the console. Every request it makes is recorded; one to another host is refused."""

    def __init__(self, browser, base_url: str, width: int = 1280):
        self.base_url = base_url
        self.context = browser.new_context(viewport={"width": width, "height": 900})
        self.page = self.context.new_page()
        self.requested: list[str] = []
        self.elsewhere: list[str] = []
        self.page.route("**/*", self._only_the_server)
        self.page.goto(f"{base_url}/console")

    def _only_the_server(self, route):
        url = route.request.url
        self.requested.append(url)
        if urlsplit(url).netloc == urlsplit(self.base_url).netloc:
            return route.continue_()
        self.elsewhere.append(url)
        return route.abort()

    def sign_in(self, key: str) -> None:
        self.page.fill("#key", key)
        self.page.click("#signin-form button[type=submit]")

    def show(self, page: str, arg: str = "") -> None:
        hash = f"#/{page}/{quote(arg, safe='')}" if arg else f"#/{page}"
        self.page.evaluate("hash => { location.hash = hash }", hash)
        self.page.wait_for_selector(f"#page-{page}:not([hidden])")

    def text(self, selector: str) -> str:
        return self.page.inner_text(selector).strip()

    def shown(self, selector: str, expected: str, timeout_s: float = SHOWN_WITHIN_S) -> None:
        def check():
            assert self.page.is_visible(selector) and self.text(selector) == expected

        eventually(check, timeout_s)

    def column(self, table: str, index: int) -> list[str]:
        return [t.strip() for t in self.page.locator(f"{table} tbody tr td:nth-child({index})").all_inner_texts()]

    def close(self) -> None:
        self.context.close()


@pytest.fixture(scope="module")
def browser():
    """One Chromium for the module, launched as tests/web/test_docs_page.py launches it."""
    sync_api = pytest.importorskip("playwright.sync_api")
    if not shutil.which("chromium"):
        missing("no chromium: install Debian's chromium package (apt-get install chromium)")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield browser
        browser.close()


@pytest.fixture
def shop(client_base) -> Shop:
    shop = Shop(*client_base)
    yield shop
    shop.http.close()


@pytest.fixture
def console(browser, client_base):
    console = Console(browser, client_base[1])
    yield console
    console.close()
    assert console.elsewhere == []  # nothing asked of any other host


def test_sign_in_then_a_batch_shows_in_the_summary_and_the_chart(console, shop):
    shop.refer(1, 2)  # the code use pays 60 points now: referrer 50, referred 10
    console.sign_in(shop.service_key)
    console.page.wait_for_selector("#nav:not([hidden])")
    console.shown("#project-name", Shop.NAME)  # the project's name in the header, its id in the title
    assert console.page.get_attribute("#project-name", "title") == f"project id {shop.project_id}"
    answer = shop.ok("GET", "/console/health")
    assert (answer["project_id"], answer["project_name"]) == (shop.project_id, Shop.NAME)
    console.show("payouts")
    console.shown("#summary-total", "60")

    shop.send(*(purchase(f"order-{n}", 2, value) for n, value in enumerate(["12000", "0.5", "0"])))
    total = shop.ok("GET", "/payouts/summary", params={"currency": "point"})["total_payouts"]
    assert total == "1290.05"  # 60, then 3 × 10 to the buyer and 10% of the bases (12,000.5) to its referrer
    console.shown("#summary-total", "1,290.05")  # the page's next refresh, within the freshness bound

    def charted():  # every payout happened within the chart's 48 hours: its bars sum to the summary
        hours = orjson.loads(console.page.get_attribute("#points-figure", "data-points"))
        assert len(hours) == 48 and sum(Decimal(points) for _, points in hours) == Decimal(total)

    eventually(charted, SHOWN_WITHIN_S)
    assert console.page.locator("#points-chart canvas").count() > 0  # drawn by the vendored uPlot
    board = console.column("#leaderboard-payouts", 2)
    assert board == [addr(1)[:10] + "…" + addr(1)[-10:]]  # the referrer, the one affiliate earning points

    console.show("health")

    def counted():
        assert int(console.page.get_attribute("#events-figure", "data-processed")) == 3
        assert console.text("#processed-rate") != "0.00" and console.text("#accepted-rate") != "0.00"

    eventually(counted, SHOWN_WITHIN_S)
    assert console.text("#dead-letters-24h") == "0"
    assert console.page.evaluate("() => sessionStorage.getItem('rewards-console-key')") == shop.service_key
    assert not any(shop.service_key in url for url in console.requested) and shop.service_key not in console.page.url


def test_refused_payouts_and_the_blocklist_show_on_the_payouts_page(console, shop):
    """API.md §8 in the console: a blocked referrer's commission is refused, shown with its reason; the blocklist is
    listed read-only (its writes are the API's)."""
    shop.refer(1, 2)
    points = {"currency": "point"}
    eventually(lambda: _equal(shop.ok("GET", "/payouts/summary", params=points), {"total_payouts": "60"}))
    shop.ok("PUT", f"/projects/blocklist/{addr(1)}", params={"identifier_type": EVM}, json={"reason": "chargebacks"})
    shop.send(purchase("refused-1", 2, "200"))  # the buyer's 10 paid; its referrer's 20 refused
    console.sign_in(shop.service_key)
    console.show("payouts")
    console.shown("#rejected-totals tbody tr", "blocklisted\tpoints\t1\t20")
    assert console.column("#rejected-latest", 5) == ["blocklisted"]
    assert console.column("#rejected-latest", 3) == ["affiliate_commission (level 1)"]
    assert console.column("#blocklist", 2) == ["chargebacks"]
    assert console.column("#blocklist", 1) == [f"evm_address:{addr(1)[:10]}…{addr(1)[-10:]}"]


def test_a_dead_letter_shows_on_the_health_page(console, shop):
    mint = {**purchase("mint-1", 2, OVERFLOWING), "name": "mint"}
    shop.ok("POST", "/events/batch", json={"events": [mint, purchase("after", 2, "1")]})
    shop.http.wait_processed("after", timeout_s=30)
    console.sign_in(shop.service_key)  # the first page: the pipeline's health
    console.shown("#dead-letters-24h", "1")
    assert console.column("#dead-letters", 2) == ["conversion"] and console.column("#dead-letters", 3) == ["mint-1"]
    assert "payout limit" in console.column("#dead-letters", 4)[0]


def test_a_link_with_malformed_escapes_opens_the_first_page_without_an_error(console, shop):
    errors: list[str] = []
    console.page.on("pageerror", lambda error: errors.append(str(error)))
    console.sign_in(shop.service_key)
    console.page.wait_for_selector("#nav:not([hidden])")
    console.page.evaluate("() => { location.hash = '#/affiliate/%E0%A4%A' }")
    console.page.wait_for_selector("#page-health:not([hidden])")
    console.show("affiliates")
    assert errors == []


def test_a_wrong_key_shows_the_contracts_401_message_and_a_revoked_one_signs_out(console, shop):
    console.sign_in("rk_nope_notakey")
    console.shown("#signin-error", "Unknown or revoked API key")
    assert console.page.is_hidden("#nav")
    assert console.page.evaluate("() => sessionStorage.getItem('rewards-console-key')") is None

    key = Admin(shop.server).key(shop.project_id)
    console.sign_in(key)
    console.page.wait_for_selector("#nav:not([hidden])")
    Admin(shop.server).revoke(key)
    console.shown("#signin-error", "Unknown or revoked API key")  # at the page's next refresh
    assert console.page.is_visible("#page-signin") and console.page.is_hidden("#page-health")


def test_filter_and_sort_the_affiliates_then_open_one(console, shop):
    shop.register(1, "Alice", region="EU", status="active", tier="gold")
    shop.register(3, "Bob", region="US", status="suspended")
    shop.register(5, "Carol", region="EU", status="pending")
    shop.refer(1, 11)
    shop.refer(5, 12)
    shop.send(purchase("a-1", 11, "300"), purchase("c-1", 12, "100"))
    eventually(lambda: _equal(_volumes(shop), {"Alice": "300", "Bob": "0", "Carol": "100"}), SHOWN_WITHIN_S)

    console.sign_in(shop.service_key)
    console.show("affiliates")

    def names() -> list[str]:
        return console.column("#affiliates-table", 1)

    eventually(lambda: _equal(names(), ["Alice", "Carol", "Bob"]))  # by total volume, highest first
    assert console.text("#affiliates-count") == "page 1 of 1 · 3 affiliates"

    console.page.fill("#affiliate-filters [name=regions]", "EU")
    eventually(lambda: _equal(names(), ["Alice", "Carol"]))
    console.page.select_option("#affiliate-filters [name=statuses]", "pending")
    eventually(lambda: _equal(names(), ["Carol"]))
    console.page.select_option("#affiliate-filters [name=statuses]", "")
    console.page.fill("#affiliate-filters [name=regions]", "")
    # A case-insensitive part of a name; the search matches codes too, which are random: the page shows what the
    # listing answers (Bob, and rarely an affiliate whose code holds BOB)
    console.page.fill("#affiliate-filters [name=query]", "bOb")
    found = [a["name"] for a in shop.ok("GET", "/affiliates", params={"query": "bOb"})["results"]]
    assert "Bob" in found
    eventually(lambda: _equal(names(), found))
    console.page.fill("#affiliate-filters [name=query]", "")
    eventually(lambda: _equal(names(), ["Alice", "Carol", "Bob"]))

    console.page.click("#affiliates-table th[data-sort=name]")  # a new column: descending first
    eventually(lambda: _equal(names(), ["Carol", "Bob", "Alice"]))
    console.page.click("#affiliates-table th[data-sort=name]")  # again: ascending
    eventually(lambda: _equal(names(), ["Alice", "Bob", "Carol"]))
    assert console.page.get_attribute("#affiliates-table th[data-sort=name]", "class") == "sorted-asc"
    console.page.fill("#affiliate-filters [name=tiers]", "platinum")  # no such tier: the API's 400, said
    console.shown("#affiliates-error", "tiers must be tier ids of the project configuration (unknown: platinum)")
    console.page.fill("#affiliate-filters [name=tiers]", "")

    console.page.click("#affiliates-table tbody td:text-is('Alice')")
    console.page.wait_for_selector("#page-affiliate:not([hidden])")
    console.shown("#affiliate-name", "Alice")
    assert console.text("#affiliate-id") == f"{EVM}:{addr(1)}"
    assert (console.text("#affiliate-volume"), console.text("#affiliate-tier")) == ("300", "Gold")
    eventually(lambda: _equal(len(console.column("#affiliate-codes", 1)), 1))
    console.page.wait_for_selector("#referral-tree .node")  # the affiliate portal's tree and breakdown (API.md §7)
    assert console.page.locator("#referral-tree .node").count() == 2  # Alice and the user she referred
    console.page.wait_for_selector("#breakdown tbody td:not(.empty)")
    assert console.column("#breakdown", 2) == ["300"]  # today, the one day with figures: the referred purchase


def test_the_affiliate_page_draws_the_portals_tree_and_breakdown_as_declared(console, shop):
    """The affiliate portal's answers (docs/fuul-sdk-7.41.0-surface.md G7: ReferralTreeNodeResponse and
    GetAffiliateStatsBreakdownResponse), given to the page as declared: whether or not this server serves them yet."""
    shop.register(1, "Alice")
    leaf = {
        "user_identifier": addr(21),
        "project_affiliate_id": None,
        "traders": 1,
        "total_volume": 40,
        "total_revenue": 4,
        "children": [],
    }
    child = {**leaf, "user_identifier": addr(11), "project_affiliate_id": f"{EVM}:{addr(11)}", "children": [leaf]}
    tree = {**child, "user_identifier": addr(1), "project_affiliate_id": f"{EVM}:{addr(1)}", "children": [child]}
    day = {
        "date": "2026-11-21",
        "r1_volume": 100,
        "r2_volume": 40,
        "r3_volume": 0,
        "revenue": 12,
        "attributions": 3,
        "referred_users": 1,
        "earnings": 12.5,
        "earnings_currency": "point",
    }
    quiet = {**day, "date": "2026-11-20", **dict.fromkeys(("r1_volume", "r2_volume", "revenue", "attributions"), 0)}
    quiet.update(referred_users=0, earnings=0)
    breakdown = [quiet, day, {**day, "date": "2026-11-22"}]
    answers = {"referral-tree": tree, "stats-breakdown": {"results": breakdown}}
    asked: list[str] = []

    def portal(route):
        asked.append(route.request.url)
        name = urlsplit(route.request.url).path.rsplit("/", 1)[1]
        route.fulfill(status=200, content_type="application/json", body=orjson.dumps(answers[name]))

    console.page.route("**/api/v1/affiliate-portal/**", portal)
    console.sign_in(shop.service_key)
    console.show("affiliate", f"{EVM}:{addr(1)}")
    console.page.wait_for_selector("#breakdown tbody td:not(.empty)")
    assert console.page.locator("#referral-tree .node").count() == 3
    assert console.page.locator("#referral-tree a").count() == 2  # the nodes that are affiliates link to their page
    assert console.column("#breakdown", 1) == ["2026-11-22", "2026-11-21"]  # days with figures, newest first
    assert console.column("#breakdown", 8) == ["12.5 point", "12.5 point"]
    assert console.page.locator("#breakdown-chart canvas").count() > 0
    params = [dict(parse_qsl(urlsplit(url).query)) for url in asked]
    assert {"user_identifier": addr(1)} in params  # as the published client sends it: no identifier type
    assert {"user_identifier": addr(1), "group_by": "day", "date_range": "30d"} in params


def test_a_standard_key_reads_what_it_may_and_is_told_which_scope_the_rest_needs(console, shop):
    console.sign_in(shop.standard_key)
    console.show("payouts")
    console.shown("#summary-total", "0")
    console.show("affiliates")
    console.shown(
        "#page-affiliates .scope",
        "This part needs a key with the service_role scope. "
        "The API answered: “This operation requires the service_role scope”",
    )
    assert console.column("#affiliates-table", 1) == []


def test_claim_checks_per_currency_and_the_latest_claims(console, shop):
    shop.refer(1, 2)
    shop.send(swap("s-1", 2, "100"))  # a base of 30 USDC: the trader 15, its referrer 3 (r1 10%)
    mine = shop.ok("GET", "/claim-checks/rewards-payouts", params=who(1))["results"]
    shop.ok("POST", "/claim-checks/close", json={**who(1), "claim_check_ids": [mine[0]["id"]]})
    claim = {"hash": "0x" + "ab" * 32, "claimed_at": "2026-11-22T12:00:00Z", "claim_check_ids": [mine[0]["id"]]}
    eventually(lambda: _equal(shop.http.post("/claim-checks/claims", json=claim).status_code, 200), SHOWN_WITHIN_S)

    console.sign_in(shop.standard_key)  # the project's totals as a whole, as /payouts/summary: any key
    console.show("claims")
    eventually(lambda: _equal(console.column("#claim-totals", 5), ["3"]), SHOWN_WITHIN_S)
    assert console.column("#claim-totals", 3) == ["15"] and console.column("#claim-totals", 4) == ["0"]
    assert console.column("#claim-totals", 6) == ["0"]  # expired
    assert console.column("#claim-totals", 1) == ["USDC 0xa0b8…06eb48"]
    assert console.column("#latest-claims", 1) == ["2026-11-22 12:00:00 UTC"]
    assert console.column("#latest-claims", 4) == ["3 USDC"]

    other = Shop(shop.server, shop.base_url)  # another project sees none of it
    answer = other.http.get("/console/claim-checks").json()
    assert answer == {"totals": [], "latest_claims": []}
    other.http.close()


def test_every_page_fits_a_phone_390_px_wide(browser, shop):
    """No page is wider than the phone (tables scroll inside their own box), and the header stays one block."""
    shop.register(1, "Alice " + "Longname" * 8)
    shop.refer(1, 2)
    shop.send(purchase("order-1", 2, "100"))
    phone = Console(browser, shop.base_url, width=390)
    try:
        phone.sign_in(shop.service_key)
        for page in ("health", "payouts", "affiliates", "claims"):
            phone.show(page)
            phone.page.wait_for_timeout(200)
            assert phone.page.evaluate("document.documentElement.scrollWidth") <= 390, page
        phone.show("affiliate", f"{EVM}:{addr(1)}")
        phone.page.wait_for_selector("#referral-tree > *")
        assert phone.page.evaluate("document.documentElement.scrollWidth") <= 390, "affiliate"
        header = phone.page.locator("header.top").bounding_box()
        assert header["x"] == 0 and header["width"] == 390
    finally:
        phone.close()
    assert phone.elsewhere == []


def test_the_page_and_its_files_come_from_the_server_alone(client_base):
    url = client_base[1]
    page = httpx.get(f"{url}/console")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    policy = page.headers["content-security-policy"]
    assert "default-src 'none'" in policy and "script-src 'self'" in policy and "connect-src 'self'" in policy
    assert "http" not in page.text.split("<body")[0].replace("http-equiv", "")  # no address of another host
    for name in ("console.js", "uPlot.iife.min.js", "uPlot.min.css", "console.css"):
        assert httpx.get(f"{url}/console/static/{name}").status_code == 200
    for name in ("console.html", "VENDORED.md", "..%2Frouter.py", "%2e%2e/router.py"):
        assert httpx.get(f"{url}/console/static/{name}").status_code == 404


def test_rates_and_freshness_come_from_the_last_five_minutes():
    minute = 60_000
    now = 1_000 * minute + 30_000  # half a minute into a minute
    minutes = [
        service.Minute((1_000 - 5) * minute, 600, 600, 600_000, 9_000, 2),  # before the window: in the chart only
        service.Minute((1_000 - 4) * minute, 30, 20, 2_000, 400, 0),
        service.Minute(1_000 * minute, 40, 50, 3_000, 250, 1),
    ]
    health = service.health(minutes, now)
    assert health["window_s"] == 270  # four whole minutes and this one's first half
    assert (health["accepted_per_s"], health["processed_per_s"]) == (round(70 / 270, 3), round(70 / 270, 3))
    assert health["freshness"] == {"average_ms": 71, "max_ms": 400, "last_written_minute": "1970-01-01T16:40:00.000Z"}
    assert health["dead_letters"] == {"last_24h": 3}
    assert len(health["minutes"]) == 60 and health["minutes"][-1] == {
        "minute": "1970-01-01T16:40:00.000Z", "accepted": 40, "processed": 50}  # fmt: skip
    assert health["minutes"][-6]["processed"] == 600 and health["minutes"][0]["processed"] == 0


def _volumes(shop: Shop) -> dict[str, str]:
    listing = shop.ok("GET", "/affiliates", params={"per_page": 10})
    return {a["name"]: a["total_volume"] for a in listing["results"]}


def _equal(found, expected) -> None:
    assert found == expected, found


def test_budgets_show_what_remains_on_the_payouts_page(console, shop):
    """API.md §8 in the console: each budget with what it paid and what remains; a payout it cut among the refused."""
    budgeted = {**CONFIG, "budgets": [{"currency": "point", "amount": "25"}]}
    assert shop.http.put("/projects/config", json=budgeted).status_code == 200
    shop.send(purchase("budget-1", 2, "100"), purchase("budget-2", 3, "100"))  # 10 each, 5 left
    shop.send(purchase("budget-3", 4, "100"))  # 10 asked: cut to 5
    console.sign_in(shop.service_key)
    console.show("payouts")
    console.shown("#budgets tbody tr", "points\t25\t25\t0\t0")
    console.shown("#rejected-totals tbody tr", "budget_exhausted\tpoints\t1\t5")


def test_pending_approvals_and_reversals_show_on_the_payouts_page(console, shop):
    """API.md §9 in the console: a payout held for approval, with who would earn what; what a reversal took back."""
    held = {**CONFIG, "approval": {"currencies": ["point"], "above": "5"}}
    assert shop.http.put("/projects/config", json=held).status_code == 200
    shop.send(purchase("held-1", 5, "100"))  # its end-user reward of 10 is held
    assert shop.http.put("/projects/config", json=CONFIG).status_code == 200
    shop.send(purchase("refund-1", 6, "100"))
    reversal = {"reversals": [{"dedup_id": "refund-1", "reason": "refund"}]}
    assert shop.http.post("/events/reversals", json=reversal).json() == {"reversed": 1}
    eventually(lambda: _equal(shop.ok("GET", "/events/status", params={"dedup_id": "refund-1"})["status"], "reversed"))
    console.sign_in(shop.service_key)
    console.show("payouts")
    eventually(lambda: _equal(console.column("#approvals", 4), ["10 points"]))
    assert console.column("#approvals", 3) == ["end_user_reward"]
    eventually(lambda: _equal(console.column("#reversals-latest", 2), ["refund-1"]))
    assert console.column("#reversals-latest", 5) == ["whole"]


def test_webhook_endpoints_show_on_the_pipeline_page(console, shop):
    """API.md §10 in the console: the project's endpoints, read-only."""
    endpoint = {"url": "https://93.184.216.34/rewards", "events": ["reward.earned", "claim_check.closed"]}
    assert shop.http.post("/webhooks", json=endpoint).status_code == 201
    console.sign_in(shop.service_key)
    console.show("health")
    eventually(lambda: _equal(console.column("#webhooks", 1), ["https://93.184.216.34/rewards"]))
    assert console.column("#webhooks", 2) == ["reward.earned, claim_check.closed"]
    assert console.column("#webhooks", 3) == ["yes"]


def test_webhook_deliveries_show_on_the_pipeline_page(console, shop):
    """API.md §10 in the console: each endpoint's newest deliveries (10 of them), read-only."""
    made = shop.ok("POST", "/webhooks", json={"url": "https://93.184.216.34/rewards", "events": ["reward.earned"]})
    console.sign_in(shop.service_key)
    console.show("health")
    eventually(lambda: _equal(console.column("#webhook-deliveries", 1), ["No delivery yet"]))
    now = now_ms()
    deliveries = [held(shop.http, made["id"], f"payout-{n}", now - (12 - n) * 60_000) for n in range(12)]
    assert run_async(on_state(shop.server, lambda state: state.enqueue(deliveries))) == 12
    newest = [format_timestamp(d.created_ms).replace("T", " ")[:-5] + " UTC" for d in reversed(deliveries[2:])]
    eventually(lambda: _equal(console.column("#webhook-deliveries", 1), newest), SHOWN_WITHIN_S)
    assert console.column("#webhook-deliveries", 2) == ["https://93.184.216.34/rewards"] * 10
    assert console.column("#webhook-deliveries", 3) == ["reward.earned"] * 10
    assert console.column("#webhook-deliveries", 4) == ["pending"] * 10
    assert console.column("#webhook-deliveries", 5) == ["3"] * 10
    assert console.column("#webhook-deliveries", 6) == ["503"] * 10
    assert console.column("#webhook-deliveries", 7) == ["answered 503"] * 10
