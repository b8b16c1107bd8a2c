"""The answer of GET /claimable-rewards (API.md §9)."""

from rewards.web.answers import USDC, Answer, raw_amount, text


class ClaimableReward(Answer):
    currency_name: str = text("The token's name", "USDC")
    currency_address: str = text("The token's address (lowercase)", USDC)
    currency_chain_id: int = text("Its chain id", 1)
    currency_decimals: int = text("Its decimals", 6)
    amount: str = raw_amount("Raw units claimable: closed, unexpired claim checks summed")
