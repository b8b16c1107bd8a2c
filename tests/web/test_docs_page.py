"""/docs in a real headless browser (Debian's Chromium, driven by playwright): it loads with no network beyond the
server (Swagger UI's files come from the installed fastapi-offline package), the Authorize button takes an API
key, and "Try it out" on GET /payouts/summary, with the values the docs fill in, answers the summary. Without
Chromium the test skips, and under CI=true fails (`make test` installs Debian's package when it can)."""

import shutil

import pytest

from tests.conftest import SERVICE
from tests.support import swagger
from tests.support.harness import Admin
from tests.support.real_engines import missing

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


@pytest.fixture(scope="module")
def browser():
    sync_api = pytest.importorskip("playwright.sync_api")
    if not shutil.which("chromium"):
        missing("no chromium: install Debian's chromium package (apt-get install chromium)")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield browser
        browser.close()


def test_the_docs_work_offline_and_try_the_summary_with_a_key(browser, embedded_server):
    admin = Admin(embedded_server)
    key = admin.key(admin.project(), SERVICE)
    page = browser.new_page()
    elsewhere: list[str] = []

    def only_the_server(route):
        if route.request.url.startswith(embedded_server.url):
            return route.continue_()
        elsewhere.append(route.request.url)
        return route.abort()

    page.route("**/*", only_the_server)
    swagger.sign_in(page, embedded_server.url, key)
    operation = swagger.try_out(page)
    currency = operation.locator('tr[data-param-name="currency"]').locator("select, input").first
    assert currency.input_value() == "point"  # filled in by the docs (the parameter's example), nothing typed
    assert swagger.execute(operation).inner_text().strip() == "200"
    body = operation.locator(".live-responses-table .response-col_description pre").first.inner_text()
    assert '"total_payouts": "0"' in body
    assert elsewhere == []  # nothing asked of any other host
