"""JSON from outside the program (a file a user edits or shares, a client's message),
read with every way it can fail as a ValueError.

json.loads raises JSONDecodeError for bad syntax and UnicodeDecodeError for bytes that
are not text, both ValueErrors, but a document nested past the interpreter's recursion
limit (~1,000 levels of [ or {) raises RecursionError, and an integer of more digits
than Python converts (4,300) a ValueError whose advice is for programmers: a reader
catching JSONDecodeError let both through as tracebacks.
"""

from __future__ import annotations

import json
import sys
from typing import Any


def parse_json(data: str | bytes) -> Any:
    """The JSON value in `data`; ValueError (JSONDecodeError for bad syntax, with its
    position; UnicodeDecodeError for bytes that are not text) for anything else."""
    try:
        return json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise
    except RecursionError:
        raise ValueError("it is nested too deep (lists and objects more than about "
                         f"{sys.getrecursionlimit():,} levels inside each other)") from None
    except ValueError:
        raise ValueError("it holds a number of more than "
                         f"{sys.get_int_max_str_digits():,} digits") from None


def json_float(value: Any) -> float | None:
    """A JSON number as a float; None for anything else (True and False, which Python
    counts as integers, included) and for an integer too large for a float: JSON's
    integers have no bound, and float() of 10**400 raises OverflowError."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        return float(value)
    except OverflowError:
        return None
