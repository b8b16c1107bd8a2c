"""Which service answers which path in the production shape (the gateway routes by this table).

The query API serves the dashboards' reads from the warehouse; everything else (writes, and reads
of the state store such as event status and referral codes) is the ingest API's.
"""

from typing import Literal

QUERY_ROUTES = (("GET", "/api/v1/payouts"), ("GET", "/api/v1/affiliates"), ("GET", "/api/v1/claim-checks"))


def service_for(method: str, path: str) -> Literal["ingest", "query"]:
    for route_method, prefix in QUERY_ROUTES:
        if method.upper() == route_method and (path == prefix or path.startswith(prefix + "/")):
            return "query"
    return "ingest"
