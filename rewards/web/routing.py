"""Which service answers which path in the production shape: the one route table.

The query API serves the dashboards' reads from the warehouse; everything else (writes, and reads
of the state store such as event status and referral codes) is the ingest API's.

Everything else follows this table: the test harness routes its requests by `service_for`, and the
gateway's route rules (in `deploy/gateway.conf`, which docker-compose mounts, and in the gateway
ConfigMap of `deploy/k8s/rewards.yaml`) are written from it between the `BEGIN routes` and
`END routes` markers. To add a path prefix the query API serves, add its `(method, prefix)` to
`QUERY_ROUTES` below (a prefix covers the path itself and everything under it), then run
`python -m rewards.web.routing` to rewrite those blocks; nothing else is edited. `tests/runtime/test_deploy.py`
fails when a deploy file's block differs from what this table renders (`python -m rewards.web.routing
--check` says which), when the rendered gateway rules route any path differently from
`service_for`, and when a route of the query or ingest API is not the table's.
"""

import re
import sys
from pathlib import Path
from typing import Literal

QUERY_ROUTES = (
    ("GET", "/api/v1/payouts"),
    ("GET", "/api/v1/affiliates"),
    ("GET", "/api/v1/claim-checks"),
    # API.md §7, the published client's getReferredUsersLeaderboard (not under /payouts).
    ("GET", "/api/v1/leaderboard"),
    # API.md §7, the published client's getConversions: the payout configuration's conversion rules.
    ("GET", "/api/v1/conversions"),
    # API.md §7, the published client's affiliate portal (getAffiliateStats, getReferralTree, ...).
    ("GET", "/api/v1/affiliate-portal"),
    # A read done by POST (API.md §7, the published client's getClaimableChecks): the user's closed checks are listed
    # by the warehouse, their current states read from the state store, and signed.
    ("POST", "/api/v1/claim-checks/claim"),
    # API.md §9: the public claimable rewards (no key).
    ("GET", "/api/v1/claimable-rewards"),
    # API.md §11: the exports, streamed from the warehouse.
    ("GET", "/api/v1/exports"),
    # The operator console: its page (served at the root, outside the API) and its reads.
    ("GET", "/console"),
    ("GET", "/api/v1/console"),
)


def service_for(method: str, path: str) -> Literal["ingest", "query"]:
    for route_method, prefix in QUERY_ROUTES:
        if method.upper() == route_method and (path == prefix or path.startswith(prefix + "/")):
            return "query"
    return "ingest"


# --- The gateway's rules, rendered from the table ---------------------------------------------------------------

ROOT = Path(__file__).resolve().parents[2]
GENERATED_FILES = ("deploy/gateway.conf", "deploy/k8s/rewards.yaml")
BEGIN = "# BEGIN routes: generated from rewards/web/routing.py by `python -m rewards.web.routing`, edit there"
END = "# END routes"
_METHOD = re.compile(r"[A-Z]+")
_PREFIX = re.compile(r"(/[A-Za-z0-9._~-]+)+")  # no trailing slash, nothing nginx or PCRE would read specially


def nginx_map() -> list[str]:
    """The nginx `map` choosing the upstream (`ingest` or `query`) for a request, as `service_for` does."""
    rules = []
    for method, prefix in QUERY_ROUTES:
        if not _METHOD.fullmatch(method) or not _PREFIX.fullmatch(prefix):
            raise ValueError(f"QUERY_ROUTES: cannot render {(method, prefix)!r}")
        pattern = prefix.replace(".", r"\.")  # the one character of a prefix special to a regular expression
        rules.append(f'    "~^{method} {pattern}(/|$)" query;')
    return ['map "$request_method $uri" $rewards_service {', "    default ingest;", *rules, "}"]


def render(text: str) -> str:
    """`text` with the block between the markers (kept, with their indentation) replaced by `nginx_map()`."""
    lines = text.splitlines(keepends=True)
    begins = [i for i, line in enumerate(lines) if line.strip() == BEGIN]
    ends = [i for i, line in enumerate(lines) if line.strip() == END]
    if len(begins) != 1 or len(ends) != 1 or ends[0] < begins[0]:
        raise ValueError(f"expected one {BEGIN!r} line followed by one {END!r} line")
    begin, end = begins[0], ends[0]
    indent = lines[begin][: len(lines[begin]) - len(lines[begin].lstrip())]
    block = [f"{indent}{line}\n" for line in nginx_map()]
    return "".join(lines[: begin + 1] + block + lines[end:])


def stale_files(root: Path = ROOT) -> list[str]:
    """The generated files whose routes block differs from the table."""
    return [name for name in GENERATED_FILES if render((root / name).read_text()) != (root / name).read_text()]


def main(argv: list[str]) -> int:
    """`python -m rewards.web.routing` rewrites the routes blocks; with `--check` it only says which are stale."""
    if argv not in ([], ["--check"]):
        print("usage: python -m rewards.web.routing [--check]", file=sys.stderr)
        return 2
    stale = stale_files()
    if argv == ["--check"]:
        for name in stale:
            message = f"{name}: routes differ from rewards/web/routing.py; run `python -m rewards.web.routing`"
            print(message, file=sys.stderr)
        return 1 if stale else 0
    for name in stale:
        path = ROOT / name
        path.write_text(render(path.read_text()))
        print(f"rewrote {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
