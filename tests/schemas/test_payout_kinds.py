"""Payout kinds are one enum (rewards.domain.payouts.PayoutKind): the engine pays them, the queries list them, and the
views' SQL names them; a kind named in a view but not in the enum (a typo, a kind renamed in one place) fails here
instead of silently counting nothing."""

import re
from pathlib import Path

from query_api.payouts.service import KINDS
from rewards.domain.payouts import PayoutKind

MIGRATIONS = Path(__file__).parents[2] / "schemas" / "clickhouse"
# `kind = 'x'`, `kind != 'x'`, `kind IN ('x', 'y')`, with any table alias before it
NAMED = re.compile(r"\bkind\s*(?:=|!=|<>)\s*'([^']*)'|\bkind\s+(?:NOT\s+)?IN\s*\(([^)]*)\)", re.IGNORECASE)


def kinds_named_in(sql: str) -> set[str]:
    names = set()
    for single, listed in NAMED.findall(sql):
        names |= {single} if single else set(re.findall(r"'([^']*)'", listed))
    return names


def test_every_kind_a_view_names_is_a_payout_kind():
    named = {path.name: kinds_named_in(path.read_text()) for path in sorted(MIGRATIONS.glob("*.sql"))}
    assert set().union(*named.values()) >= {PayoutKind.COMMISSION, PayoutKind.REFERRAL_REWARD}  # the parser reads
    unknown = {name: kinds - set(PayoutKind) for name, kinds in named.items() if kinds - set(PayoutKind)}
    assert not unknown


def test_a_code_uses_payouts_are_named_after_their_kind():
    """The user payouts' view names a code use's payouts as a conversion: `referral_reward`, their kind."""
    sql = (MIGRATIONS / "009_user_payouts.sql").read_text()
    assert set(re.findall(r"source_type = 'code_use', '([^']*)'", sql)) == {PayoutKind.REFERRAL_REWARD}


def test_the_parser_reads_each_form():
    sql = "WHERE p.kind = 'a' OR kind != 'b' OR kind IN ('c', 'd') OR kind NOT IN ('e')"
    assert kinds_named_in(sql) == {"a", "b", "c", "d", "e"}


def test_the_queries_list_every_kind():
    assert set(KINDS) == set(PayoutKind)
