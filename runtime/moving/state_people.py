"""(being written)"""

from runtime.moving.state import TableCopy

COPIES: list[TableCopy] = []
