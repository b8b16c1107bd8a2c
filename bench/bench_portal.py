"""The affiliate portal's heaviest calls (API.md §7, GET /affiliate-portal/...), measured by the `affiliates` suite
(bench/bench_affiliates.py) on its generated data and servers: the project's total stats (one row per affiliate,
all of them, unfiltered and filtered), and the stats, the daily breakdown and the referral tree of the affiliate with
the most below it (affiliate 0, the root of the 4-ary tree: ~510 users down to its level 4).

The total stats sit beside the same answer computed from the raw tables (registered affiliates, their level-1 volumes
joined to their conversions' values, their referrals and their payouts) on the same engine, checked identical; the
others beside GET /health on the same server, the floor of the HTTP stack."""

import sys
from decimal import Decimal

import httpx

from bench.report import Figure, percentiles, time_awaits, time_calls
from query_api.affiliate_portal import figures
from rewards.ports import Warehouse

TARGET_P99_MS = 50
# ClickHouse compiles a query's expressions, aggregates and sorts to machine code once it has met them a few times
# (min_count_to_compile_expression and its kin: 3), once per process and shape of query, whatever its values: tens of
# milliseconds that a server pays once per shape, which the warm-up pays, so that the samples are the steady state.
WARM_UP_CALLS = 10
TOP = f"0x{1:040x}"  # affiliate 0
PORTAL = "/api/v1/affiliate-portal"
TOTALS = {  # case → (query, the same filter as the service takes it)
    "total-stats, every affiliate": ({}, figures.Matching()),
    "total-stats, statuses[]=Active&regions[]=EU": (
        {"statuses[]": "Active", "regions[]": "EU"},
        figures.Matching(statuses=("active",), regions=("EU",)),
    ),
}
OF_THE_TOP = {
    "stats of the top affiliate, all time": ("/stats", {"user_identifier": TOP}),
    "stats-breakdown of the top affiliate, by day, 30d": (
        "/stats-breakdown",
        {"user_identifier": TOP, "group_by": "day", "date_range": "30d"},
    ),
    "referral-tree of the top affiliate (4 levels)": ("/referral-tree", {"user_identifier": TOP}),
}
KEY = "reinterpretAsUInt128(sipHash128({type}_identifier_type, {type}_identifier))"
VALUE = "toDecimal256OrZero(trim(BOTH '\"' FROM JSONExtractRaw(c.args, '{arg}', 'amount')), 18)"


def raw_sqls(matching: figures.Matching) -> tuple[dict[str, str], dict]:
    """The total stats from the raw tables: affiliates, affiliate_volumes joined to conversions, referrals (less the
    removed), payouts."""
    params: dict = {}
    affiliates = f"affiliates FINAL WHERE {matching.conditions(params)}"
    keys = f"SELECT {KEY.format(type='user')} FROM {affiliates}"
    removed = (
        "SELECT user_identifier_type, user_identifier, referred_at FROM referral_removals"
        " WHERE project_id = {project:String}"
    )
    sqls = {
        "counts": "SELECT count() AS affiliates, countIf(status = 'active') AS active,"
        f" countIf(status = 'suspended') AS suspended, uniqExact(region) AS regions FROM {affiliates}",
        "level1": f"SELECT toString(sum({VALUE.format(arg='value')})) AS volume,"
        f" toString(sum({VALUE.format(arg='revenue')})) AS revenue, count() AS attributions"
        " FROM affiliate_volumes AS v INNER JOIN conversions AS c"
        " ON c.project_id = v.project_id AND c.timestamp = v.happened_at AND c.dedup_id = v.source_id"
        f" WHERE v.project_id = {{project:String}} AND c.project_id = {{project:String}} AND v.level = 1"
        f" AND {KEY.format(type='v.affiliate')} IN ({keys})",
        "referred": "SELECT count() AS referred FROM referrals WHERE project_id = {project:String}"
        f" AND {KEY.format(type='referrer')} IN ({keys})"
        f" AND (user_identifier_type, user_identifier, referred_at) NOT IN ({removed})",
        "earnings": "SELECT currency, currency_name, currency_decimals, toString(sum(amount)) AS amount FROM payouts"
        " WHERE project_id = {project:String} AND role = 'affiliate'"
        f" AND {KEY.format(type='recipient')} IN ({keys}) GROUP BY currency, currency_name, currency_decimals",
    }
    return sqls, params


async def raw_total_stats(warehouse: Warehouse, project_id: str, matching: figures.Matching) -> tuple:
    sqls, params = raw_sqls(matching)
    rows = {name: await warehouse.query(sql, {**params, "project": project_id}) for name, sql in sqls.items()}
    counts, level1 = rows["counts"][0], rows["level1"][0]
    return (
        int(counts["affiliates"]), int(counts["active"]), int(counts["suspended"]), int(counts["regions"]),
        Decimal(level1["volume"]), Decimal(level1["revenue"]), int(level1["attributions"]),
        int(rows["referred"][0]["referred"]),
        [(e.currency, e.amount) for e in figures.earnings_by_currency(rows["earnings"])],
    )  # fmt: skip


def _answer_of_http(body: dict) -> tuple:
    keys = ("total_affiliates", "active_affiliates", "suspended_affiliates", "total_regions", "total_volume",
            "total_revenue", "total_attributions", "total_referred_users")  # fmt: skip
    return (*(body[k] for k in keys), [(e["currency"], e["amount"]) for e in body["total_earnings"]])


async def raw_tables(warehouse: Warehouse, project_id: str, runs: int) -> dict[str, tuple[float, tuple]]:
    """Per total-stats case: p50 ms of the answer from the raw tables, and the answer."""
    result = {}
    for name, (_, matching) in TOTALS.items():
        samples, answer = await time_awaits(
            lambda _, matching=matching: raw_total_stats(warehouse, project_id, matching), runs
        )
        result[name] = (percentiles(samples)[0], answer)
    return result


def over_http(url: str, api_key: str, runs: int) -> dict[str, tuple[list[float], object]]:
    """Per case: latencies (ms) against the server at `url`, and its answer; and GET /health's latencies."""
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {api_key}"}, timeout=30) as client:

        def timed(path: str, params: dict) -> tuple[list[float], object]:
            get = _getter(client, path, params)
            for _ in range(WARM_UP_CALLS):
                get()
            return time_calls(lambda _: get(), runs)

        measured = {name: timed(f"{PORTAL}/total-stats", query) for name, (query, _) in TOTALS.items()}
        measured |= {name: timed(f"{PORTAL}{path}", query) for name, (path, query) in OF_THE_TOP.items()}
        measured["GET /health"] = timed("/health", {})
    return measured


def _getter(client: httpx.Client, path: str, params: dict):
    def get() -> object:
        response = client.get(path, params=params)
        response.raise_for_status()
        return response.json(parse_float=Decimal)

    return get


def figures_of(http: dict, raw: dict, label: str, shape: str, where: str) -> list[Figure]:
    """One figure per case; exits if a total-stats answer and the raw tables disagree."""
    figures = []
    health = percentiles(http["GET /health"][0])[0]
    for name in [*TOTALS, *OF_THE_TOP]:
        samples, answer = http[name]
        p50, p99 = percentiles(samples)
        if name in TOTALS:
            raw_p50, raw_answer = raw[name]
            if _answer_of_http(answer) != raw_answer:
                sys.exit(f"GET /affiliate-portal/{name} and the raw tables disagree on {where}")
            baseline = {"baseline_name": "raw tables p50", "baseline": raw_p50, "ratio": raw_p50 / p50,
                        "ratio_note": "× faster"}  # fmt: skip
        else:
            baseline = {"baseline_name": "GET /health p50", "baseline": health, "ratio": p50 / health,
                        "ratio_note": "× GET /health"}  # fmt: skip
        figures.append(
            Figure(
                section="queries", case=f"GET /affiliate-portal {name}, {label}", shape=shape, result=p50, unit="ms",
                p99=p99, target=f"p99 < {TARGET_P99_MS} ms", met=p99 < TARGET_P99_MS, **baseline,
            )
        )  # fmt: skip
    return figures
