"""GET /projects/budgets' answer (API.md §8)."""

from rewards.web.answers import Answer, text


class BudgetAnswer(Answer):
    currency: str = text("`point`, or the token's address (lowercase)", "point")
    amount: str = text("The most the project pays in it, all time (a decimal for points, raw units of a token)", "5000")
    paid: str = text("Everything paid in it, claim checks included", "1250.5")
    reserved: str = text("The part of `paid` in open and closed claim checks not yet claimed (0 for points)", "0")
    remaining: str = text("`amount` − `paid` (below 0 if the budget was lowered below what was paid)", "3749.5")
