"""rewards.domain.erasure: the pseudonym, and the texts that name a user found and rewritten exactly."""

import orjson

from rewards.domain import erasure
from rewards.domain.payouts import User

ALICE = User("0x" + "a" * 40, "evm_address")
BOB = User("bob|x@example.com", "email")  # an email may hold a `|`


def test_the_pseudonym_is_stable_per_salt_and_keeps_the_type():
    salt = erasure.new_salt()
    first = erasure.pseudonym(salt, ALICE)
    assert first == erasure.pseudonym(salt, ALICE) and first.identifier_type == "evm_address"
    assert first.identifier.startswith("erased:") and len(first.identifier) == len("erased:") + 32
    assert erasure.pseudonym(erasure.new_salt(), ALICE) != first  # another project: another pseudonym
    assert erasure.pseudonym(salt, User(ALICE.identifier, "sui_address")) != first  # the type counts


def test_documents_are_rewritten_at_any_depth_and_only_exact_strings():
    texts = erasure.document_renames({ALICE: User("erased:1", "evm_address"), BOB: User("erased:2", "email")})
    body = orjson.dumps({"user": ALICE.identifier, "note": ALICE.identifier + "!"}).decode()
    document = {"a": [{"u": ALICE.identifier}], "id": f"evm_address:{ALICE.identifier}", "body": body,
                ALICE.identifier: 1, "n": 5, "other": "0x" + "b" * 40, "who": BOB.identifier}  # fmt: skip
    rewritten = orjson.loads(erasure.rewrite_json_text(orjson.dumps(document), texts))
    assert rewritten["a"] == [{"u": "erased:1"}] and rewritten["id"] == "evm_address:erased:1"
    assert orjson.loads(rewritten["body"]) == {"user": "erased:1", "note": ALICE.identifier + "!"}
    assert "erased:1" in rewritten and rewritten["n"] == 5 and rewritten["other"] == "0x" + "b" * 40
    assert rewritten["who"] == "erased:2"
    assert erasure.rewrite_json_text('{"x": "nobody"}', texts) is None
    assert erasure.rewrite_json_text("not json " + ALICE.identifier, texts) is None


def test_a_rewritten_document_keeps_everything_else_as_written():
    """Exact decimals past a float's digits, integers past 64 bits, key order and spacing stay byte for byte."""
    texts = erasure.document_renames({ALICE: User("erased:1", "evm_address")})
    text = '{"amount": 1.10, "units": 123456789012345678901234567890, "user":"' + ALICE.identifier + '" , "z":1e2}'
    assert erasure.rewrite_json_text(text, texts) == text.replace(ALICE.identifier, "erased:1")


def test_what_an_erased_user_signed_is_dropped_with_them():
    texts = erasure.document_renames({ALICE: User("erased:1", "evm_address")})
    use = {"use_id": "u1", "user": f"evm_address:{ALICE.identifier}", "at": 1,
           "proof": {"signature": "0xsig", "signature_message": f"I am {ALICE.identifier}", "chain_id": 1}}  # fmt: skip
    other = {"use_id": "u2", "user": "evm_address:0x" + "c" * 40, "proof": {"signature": "0xtheirs"}}
    rewritten = orjson.loads(erasure.rewrite_json_text(orjson.dumps([use, other]), texts))
    assert rewritten[0] == {"use_id": "u1", "user": "evm_address:erased:1", "at": 1, "proof": {"chain_id": 1}}
    assert rewritten[1] == other  # another user's signature stays


def test_names_ending_in_a_user_are_renamed_even_past_a_bar_in_an_email():
    texts = erasure.document_renames({BOB: User("erased:2", "email"), ALICE: User("erased:1", "evm_address")})
    assert erasure.renamed_counter("total|end_user|5:point|email:bob|x@example.com", texts) == (
        "total|end_user|5:point|email:erased:2"
    )
    currency = "0x" + "c" * 40
    key = f"month|2026-11|referrer|42:{currency}|evm_address:{ALICE.identifier}"
    assert erasure.renamed_counter(key, texts) == f"month|2026-11|referrer|42:{currency}|evm_address:erased:1"
    assert erasure.renamed_counter("total|end_user|5:point|email:carol@example.com", texts) is None
    assert erasure.renamed_field(f"evm_address:{ALICE.identifier}", texts) == "evm_address:erased:1"
    assert erasure.renamed_text(ALICE.identifier, texts) is None  # a bare identifier is no stored name
    assert erasure.renamed_text('{"by": "evm_address:' + ALICE.identifier + '"}', texts) == (
        '{"by": "evm_address:erased:1"}'
    )
