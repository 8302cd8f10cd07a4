"""Typed English → the words a person would say, for what espeak-ng misreads.

espeak-ng (inside piper) already reads much typed text correctly; this module rewrites
only what it gets wrong, so the rest keeps espeak's own (tested) reading. Survey of
en_US-joe-medium's phonemizer, each row "typed → espeak said → we write":

=====================  ===================================  ==================================
typed                  espeak said                          we write
=====================  ===================================  ==================================
.5 / .75               "dot five" / "dot seven five"        point 5 / point 7 5
$5, $3.50              "dollar five", "dollar three point   5 dollars, 3 dollars and 50 cents
                       five zero"
€20, ¥500, ₹100        "euros twenty", "yen five hundred"   20 euros, 500 yen, 100 rupees
£1.2m, $2B, $5k        "pound one point two M"              1.2 million pounds, ...
$2 billion             "dollar two billion"                 2 billion dollars
-$5                    "dollar five" (minus lost)           minus 5 dollars
3:00, 3:05, 23:00      "three zero zero", "three zero       3 o'clock, 3 oh 5,
                       five", "twenty three zero zero"      twenty three hundred
10 a.m. Then           a sentence break after "a.m."        10 AM. Then (break kept only
                       even mid-sentence                    where a sentence really ends)
2026-11-29             "two thousand twenty six dash        November 29th, 2026
                       eleven dash twenty nine"
11/29/2026             "eleven slash twenty nine slash..."  November 29th, 2026
29 Nov 2026, Nov. 29   "nɑːv", sentence break after "Nov."  the 29th of November 2026,
                                                            November 29th
in 1999, 1990s         "nineteen hundred ninety nine",      in nineteen ninety nine,
                       "... ninety z"                       nineteen nineties; the 90s →
                                                            the nineties
5-10, 1990–2000        "five dash ten", en dash dropped     5 to 10, nineteen ninety to 2000
5 - 3 = 2              "five three equals two"              5 minus 3 = 2
5km, 5 cm, 10ms, 3 kg  spelled letters "K M", "C M", ...    5 kilometers, 5 centimeters, ...
5 oz, 5 ft, 5 mins,    "ɑːz", "F T", "mɪnz", "sɛks",       ounces, feet, minutes, seconds,
5 secs, 5 Hz, 5 GB     "H Z", "G B"                         hertz, gigabytes
100 km/h, 20°C         "K M slash H", "degrees C"           100 kilometers per hour,
                                                            20 degrees Celsius
https://a.com/p?x=1    "H T T P S colon slash slash ...     a dot com slash p question mark
                       pathks equals one"                   x equals 1 (www.x.org was right
                                                            and is read the same way)
#A7X92                 "hash A seven X ninety two"          number A7 X 9 2 (a lone "A" is
                                                            the article "uh"; glued to the
                                                            next sign it is the letter)
ID 4471-B              "four thousand four hundred          ID 4 4 7 1 B
                       seventy one B"
v2.13.1, 192.168.0.1   "V two point one three point one"    version 2 point 13 point 1,
                                                            192 dot 168 dot 0 dot 1
555-123-4567           "five hundred fifty five dash ..."   5 5 5, 1 2 3, 4 5 6 7
Dr. Smith, Mr., St.    right words, but a sentence break    Doctor Smith, Mister, Saint /
                       after every "Dr." / "Mr." / "No."    Street, number (No. 5)
e.g., i.e., vs., etc.  "for example", "I E", "V S"; the     for example, that is, versus,
                       period splits the sentence           et cetera
approx., Prof., Mt.    "ɐpɹˈɑːks", "pɹˈɑːf", "M T"          approximately, Professor, Mount
#1, #gaming            "hash one", "hash gaming"            number 1, hashtag gaming
#ThrowbackThursday     "hash throwback thursday"            hashtag Throwback Thursday
1/2, 3/4, 24/7         "one slash two", ...                 one half, three quarters, 24 7
10x, x2, ~5            "ten ex", "ex two", "tilde five"     10 times, times 2, about 5
=====================  ===================================  ==================================

Read right by espeak, and written out all the same so that every sign the voice says is a
word of the spoken text, which captions time the typed text by (normalize_spans pairs
what was typed with what is said): 3.5% → 3.5 percent; ann.lee@x.com → ann dot lee at x
dot com.

Already right, left alone: integers (also with thousands commas, negative, "−"), decimals
"3.5", "3:45pm", "3:45", ordinals "1st"/"22nd", years from 2000 ("two thousand
twenty six" is a common American reading), "1900", @mentions, "&",
"+", "=", "±", "@", "×", "÷", "5°", "50¢", "5€", "mph", "lbs", "GHz", "MHz", "U.S.",
two-part product codes ("MP3", "PS5", "4K", "Q3", "RTX4090", "COVID-19").

Deliberately left out: a bare "m" after a number (metres or million), "in"/"s" as units,
day-first slash dates with day ≤ 12 (read US month-first), month/day without a year
("11/29"), Roman numerals, bare 4-digit numbers without a year cue (a count or a year:
espeak's reading stands), two-letter codes espeak says as a word ("QA4" → "kɑː four"),
"St." before a capitalised word that starts a new sentence (read "Saint"), emoticons.

Output stays readable in subtitles (digits are kept wherever espeak reads them well), and
`normalize(normalize(x)) == normalize(x)`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from difflib import SequenceMatcher

_ONES = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen "
    "fourteen fifteen sixteen seventeen eighteen nineteen"
).split()
_TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()


def _words(n: int) -> str:
    """0 ≤ n < 100 in words, for the places where espeak's own reading of digits is wrong."""
    if n < 20:
        return _ONES[n]
    tens, ones = divmod(n, 10)
    return _TENS[tens] if ones == 0 else f"{_TENS[tens]} {_ONES[ones]}"


def _year(year: int) -> str:
    """A year as said aloud where espeak says "nineteen hundred ninety nine"."""
    if not 1100 <= year <= 1999:
        return str(year)
    high, low = divmod(year, 100)
    if low == 0:
        return f"{_words(high)} hundred"
    return f"{_words(high)} oh {_words(low)}" if low < 10 else f"{_words(high)} {_words(low)}"


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


_PLURAL_TENS = {
    "twenty": "twenties", "thirty": "thirties", "forty": "forties", "fifty": "fifties",
    "sixty": "sixties", "seventy": "seventies", "eighty": "eighties", "ninety": "nineties",
}


def _decade(tens: int) -> str:
    return _PLURAL_TENS.get(_TENS[tens], "") if tens >= 2 else "hundreds"


_NEXT_SENTENCE = re.compile(r"\s*$|\s+[\"'“(]?[A-Z]")


def _sentence_ends_after(match: re.Match[str]) -> bool:
    """Whether a period swallowed by an expansion was also the end of a sentence."""
    # Matched in place: slicing the rest of a long text per match would be quadratic.
    return _NEXT_SENTENCE.match(match.string, match.end()) is not None


def _keep_stop(match: re.Match[str], words: str) -> str:
    return words + "." if match.group(0).endswith(".") and _sentence_ends_after(match) else words


_MONTHS = (
    "January February March April May June July August September October November December"
).split()
_MONTH_OF = {name.lower(): i + 1 for i, name in enumerate(_MONTHS)}
_MONTH_OF.update({name[:3].lower(): i + 1 for i, name in enumerate(_MONTHS)})
_MONTH_OF["sept"] = 9
_MONTH = "(?:" + "|".join(sorted((m.capitalize() for m in _MONTH_OF), key=len, reverse=True)) + ")"


def _date(month: int, day: int, year: str | None) -> str | None:
    if not (1 <= month <= 12 and 1 <= day <= 31):
        return None
    spoken = f"{_MONTHS[month - 1]} {_ordinal(day)}"
    return f"{spoken}, {_year(int(year))}" if year else spoken


def _iso_date(m: re.Match[str]) -> str:
    return _date(int(m[2]), int(m[3]), m[1]) or m[0]


def _slash_date(m: re.Match[str]) -> str:
    first, second, year = int(m[1]), int(m[2]), m[3]
    if len(year) == 2:
        year = f"20{year}"
    # en_US reads month first; a first field over 12 can only be a day.
    month, day = (second, first) if first > 12 else (first, second)
    return _date(month, day, year) or m[0]


def _month_day(m: re.Match[str]) -> str:
    day = int(m[2].rstrip("stndrh"))  # "29th"
    return _date(_MONTH_OF[m[1].lower()], day, m[3]) or m[0]


def _day_month(m: re.Match[str]) -> str:
    day, month = int(m[1]), _MONTH_OF[m[2].lower()]
    if not 1 <= day <= 31:
        return m[0]
    year = f" {_year(int(m[3]))}" if m[3] else ""
    return f"the {_ordinal(day)} of {_MONTHS[month - 1]}{year}"


def _time(m: re.Match[str]) -> str:
    hour, minute, half = int(m[1]), m[2] or None, m[3]
    if hour > 24 or (minute is not None and int(minute) > 59):
        return m[0]
    suffix = f" {half.upper()}M" if half else ""
    if minute is None or minute == "00":
        if half:
            words = f"{hour}{suffix}"
        elif hour in (0, 24):
            words = "midnight"
        elif 1 <= hour <= 12:
            words = f"{hour} o'clock"
        else:
            words = f"{_words(hour)} hundred"
    elif minute.startswith("0"):
        words = f"{hour} oh {minute[1]}{suffix}"
    else:
        words = f"{hour}:{minute}{suffix}"
    return _keep_stop(m, words)


_CURRENCY = {
    "$": ("dollar", "dollars", "cent", "cents"),
    "€": ("euro", "euros", "cent", "cents"),
    "£": ("pound", "pounds", "penny", "pence"),
    "¥": ("yen", "yen", "", ""),
    "₹": ("rupee", "rupees", "paisa", "paise"),
}
_SCALE = {
    "k": "thousand", "K": "thousand", "thousand": "thousand",
    "m": "million", "M": "million", "mn": "million", "million": "million",
    "b": "billion", "B": "billion", "bn": "billion", "billion": "billion",
    "t": "trillion", "T": "trillion", "tn": "trillion", "trillion": "trillion",
}


def _point(m: re.Match[str]) -> str:
    """".75" as said: espeak reads a leading point as "dot", and "75" after one as a number."""
    return "point " + " ".join(m[1])


def _money(sign: str | None, symbol: str, amount: str, scale: str | None) -> str:
    one, many, sub_one, sub_many = _CURRENCY[symbol]
    minus = "minus " if sign else ""
    whole, _, cents = amount.partition(".")
    if len(cents) == 2 and sub_many and not scale:
        units = int(whole.replace(",", "") or "0")
        parts = [f"{whole} {one if units == 1 else many}"] if units else []
        if int(cents):
            parts.append(f"{int(cents)} {sub_one if int(cents) == 1 else sub_many}")
        return minus + (" and ".join(parts) or f"0 {many}")
    # A sum that starts at its point ("€.5") is said as the point rule says one.
    said = _point(re.match(r"\.(\d+)", amount)) if amount.startswith(".") else amount
    if scale:
        return f"{minus}{said} {_SCALE[scale]} {many}"
    return f"{minus}{said} {one if amount == '1' else many}"


# What _money writes after an amount: its currency's or the currency's cents' name.
_NAMED_AMOUNT = re.compile(r"\s(?:%s)\b" % "|".join(
    sorted({name for names in _CURRENCY.values() for name in names if name}, key=len,
           reverse=True)))


def _money_before(m: re.Match[str]) -> str:
    # A sum already named is said as it is: a sign before it is a sign of its own, not a
    # second one for it ("$ $0" → "$ 0 dollars", which a second reading must leave alone).
    if _NAMED_AMOUNT.match(m.string, m.end()):
        return m[0]
    return _money(m[1], m[2], m[3], m[4])


def _money_after(m: re.Match[str]) -> str:
    return _money(m[1], m[3], m[2], None)


# (abbreviation, singular, plural); case matters ("mg" vs "MG", "g" vs "G").
_UNITS: list[tuple[str, str, str]] = [
    ("km/h", "kilometer per hour", "kilometers per hour"),
    ("kmh", "kilometer per hour", "kilometers per hour"),
    ("m/s", "meter per second", "meters per second"),
    ("°C", "degree Celsius", "degrees Celsius"),
    ("°F", "degree Fahrenheit", "degrees Fahrenheit"),
    ("km", "kilometer", "kilometers"), ("cm", "centimeter", "centimeters"),
    ("mm", "millimeter", "millimeters"), ("mi", "mile", "miles"), ("ft", "foot", "feet"),
    ("kg", "kilogram", "kilograms"), ("mg", "milligram", "milligrams"),
    ("g", "gram", "grams"), ("oz", "ounce", "ounces"),
    ("ml", "milliliter", "milliliters"), ("mL", "milliliter", "milliliters"),
    ("L", "liter", "liters"),
    ("TB", "terabyte", "terabytes"), ("GB", "gigabyte", "gigabytes"),
    ("MB", "megabyte", "megabytes"), ("KB", "kilobyte", "kilobytes"),
    ("kB", "kilobyte", "kilobytes"),
    ("kHz", "kilohertz", "kilohertz"), ("Hz", "hertz", "hertz"),
    ("kW", "kilowatt", "kilowatts"), ("mAh", "milliamp hour", "milliamp hours"),
    ("fps", "frame per second", "frames per second"), ("px", "pixel", "pixels"),
    ("ms", "millisecond", "milliseconds"), ("ns", "nanosecond", "nanoseconds"),
    ("mins", "minute", "minutes"), ("min", "minute", "minutes"),
    ("secs", "second", "seconds"), ("sec", "second", "seconds"),
    ("hrs", "hour", "hours"), ("hr", "hour", "hours"), ("h", "hour", "hours"),
]
_UNIT_NAMES = {abbr: (one, many) for abbr, one, many in _UNITS}


def _unit(m: re.Match[str]) -> str:
    one, many = _UNIT_NAMES[m[2]]
    return f"{m[1]} {one if m[1] == '1' else many}"


_FRACTION_NAMES = {
    2: ("half", "halves"), 3: ("third", "thirds"), 4: ("quarter", "quarters"),
    5: ("fifth", "fifths"), 6: ("sixth", "sixths"), 7: ("seventh", "sevenths"),
    8: ("eighth", "eighths"), 9: ("ninth", "ninths"), 10: ("tenth", "tenths"),
}


def _fraction(m: re.Match[str]) -> str:
    top, bottom = int(m[2]), int(m[3])
    if m[0] == "24/7":
        return "24 7"
    if bottom not in _FRACTION_NAMES or not 1 <= top < bottom:
        return m[0]
    one, many = _FRACTION_NAMES[bottom]
    if m[1]:
        if top == 1:
            return f"{m[1]} and a {one}"
        return f"{m[1]} and {_words(top)} {many}"
    return f"{_words(top)} {one if top == 1 else many}"


def _range(m: re.Match[str]) -> str:
    low, high = m[1], m[2]
    if m[3]:
        return f"{low} minus {high}{m[3]}"
    if low.isdigit() and high.isdigit() and len(low) == len(high) == 4:
        low, high = _year(int(low)), _year(int(high))
    return f"{low} to {high}"


def _spell(code: str) -> str:
    """A code as its characters one by one, with the letter A kept a letter.

    espeak reads a lone "A" as the article "uh"; glued to the next character ("A7",
    "A-X") it says the letter.
    """
    chars = [c for c in code if c != "-"]
    out: list[str] = []
    for i, ch in enumerate(chars):
        out.append(ch)
        if i + 1 < len(chars):
            if ch == "A":
                out.append("" if chars[i + 1].isdigit() else "-")
            else:
                out.append(" ")
    return "".join(out)


_CODE_CUE = re.compile(r"(?:\bnumber|\bID|\bcode|\border|\bref|\bticket|\btracking)\s*$", re.I)


def _code(m: re.Match[str]) -> str:
    code = m[0]
    runs = len(re.findall(r"[A-Z]+|\d+", code))
    cue = _CODE_CUE.search(m.string, max(0, m.start() - 12), m.start()) is not None
    if runs >= 3 or (cue and "-" in code) or re.search(r"-[A-Z]\b", code):
        return _spell(code)
    return code


def _hashtag(m: re.Match[str]) -> str:
    tag = m[1]
    if any(c.isdigit() for c in tag):
        digits_only = tag.isdigit()
        # Order numbers are read digit by digit; "#1" is "number one".
        if digits_only and len(tag) >= 4:
            return "number " + " ".join(tag)
        return f"number {tag}"
    return "hashtag " + re.sub(r"(?<=[a-z])(?=[A-Z])", " ", tag)


def _url(m: re.Match[str]) -> str:
    url = re.sub(r"^https?://", "", m[0], flags=re.I)
    spoken = {".": " dot ", "/": " slash ", "?": " question mark ", "=": " equals ",
              "&": " and ", "-": " dash ", "_": " underscore ", ":": " colon ",
              "#": " hash ", "%": " percent ", "~": " tilde ", "+": " plus "}
    return re.sub(r" +", " ", "".join(spoken.get(c, c) for c in url)).strip()


# An e-mail address's signs, said; its words and digits espeak reads as they are.
_EMAIL_SIGNS = {".": " dot ", "@": " at ", "-": " dash ", "_": " underscore ", "+": " plus "}


def _email(address: str) -> str:
    return re.sub(r" +", " ", "".join(_EMAIL_SIGNS.get(c, c) for c in address)).strip()


_TITLES = {"dr": "Doctor", "mr": "Mister", "mrs": "Missus", "ms": "Miz", "prof": "Professor",
           "st": "Saint", "mt": "Mount", "gen": "General", "sgt": "Sergeant", "capt": "Captain",
           "gov": "Governor", "sen": "Senator", "rep": "Representative", "rev": "Reverend"}
# "Elm Dr." is left alone: "Dr." after a capitalised word is as often a title ("Hi Dr. Who").
_STREETS = {"st": "Street", "ave": "Avenue", "rd": "Road", "blvd": "Boulevard"}
_ABBREVIATIONS = {"etc": "et cetera", "e.g": "for example", "i.e": "that is", "vs": "versus",
                  "approx": "approximately", "jr": "Junior", "sr": "Senior",
                  "dept": "Department", "inc": "Incorporated", "ltd": "Limited"}


def _title(m: re.Match[str]) -> str:
    return _TITLES[m[1].lower()] + " "


# The word a street's abbreviation follows: a name or a number ("Main St", "5th Ave").
_STREET_NAME = re.compile(r"(?:\b[A-Z][a-z]+|\b\d+(?:st|nd|rd|th)?)\s\Z")
# Looked for this far back: longer is no street's name.
_STREET_NAME_CHARS = 40


def _street(m: re.Match[str]) -> str:
    # The name is looked at, not taken into the match: an abbreviation that is itself the
    # word before the next ("Main St St.") is then read as a street too, as a second pass
    # reads it once the first is "Street".
    if _STREET_NAME.search(m.string, max(0, m.start() - _STREET_NAME_CHARS), m.start()):
        return _keep_stop(m, _STREETS[m[1].lower()])
    return m[0]


def _abbreviation(m: re.Match[str]) -> str:
    return _keep_stop(m, _ABBREVIATIONS[m[1].lower()])


def _decade_words(m: re.Match[str]) -> str:
    if m[1]:
        century, tens = divmod(int(m[1]), 100)
        if 11 <= century <= 19 and tens % 10 == 0:
            if tens == 0:
                return f"{_words(century)} hundreds"
            return f"{_words(century)} {_decade(tens // 10)}"
        return m[0]
    return _decade(int(m[2]) // 10)


_NUM = r"(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?"
# A sum may start at its point (".5$", "$.50"): were it not the money rules', the ".5" rule
# would take the number and leave the sign behind for a second reading to join to "5".
_AMOUNT = rf"(?:{_NUM}|\.\d+)"
_UNIT_ALTERNATION = "|".join(re.escape(u) for u, _, _ in _UNITS)

# What the rules below read a number with, as typed or as they say it.
_UNIT_WORDS = "|".join(sorted({name.split()[0] for _, one, many in _UNITS for name in (one, many)},
                              key=len, reverse=True))
_MEASURED = rf"\s?(?:{_UNIT_ALTERNATION})(?![\w/°])|\s?%|\s(?:times|percent|{_UNIT_WORDS})\b"
# The day after a month's name ("Nov 29", "Nov 29th"), its suffix left out of it: not an
# hour or a measure, as typed or as the rules below say them ("Nov 8pm" → "Nov 8 PM",
# which a second reading said "November 8th PM"; "Nov 8:00" → "Nov 8 o'clock"; "May 5km"
# → "May 5 kilometers"; "Nov 10x" → "Nov 10 times"), nor the first of digits said one by
# one ("5 5 5, 1 2 3").
_DAY_AFTER_MONTH = (r"(?:0?[1-9]|[12]\d|3[01])"
                    r"(?=(?:st|nd|rd|th)\b|\b(?!\s(?:[AaPp]\.?[Mm]\b|o'clock\b|oh\s\d)"
                    rf"|{_MEASURED}))"
                    r"(?:st|nd|rd|th)?\b(?!:)(?!\s\d,?\s\d\b)")
_MONTH_GATE = tuple(m.capitalize() for m in _MONTH_OF if len(m) == 3)
_Rule = tuple[tuple[str, ...], re.Pattern[str], str | Callable[[re.Match[str]], str]]

# Applied in order to the text with its e-mail addresses and URLs already said; each
# rule's output is plain words and digits that no rule (its own included) matches again.
# The first field lists strings of which the rule needs one: a substring test skips a
# regex pass that would cost far more on a long paste.
_RULES: list[_Rule] = [
    (("-",), re.compile(r"(\d{4})(?<!\w\d{4})-(\d{2})-(\d{2})\b"), _iso_date),
    (("/",), re.compile(r"(?<![\d/])\b(\d{1,2})/(\d{1,2})/(\d{4}|\d{2})\b(?!/)"), _slash_date),
    # A day is no digit of a number said digit by digit, as the phone rule below and
    # spelled codes say them ("Nov 555-123-4567" → "Nov 5 5 5, 1 2 3, 4 5 6 7", whose
    # "Nov 5" a second reading took for November 5th; "4 5 6 7 Nov").
    (_MONTH_GATE, re.compile(rf"\b({_MONTH})\.?\s({_DAY_AFTER_MONTH})(?:,?\s(\d{{4}})\b)?"),
     _month_day),
    # Nor a month that has its day after it: "Top 3 2026-11-29" was "Top the 3rd of
    # November 29th, 2026", and "x2 2026-11-29" "times 2 November 29th, 2026", whose
    # "2 November" a second reading took for the 2nd.
    (_MONTH_GATE,
     re.compile(rf"(?<!\d\s\d\s)\b(\d{{1,2}})(?:st|nd|rd|th)?\s({_MONTH})\b"
                rf"(?!\.?\s{_DAY_AFTER_MONTH})\.?(?:,?\s(\d{{4}})\b)?"),
     _day_month),
    (_MONTH_GATE, re.compile(rf"\b({_MONTH})\.?(?=\s\d{{4}}\b)"),
     lambda m: _MONTHS[_MONTH_OF[m[1].lower()] - 1]),
    # A phone number ends where its digits do, a unit or "x" glued to it or not: the rules
    # below would read "4567km/h" and leave "555-123-4567 kilometers per hour" for a second
    # reading to say the number.
    (("-", "."), re.compile(r"(?<![\w.])(?:\+?1[ .-])?\(?(\d{3})\)?[ .-]?(\d{3})[.-](\d{4})"
                            r"(?![\d_])"),
     lambda m: ", ".join(" ".join(group) for group in m.groups())),
    # "No." before a number is said before the rules below read the number: "No.0$" was
    # "number 0$", whose "0$" only a second reading said "0 dollars" ("No.1.2.3" the same).
    (("o.",), re.compile(r"\b[Nn]o\.\s?(?=\d)"), "number "),
    # A number that starts at its point is said before the rules below read what follows
    # its first part: ".5.5$" was "point 5.5$", whose "5.5$" only a second reading said
    # with its sign ("5.5 dollars"; ".5.5.5", ".5 pm" the same). One right after or before
    # a currency sign is a sum the money rules say ("$.50" → "50 cents", "-.5$" → "minus
    # point 5 dollars").
    ((".",), re.compile(r"\.(?<![\w.$€£¥₹]\.)(?<![$€£¥₹]\s\.)(\d+)\b"
                        r"(?!\s?[$£¥₹](?!\w))"), _point),
    # Before the time and money rules: a number said in parts ("v2.13.1$", "0.000.00 a.m.")
    # ends in one they read with what follows it ("1$", "00 a.m."), on this pass rather
    # than the next. After the phone rule, whose "555.123.4567" is no number in parts.
    (("v", "V"), re.compile(r"\b(version\s)?v(\d+(?:\.\d+)+)\b", re.I),
     lambda m: (m[1] or "version ") + m[2].replace(".", " point ")),
    ((".",), re.compile(r"(?<![\w.])\d{1,3}(?:\.\d{1,3}){3}\b(?!\.\d)"),
     lambda m: m[0].replace(".", " dot ")),
    ((".",), re.compile(r"(?<![\w.])\d+(?:\.\d+){2,}\b"), lambda m: m[0].replace(".", " point ")),
    # A period is taken only as the last of a dotted "a.m." (said again where a sentence
    # ends there): one after "am" or after that one is typed punctuation and stays, or a
    # second reading, seeing "AM.", would take it ("0a.m.. $" → "0 AM. $" → "0 AM $").
    # One starting an ellipsis is the ellipsis's ("a.m..." → "AM...").
    ((":",), re.compile(r"(?<![\w:.])(\d{1,2}):(\d{2})(?!:?\d)"
                        r"(?:\s?([ap])(?:\.m\b(?:\.(?!\.\.))?|m\b))?", re.I),
     _time),
    ((), re.compile(r"(?<![\w:.])(\d{1,2})()\s?([ap])(?:\.m(?=\.)(?:\.(?!\.\.))?|m\b)", re.I),
     _time),
    # Not after another currency sign: "$$0" would be "$0 dollars", then "0 dollars dollars".
    (tuple(_CURRENCY), re.compile(rf"(?<![\w.$€£¥₹])([-−])?([$€£¥₹])\s?({_AMOUNT})"
                                  r"(?:\s?(thousand|million|billion|trillion|bn|mn|tn|"
                                  r"[kKmMbBtT])\b)?"),
     _money_before),
    (("$", "£", "¥", "₹"), re.compile(rf"(?<![\w.])([-−])?({_AMOUNT})\s?([$£¥₹])(?!\w)"),
     _money_after),
    # Not before a currency sign: "x2$" would be "times 2$", then "times 2 dollars"; the
    # money rule takes one a space away too ("x2 $"). Before the rules that read a number
    # with what follows it: "x2°C" was "times 2°C", which a second reading said "times 2
    # degrees Celsius" ("x2%", "x2-5", "x1/2" the same).
    (("x",), re.compile(r"x(?<![\w.]x)(?!86|64)(\d{1,2})\b(?!\s?[$£¥₹])"),
     lambda m: f"times {m[1]}"),
    (("-", "–", "—"),
     re.compile(r"(?<![\w.,–—-])(\d+(?:\.\d+)?)\s?[-–—]\s?(\d+(?:\.\d+)?)"
                r"(?![\d_]|[.,–—-]\d|-?[A-Za-z]*\d)(\s*=)?"),
     _range),
    # Not a decade that ends a chain of numbers the range rule above left alone for it
    # ("0-0-90s"): said as words, it would no longer stop that rule on a second reading
    # ("0-0-nineties" → "0 to 0-nineties").
    (("0s",), re.compile(r"(?<!\d[.,–—-])(?:\b(1\d{3})s\b|(?<![\w'])'?([2-9]0)s\b)"),
     _decade_words),
    ((), re.compile(r"\b((?:[Ii]n|[Ss]ince|[Uu]ntil|[Tt]ill|[Yy]ear|[Cc]irca|[Bb]efore|[Aa]fter|"
                    r"[Dd]uring|[Ee]arly|[Ll]ate|[Mm]id|[Ff]rom)[\s-])(1[1-9]\d\d)\b(?![.,]\d)"),
     lambda m: m[1] + _year(int(m[2]))),
    (("/",), re.compile(r"(?<![\w./])(?:(\d+)\s)?(\d{1,2})/(\d{1,2})(?![\w/]|\.\d)"), _fraction),
    ((), re.compile(rf"(?<![\w.])({_NUM})\s?({_UNIT_ALTERNATION})(?![\w/°])"), _unit),
    (("%",), re.compile(rf"(?<![\w.])({_NUM})\s?%"), lambda m: f"{m[1]} percent"),
    (("x",), re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)x\b"), lambda m: f"{m[1]} times"),
    (("~",), re.compile(r"~(?<![\w~]~)\s?(?=\d)"), "about "),
    (("#",), re.compile(r"#(?<![\w#&]#)([A-Za-z0-9][\w-]*)"), _hashtag),
    ((".",), re.compile(r"\b(Dr|Mr|Mrs|Ms|Prof|St|Mt|Gen|Sgt|Capt|Gov|Sen|Rep|Rev)\.\s+(?=[A-Z])"),
     _title),
    (("St", "Ave", "Rd", "Blvd"),
     re.compile(r"(?<=\s)(St|Ave|Rd|Blvd)\b\.?"), _street),
    ((".", "vs"), re.compile(r"(?<![\w.])(etc|e\.g|i\.e|vs|approx|Jr|Sr|Dept|Inc|Ltd)\.(?!\w)|"
                             r"(?<![\w.])(?-i:vs)\b(?!\.)", re.I),
     lambda m: _abbreviation(m) if m[1] else "versus"),
]
# Codes are spelled after the rules above (#A7X92 is "number A7X92" first).
_CODE = re.compile(r"(?<![\w-])(?=[A-Z0-9-]*\d)(?=[A-Z0-9-]*[A-Z])[A-Z0-9]+(?:-[A-Z0-9]+)*\b"
                   r"(?![-@])")

_PROTECTED = re.compile(
    r"(?<![\w.+-])[\w.+-]+@[\w-]+(?:\.[\w-]+)+"
    r"|(?:https?://|www\.)\S+?(?=[.,!?;:)\]\"']*(?:\s|$))",
    re.I,
)


# Every rule needs one of these in or next to what it rewrites. Running ~30 regexes over
# a long paste costs ~1 ms per rule per 20,000 characters, so the rules only see
# windows of a few words around them.
_HOT = re.compile(
    r"[\d#$€£¥₹~]|(?i:\b(?:dr|mrs?|ms|prof|st|mt|gen|sgt|capt|gov|sen|rep|rev|ave|rd|blvd|"
    r"etc|e\.g|i\.e|vs|approx|jr|sr|dept|inc|ltd)\b)"
)
# Words of context kept on each side: the widest rule ("Nov. 29th, 2026", "7:05 p.m.
# Then") reaches three words from its trigger.
_CONTEXT_WORDS = 4


def _window_start(chunk: str, at: int) -> int:
    for _ in range(_CONTEXT_WORDS):
        at = chunk.rfind(" ", 0, at)
        if at <= 0:
            return 0
    return at + 1


def _window_end(chunk: str, at: int) -> int:
    for _ in range(_CONTEXT_WORDS):
        at = chunk.find(" ", at + 1)
        if at < 0:
            return len(chunk)
    return at


def _read(text: str) -> str:
    for gate, pattern, replacement in _RULES:
        if not gate or any(needed in text for needed in gate):
            text = pattern.sub(replacement, text)
    return text


def _apply_rules(text: str) -> str:
    text = _read(text)
    spelled = _CODE.sub(_code, text)
    # A code said sign by sign leaves digits standing alone that the rules would read with
    # what follows them ("0AM0$" → "0 A-M 0$", "A7X92 km" → "A7 X 9 2 km"): they are read
    # now, as a second reading of the spoken text would read them.
    return text if spelled == text else _read(spelled)


def _rewrite(chunk: str) -> list[tuple[str, str]]:
    """(typed, spoken) pairs tiling `chunk`: what no rule touched as it is, and each window
    around a trigger with what the rules made of it."""
    out: list[tuple[str, str]] = []
    done = 0
    window: list[int] | None = None
    for hot in _HOT.finditer(chunk):
        if window is not None and hot.start() <= window[1]:
            if window[1] < len(chunk):
                window[1] = max(window[1], _window_end(chunk, hot.end()))
            continue
        start = _window_start(chunk, hot.start())
        if window is not None and start <= window[1]:
            window[1] = _window_end(chunk, hot.end())
            continue
        if window is not None:
            typed = chunk[window[0]:window[1]]
            out += [(chunk[done:window[0]],) * 2, (typed, _apply_rules(typed))]
            done = window[1]
        window = [start, _window_end(chunk, hot.end())]
    if window is not None:
        typed = chunk[window[0]:window[1]]
        out += [(chunk[done:window[0]],) * 2, (typed, _apply_rules(typed))]
        done = window[1]
    out.append((chunk[done:],) * 2)
    return out


_TOKENS = re.compile(r"\S+|\s+")


def word_pairs(typed: str, spoken: str) -> list[tuple[str, str]]:
    """(typed, spoken) pairs tiling both texts: each word the same in both a pair of its
    own, each stretch that differs ("$5" / "5 dollars") one pair (difflib on words and
    the spaces between them)."""
    a, b = _TOKENS.findall(typed), _TOKENS.findall(spoken)
    pairs: list[tuple[str, str]] = []
    # Only a word is a landmark; a gap is matched only beside one. A rewrite that takes in
    # a line break ("$\n5\n" → "5 dollars\n") would otherwise have its typed line break
    # matched with the spoken one after it, and the typed words between with nothing said.
    matcher = SequenceMatcher(str.isspace, a, b, autojunk=False)
    for op, i0, i1, j0, j1 in matcher.get_opcodes():
        if op == "equal":
            pairs += [(token, token) for token in a[i0:i1]]
        else:
            pairs.append(("".join(a[i0:i1]), "".join(b[j0:j1])))
    return pairs


def _as_typed(text: str, said: str, pairs: list[tuple[str, str]],
              addresses: list[tuple[int, int, int, int]]) -> list[tuple[str, str]]:
    """`pairs`, which tile `said` (`text` with its addresses said), with what was typed for
    each. Pairs that share an address's words are one; where the rules left all of them as
    they were, each address is a pair of its own. `addresses`: each one's start and end
    in `said`, then in `text`."""
    out: list[tuple[str, str]] = []
    group: list[tuple[str, str]] = []
    k = first = 0  # the first address not wholly behind, the first of the group
    at = typed_at = 0
    for part, spoken in pairs:
        at += len(part)
        group.append((part, spoken))
        while k < len(addresses) and addresses[k][1] <= at:
            k += 1
        if k < len(addresses) and addresses[k][0] < at:
            continue
        typed_end = at + (addresses[k - 1][3] - addresses[k - 1][1] if k else 0)
        if all(before == after for before, after in group):
            for start, end, typed_start, typed_stop in addresses[first:k]:
                out += [(text[typed_at:typed_start],) * 2,
                        (text[typed_start:typed_stop], said[start:end])]
                typed_at = typed_stop
            out.append((text[typed_at:typed_end],) * 2)
        else:
            out.append((text[typed_at:typed_end], "".join(after for _, after in group)))
        typed_at, group, first = typed_end, [], k
    return out


def normalize_spans(text: str) -> list[tuple[str, str]]:
    """(typed, spoken) pairs tiling `text` and `normalize(text)`, each rewrite (a sum of
    money, a date, an address) a pair of its own and every other word one of its own:
    what was typed behind each part of what is said."""
    # Addresses are said first, and the rules read their words with the words around
    # them, as a second reading would: read apart, "#https://a.com" was "#a dot com", whose
    # "#a" only the second reading took for a hashtag.
    parts: list[str] = []
    addresses: list[tuple[int, int, int, int]] = []
    start = at = 0
    for m in _PROTECTED.finditer(text):
        words = _url(m) if m[0].lower().startswith(("http", "www")) else _email(m[0])
        at += m.start() - start
        addresses.append((at, at + len(words), m.start(), m.end()))
        parts += [text[start:m.start()], words]
        at += len(words)
        start = m.end()
    parts.append(text[start:])
    said = "".join(parts)
    pairs = _by_word(_rewrite(said))
    return _by_word(_as_typed(text, said, pairs, addresses)) if addresses else pairs


def _by_word(pairs: list[tuple[str, str]]) -> list[tuple[str, str]]:
    # Text said as typed is a pair a word (with its trailing space), so a sentence piece
    # cut from it takes only its own words (TypedText).
    return [pair for typed, spoken in pairs if typed or spoken for pair in
            (word_pairs(typed, spoken) if typed != spoken
             else [(w, w) for w in re.findall(r"\S+\s*|\s+", typed)])]


def normalize(text: str) -> str:
    """`text` with what espeak-ng would misread written out as a person says it."""
    return "".join(spoken for _, spoken in normalize_spans(text))


class TypedText:
    """The typed text behind each piece of a normalized text, asked piece by piece in
    order (the pieces a sentence splitter cut from `normalize(text)`, spaces between them
    dropped). A rewrite belongs to the piece it starts in, and what was typed after the
    last word said to the last piece."""

    def __init__(self, spans: list[tuple[str, str]]) -> None:
        self._spans = spans
        self._spoken = "".join(spoken for _, spoken in spans)
        self._starts = []
        at = 0
        for _, spoken in spans:
            self._starts.append(at)
            at += len(spoken)
        self._said_end = len(self._spoken.rstrip())  # no piece is found past this
        self._cursor = 0  # where the next piece is looked for in the spoken text
        self._span = 0  # the first span not given to a piece yet

    def typed(self, piece: str) -> str:
        """What was typed for `piece`, the next piece of the spoken text ("" if it is not)."""
        start = self._spoken.find(piece, self._cursor)
        if not piece or start < 0:
            return ""
        end = start + len(piece)
        k = self._span
        # A typed part with nothing said for it, right at the piece's end, is the piece's.
        while k < len(self._spans) and (self._starts[k] < end or
                                        (self._starts[k] == end and not self._spans[k][1])):
            k += 1
        # Nor is one past a line break or a space after the last piece: no piece comes to
        # take it ("5 km km\n" pairs the typed " km\n" with the spoken "\n").
        if end >= self._said_end:
            k = len(self._spans)
        typed = "".join(typed for typed, _ in self._spans[self._span:k])
        self._span, self._cursor = k, end
        return typed.strip()
