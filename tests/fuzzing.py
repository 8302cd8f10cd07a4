"""What the property tests and fuzz targets (tests/test_fuzz_*.py) share with bench/fuzz.py:
the suite's hypothesis settings, and strategies for what users and clients send: typed
text full of what the normalizer rewrites, JSON values with the edges a parser meets
(huge integers, deep nesting, lone surrogates, NaN), and byte-level mutations of a valid
document.

In `make test` each test runs a fixed number of examples: derandomized (the same
examples every run, drawn from the test's own name), with no example database (nothing
is kept between runs, so CI sees what a developer sees) and no deadline (this 2-core
machine, shared with other jobs, stalls a single example far beyond any deadline that
would mean something). bench/fuzz.py runs the same tests for minutes, with random seeds.
"""

from __future__ import annotations

import json
import math
import os

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

# The suite's settings, the example count per test given where each test is written.
SUITE = settings(derandomize=True, database=None, deadline=None, print_blob=False,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                        HealthCheck.function_scoped_fixture])


# bench/fuzz.py runs the same tests for longer: this many times each test's examples,
# from a random seed each run (the environment is the one way into pytest's process).
BENCH_SCALE = int(os.environ.get("LIPSYNC_FUZZ_SCALE", "0"))


def examples(n: int) -> settings:
    if BENCH_SCALE:
        return settings(SUITE, max_examples=n * BENCH_SCALE, derandomize=False)
    return settings(SUITE, max_examples=n)


# -- text ----------------------------------------------------------------------------------

# What the normalizer's rules look for (pipeline/text/normalizer.py's table), and the
# marks sentence splitting cuts at, glued to each other and to random text by the
# strategies below so that rules meet and overlap.
TRIGGERS = (
    "$", "€", "£", "¥", "₹", "-", "−", "–", "—", "/", ":", ".", ",", "%", "#", "~", "x", "@",
    "°C", "°F", "km/h", "km", "kg", "ms", "mins", "h", "GB", "Hz", "mAh", "m/s", "px",
    "a.m.", "p.m.", "am", "pm", "AM", "k", "M", "bn", "B", "million", "billion",
    "Dr.", "Mr.", "Mrs.", "St.", "St", "Ave", "No.", "e.g.", "i.e.", "vs", "vs.", "etc.",
    "approx.", "Jr.", "Prof.", "Nov", "Nov.", "November", "Sept", "May", "1st", "22nd", "th",
    "in", "since", "the", "90s", "'90s", "1990s", "1999", "2026", "v2.13.1", "192.168.0.1",
    "555-123-4567", "2026-11-29", "11/29/2026", "1/2", "3/4", "24/7", "10x", "x2", "#A7X92",
    "ID 4471-B", "https://a.com/p?x=1", "www.x.org", "ann.lee@x.com", "3:05", "23:00",
    "5 - 3 = 2", "5-10", "A", "A-X", "COVID-19", ".5", "$3.50", "-$5", "£1.2m",
    "!", "?", "…", '"', "'", ")", "]", "[[", "]]", "\n", "\t", " ", "  ", ";", "—",
)
NUMBERS = st.one_of(
    st.integers(0, 99).map(str), st.integers(0, 3000).map(str),
    st.integers(0, 10**12).map(str), st.integers(0, 10**6).map("{:,}".format),
    st.floats(0, 1000, allow_nan=False).map(lambda f: f"{f:.2f}"),
)


def typed_text(max_parts: int = 30) -> st.SearchStrategy[str]:
    """Text as typed: triggers, numbers and words run together or spaced."""
    part = st.one_of(st.sampled_from(TRIGGERS), NUMBERS, st.text(max_size=6),
                     st.sampled_from(("Hello", "world", "meet", "Smith", "Then", "ok")))
    gap = st.sampled_from(("", " ", " ", ", ", ". ", "\n"))
    return st.lists(st.tuples(part, gap), max_size=max_parts).map(
        lambda pairs: "".join(p + g for p, g in pairs))


# Any Unicode, lone surrogates and controls included (hypothesis's own text() leaves
# surrogates out: they are not valid in UTF-8, yet JSON's "\ud800" makes one).
ANY_CHAR = st.characters(codec=None, categories=None)
any_text = st.text(ANY_CHAR, max_size=40)


# -- JSON ----------------------------------------------------------------------------------

# Values a JSON parser hands over that a reader of numbers or names must still refuse in
# words: integers too large for a float or to print, NaN and infinities (Python's json
# reads NaN and Infinity), lone surrogates, control characters.
EDGE_NUMBERS = (10**400, -(10**400), 2**63, -(2**63) - 1, 2**53 + 1, 1e308, -1e308, 5e-324,
                math.nan, math.inf, -math.inf, -0.0, 0, 1, -1, True, False)
EDGE_STRINGS = ("", " ", "\ud800", "\udfff", "a\x00b", "\x1b[31m", "é", "𝄞", "\u202e",
                "..", "../../etc/passwd", "/", "/dev/zero", "a" * 300, "NaN", "null", "0")
scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(), any_text,
    st.sampled_from(EDGE_NUMBERS), st.sampled_from(EDGE_STRINGS))
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=5),
                            st.dictionaries(st.one_of(any_text, st.sampled_from(EDGE_STRINGS)),
                                            inner, max_size=5)),
    max_leaves=20)


def dumps(value) -> str:
    """JSON text of `value` as a client might send it (NaN and huge integers included)."""
    return json.dumps(value, ensure_ascii=False)


def deep(depth: int) -> str:
    """Lists nested `depth` deep: Python's json gives up past ~1,000 levels with a
    RecursionError, not the JSONDecodeError a reader catches."""
    return "[" * depth + "]" * depth


@st.composite
def mutated(draw, document: bytes) -> bytes:
    """`document` with a few byte-level mutations (atheris-style: flips, deletions,
    insertions of bytes or JSON tokens, a slice duplicated), or cut short."""
    data = bytearray(document)
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(("flip", "delete", "insert", "token", "duplicate", "cut")))
        at = draw(st.integers(0, len(data)))
        if kind == "flip" and at < len(data):
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif kind == "delete":
            del data[at:at + draw(st.integers(1, 8))]
        elif kind == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=4))
        elif kind == "token":
            token = draw(st.sampled_from(('"', ",", "[", "]", "{", "}", ":", "null", "true", "-1",
                                          "1e999", "9" * 20, "NaN", '"\\ud800"', '"x"', "0.5")))
            data[at:at] = token.encode()
        elif kind == "duplicate":
            end = draw(st.integers(at, min(len(data), at + 64)))
            data[at:at] = data[at:end]
        else:
            del data[at:]
    return bytes(data)


@st.composite
def mutated_value(draw, value):
    """A JSON value with one part replaced: a key dropped or added, an item of a list, or
    a leaf swapped for any JSON value."""
    if isinstance(value, dict) and value:
        key = draw(st.sampled_from(sorted(value)))
        action = draw(st.sampled_from(("replace", "drop", "add", "descend")))
        out = dict(value)
        if action == "drop":
            del out[key]
        elif action == "add":
            out[draw(st.one_of(any_text, st.sampled_from(EDGE_STRINGS)))] = draw(json_values)
        elif action == "descend":
            out[key] = draw(mutated_value(value[key]))
        else:
            out[key] = draw(json_values)
        return out
    if isinstance(value, list) and value:
        at = draw(st.integers(0, len(value) - 1))
        action = draw(st.sampled_from(("replace", "drop", "descend", "append")))
        out = list(value)
        if action == "drop":
            del out[at]
        elif action == "append":
            out.append(draw(json_values))
        elif action == "descend":
            out[at] = draw(mutated_value(value[at]))
        else:
            out[at] = draw(json_values)
        return out
    return draw(json_values)
