"""docs/api.md, the API reference, held to the service it describes: every operation of the OpenAPI document has an
entry there (a heading naming its method and its path, relative to /api/v1) and no entry names an operation the
service lacks; the scopes, the rate limits and the contract's sections it lists are the code's."""

import re
from pathlib import Path

import pytest

from rewards.settings import Settings
from rewards.web.app import API_PREFIX
from rewards.web.ratelimit import DEFAULT_LIMITS
from runtime.serve import embedded_app

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = (ROOT / "docs" / "api.md").read_text()
DOCUMENT = embedded_app(Settings()).openapi()

OPERATION = re.compile(r"\b(GET|POST|PUT|PATCH|DELETE) (/[^\s`()]*)")
HEADING = re.compile(r"^#{2,6} (.*)$", re.MULTILINE)
# The contract's sections, numbered and titled as the reference keeps them.
SECTIONS = (
    "Common rules",
    "Payouts",
    "Referral codes",
    "Conversion events",
    "Affiliates and commission rates",
    "Claim checks",
    "Project configuration (how payouts are computed)",
    "The rest of the published client's surface (`@fuul/sdk` 7.41.0)",
    "Program integrity: blocklist, self-referral, caps, budgets, expiry",
    "Reversals and approvals",
    "Webhooks",
    "Data rights and operations",
)
PACKAGES = ("schemas", "rewards", "ingest_api", "query_api", "stream_workers", "runtime")
# The 403 each guarded operation documents (rewards.web.openapi): which scope it needs.
SCOPE_403 = re.compile(r"lacks the (service_role) scope|has neither the (\S+) scope nor service_role")


def served() -> set[tuple[str, str]]:
    return {
        (method.upper(), path.removeprefix(API_PREFIX))
        for path, methods in DOCUMENT["paths"].items()
        for method in methods
    }


def documented() -> set[tuple[str, str]]:
    return {found for heading in HEADING.findall(REFERENCE) for found in OPERATION.findall(heading)}


def test_every_operation_of_the_openapi_document_has_an_entry():
    missing = sorted(served() - documented())
    assert not missing, f"operations without a heading in docs/api.md: {missing}"


def test_no_entry_names_an_operation_the_service_lacks():
    stale = sorted(documented() - served())
    assert not stale, f"headings of docs/api.md naming no operation of the service: {stale}"


def test_the_contracts_sections_keep_their_numbers_and_titles():
    numbered = [heading for heading in HEADING.findall(REFERENCE) if re.match(r"\d+\. ", heading)]
    assert numbered == [f"{number}. {title}" for number, title in enumerate(SECTIONS)]


def test_every_section_the_code_cites_is_there():
    cited = {
        int(number)
        for package in PACKAGES
        for path in (ROOT / package).rglob("*.py")
        for number in re.findall(r"(?:API|api)\.md §(\d+)", path.read_text())
    }
    assert cited and cited <= set(range(len(SECTIONS)))


def _scope_table() -> dict[str, set[tuple[str, str]]]:
    """The reference's table of the operations each scope is needed for."""
    table = REFERENCE.split("| scope needed | operations |", 1)[1].split("\n\n", 1)[0]
    rows = [line.split("|")[1:3] for line in table.splitlines() if line.startswith("| `")]
    return {re.match(r" `([^`]+)`", scope)[1]: set(OPERATION.findall(operations)) for scope, operations in rows}


def test_the_scope_table_is_the_guards():
    needed: dict[str, set[tuple[str, str]]] = {}
    for path, methods in DOCUMENT["paths"].items():
        for method, operation in methods.items():
            forbidden = operation["responses"].get("403", {}).get("description", "")
            if found := SCOPE_403.search(forbidden):
                scope = found[1] or found[2]
                needed.setdefault(scope, set()).add((method.upper(), path.removeprefix(API_PREFIX)))
    assert _scope_table() == needed


@pytest.mark.parametrize("name", sorted(DEFAULT_LIMITS))
def test_every_rate_limit_is_listed_with_its_default(name):
    rows = [line for line in REFERENCE.splitlines() if line.startswith(f"| `{name}` |")]
    assert len(rows) == 1 and rows[0].rstrip(" |").endswith(DEFAULT_LIMITS[name]), rows
