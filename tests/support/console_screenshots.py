"""The operator console's screenshots in docs/console.md: `python -m tests.support.console_screenshots [OUT_DIR]`
(default docs/).

Starts `rewards serve` on a fresh data directory, makes a demo project through the API (affiliates three levels
deep, purchases spread over two days, token swaps whose claim checks are closed and claimed, one dead letter),
then photographs each page of the console in Debian's Chromium, as tests/query_api/test_console.py drives it:
console-signin.png, console-health.png, console-payouts.png, console-affiliates.png, console-affiliate.png and
console-claims.png, each also 390 px wide (a phone: console-*-390.png); the front page (landing.png, landing-390.png)
and /docs with the summary tried out (docs-try-it-out.png). The project ends with a blocklisted referrer, budgets in
points and USDC, a monthly end-user cap that cut a purchase's reward, a refund of half an order, and a reward held for
approval; its backend's webhook endpoint takes every reward, and a second one answers 503 (retried).
"""

import http.server
import shutil
import sys
import tempfile
import threading
from pathlib import Path

from playwright.sync_api import sync_playwright

from rewards.domain.timestamps import format_timestamp, now_ms
from tests.ingest_api.test_claim_checks import USDC
from tests.query_api.test_console import CHROMIUM, CONFIG, OVERFLOWING, Console, Shop, purchase, swap, who
from tests.support import swagger
from tests.support.harness import Server, eventually

DOCS = Path(__file__).resolve().parents[2] / "docs"
HOUR_MS = 3_600_000
AFFILIATES = [  # user, name, region, status, tier
    (1, "Alice Martin", "EU", "active", "gold"),
    (3, "Bob Chen", "US", "suspended", None),
    (5, "Carol Diaz", "LATAM", "pending", None),
    (7, "Dmitri Ivanov", "EU", "active", None),
    (9, "Emi Sato", "JP", "active", "gold"),
]
REFERRALS = {1: [11, 12, 13], 11: [21, 22], 21: [31], 5: [14], 7: [15, 16], 9: [17]}
BUYERS = [11, 12, 13, 14, 15, 16, 17, 21, 22, 31]
CLAIM_HASH = "0x5e1f" + "a7" * 30


# Each referred user's referrer.
REFERRALS_OF = {user: referrer for referrer, users in REFERRALS.items() for user in users}


class _Backend(http.server.BaseHTTPRequestHandler):
    """The demo project's backend: /rewards takes every message, /crm is down (503)."""

    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(200 if self.path == "/rewards" else 503)
        self.end_headers()

    def log_message(self, *args):
        pass


def subscribe(shop: Shop, backend: str) -> None:
    """Webhook endpoints (API.md §10): the pipeline page lists them and their latest deliveries."""
    for path, events in (("/rewards", ["reward.earned", "reward.reversed"]), ("/crm", ["affiliate.registered"])):
        shop.ok("POST", "/webhooks", json={"url": f"{backend}{path}", "events": events, "description": path[1:]})


def seed(shop: Shop) -> None:
    for user, name, region, status, tier in AFFILIATES:
        shop.register(user, name, region=region, status=status, **({"tier": tier} if tier else {}))
    for referrer, referred in REFERRALS.items():
        shop.refer(referrer, *referred)
    now = now_ms()
    events = [
        {
            **purchase(f"order-{i}", buyer, str(40 + (i * 37) % 260)),
            "timestamp": format_timestamp(now - hours * HOUR_MS),
        }
        for i, (buyer, hours) in enumerate((BUYERS[i % len(BUYERS)], (i * 7) % 46) for i in range(60))
    ]
    events += [swap(f"swap-{user}", user, revenue) for user, revenue in ((11, "250"), (14, "120"), (21, "90"))]
    events.append({**purchase("mint-1", 12, OVERFLOWING), "name": "mint"})  # past the payout limit: a dead letter
    shop.send(*events[:-1])
    shop.ok("POST", "/events/batch", json={"events": events[-1:]})
    alice = [c["id"] for c in shop.ok("GET", "/claim-checks/rewards-payouts", params=who(1))["results"]]
    shop.ok("POST", "/claim-checks/close", json={**who(1), "claim_check_ids": alice})
    claim = {"hash": CLAIM_HASH, "claim_check_ids": alice}
    eventually(lambda: _ok(shop.http.post("/claim-checks/claims", json=claim).status_code), 30)
    trader = [c["id"] for c in shop.ok("GET", "/claim-checks/rewards-payouts", params=who(21))["results"]]
    shop.ok("POST", "/claim-checks/close", json={**who(21), "claim_check_ids": trader})
    # A referrer blocked (API.md §8): its commission on the next purchase below it is refused, with its reason.
    blocked = REFERRALS_OF[BUYERS[-1]]
    shop.ok("PUT", f"/projects/blocklist/{who(blocked)['user_identifier']}", params={"identifier_type": "evm_address"},
            json={"reason": "chargebacks on three orders"})  # fmt: skip
    shop.send(purchase("order-after-block", BUYERS[-1], "120"))
    # Budgets and a cap (API.md §8): the payouts page shows what each budget has left, and the cap's cut.
    limits = {
        "budgets": [{"currency": "point", "amount": "25000"}, {"currency": USDC["address"], "amount": "500000000"}],
        "caps": [{"applies_to": "end_user", "currency": "point", "amount": "4", "window": "calendar_month"}],
    }
    shop.ok("PUT", "/projects/config", json={**CONFIG, **limits})
    shop.send(purchase("order-after-cap", BUYERS[2], "80"))
    # A refund and a payout held for approval (API.md §9): the payouts page shows what the refund took back, and the
    # reward that waits for an operator's decision.
    shop.ok("POST", "/events/reversals", json={"reversals": [{"dedup_id": "order-after-block", "reason": "refund",
                                                               "fraction": "0.5"}]})  # fmt: skip
    held = {"approval": {"currencies": ["point"], "above": "2"}}
    shop.ok("PUT", "/projects/config", json={**CONFIG, **limits, **held})
    shop.send(purchase("order-held", BUYERS[3], "200"))


def _ok(status: int) -> None:
    assert status == 200, status


def photograph(console: Console, shop: Shop, out_dir: Path, suffix: str = "") -> list[Path]:
    page = console.page
    shots = []

    def shoot(name: str) -> None:
        page.wait_for_timeout(300)  # the charts' last frame
        shots.append(out_dir / f"console-{name}{suffix}.png")
        page.screenshot(path=str(shots[-1]), full_page=True)

    shoot("signin")
    console.sign_in(shop.service_key)
    eventually(lambda: _ok(200 if console.text("#dead-letters-24h") == "1" else 0), 30)
    shoot("health")
    console.show("payouts")
    page.wait_for_selector("#leaderboard-users tbody tr:nth-child(5)")
    shoot("payouts")
    console.show("affiliates")
    page.wait_for_selector("#affiliates-table tbody tr:nth-child(5)")
    shoot("affiliates")
    page.click("#affiliates-table tbody td:text-is('Alice Martin')")
    page.wait_for_selector("#affiliate-codes tbody td:not(.empty)")
    page.wait_for_selector("#referral-tree > *")
    shoot("affiliate")
    console.show("claims")
    page.wait_for_selector("#latest-claims tbody td:not(.empty)")
    shoot("claims")
    assert console.elsewhere == [], console.elsewhere
    return shots


def photograph_front_and_docs(browser, base_url: str, shop: Shop, out_dir: Path) -> list[Path]:
    """The front page (`/`) at both widths, and /docs with the summary's operation tried out: its real answer below
    the documented example."""
    shots = []
    for width, suffix in ((1280, ""), (390, "-390")):
        context = browser.new_context(viewport={"width": width, "height": 800})
        page = context.new_page()
        page.goto(f"{base_url}/")
        shots.append(out_dir / f"landing{suffix}.png")
        page.screenshot(path=str(shots[-1]), full_page=True)
        context.close()
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    swagger.sign_in(page, base_url, shop.service_key)
    operation = swagger.try_out(page)
    swagger.execute(operation)
    shots.append(out_dir / "docs-try-it-out.png")
    operation.screenshot(path=str(shots[-1]))
    context.close()
    return shots


def main(out_dir: Path = DOCS) -> None:
    if not shutil.which("chromium"):
        sys.exit("no chromium: install Debian's chromium package (apt-get install chromium)")
    with tempfile.TemporaryDirectory() as tmp:
        server = Server(Path(tmp) / "data", env={"REWARDS_WEBHOOKS_ALLOW_PRIVATE": "1"}).start()
        backend = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Backend)
        threading.Thread(target=backend.serve_forever, daemon=True).start()
        try:
            shop = Shop(server, server.url)
            subscribe(shop, f"http://127.0.0.1:{backend.server_address[1]}")
            seed(shop)
            eventually(lambda: _ok(200 if _volume(shop, "Alice Martin") != "0" else 0), 30)
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
                for width, suffix in ((1280, ""), (390, "-390")):  # a laptop, a phone
                    console = Console(browser, server.url, width)
                    for shot in photograph(console, shop, out_dir, suffix):
                        print(shot)
                    console.context.close()
                for shot in photograph_front_and_docs(browser, server.url, shop, out_dir):
                    print(shot)
                browser.close()
        finally:
            backend.shutdown()
            server.stop()


def _volume(shop: Shop, name: str) -> str:
    listing = shop.ok("GET", "/affiliates", params={"query": name})["results"]
    return listing[0]["total_volume"] if listing else "0"


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else DOCS)
