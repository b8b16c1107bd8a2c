"""What a move says when it cannot start."""


class MoveRefused(Exception):
    """The move cannot start: nothing was copied."""
