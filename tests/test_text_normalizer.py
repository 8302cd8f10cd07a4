"""The normalizer: typed numbers, money, dates, units, codes and abbreviations as spoken."""

import re
import time

import pytest

from pipeline.text.input import split_sentences
from pipeline.text.normalizer import TypedText, normalize, normalize_spans

CASES = [
    # Decimals: espeak reads "3.5" well, a leading point badly.
    ("3.5", "3.5"),
    ("0.75", "0.75"),
    (".5", "point 5"),
    ("only .75 left", "only point 7 5 left"),
    # Currency
    ("$5", "5 dollars"),
    ("$1", "1 dollar"),
    ("$3.50", "3 dollars and 50 cents"),
    ("$0.99", "99 cents"),
    ("$1.01", "1 dollar and 1 cent"),
    ("€20", "20 euros"),
    ("£5.01", "5 pounds and 1 penny"),
    ("£1.2m", "1.2 million pounds"),
    ("$5k", "5 thousand dollars"),
    ("$2B", "2 billion dollars"),
    ("$2 billion", "2 billion dollars"),
    ("€1.5bn", "1.5 billion euros"),
    ("$1,000,000", "1,000,000 dollars"),
    ("-$5", "minus 5 dollars"),
    ("¥500", "500 yen"),
    ("₹100", "100 rupees"),
    ("5$", "5 dollars"),
    # A sum that starts at its point is money all the same, its point read as ".5" is.
    (".5$", "point 5 dollars"),
    ("$.50", "50 cents"),
    ("€.5", "point 5 euros"),
    ("-.5$", "minus point 5 dollars"),
    (".5\n$Hz", "point 5\n$Hz"),
    # A sum already named keeps the sign before it: that sign is one of its own.
    ("$ $0", "$ 0 dollars"),
    ("$5 dollars", "$5 dollars"),
    ("I paid $5, then left.", "I paid 5 dollars, then left."),
    # Percentages: espeak reads them right, but the sign is a word of its own to time
    # (captions show "3.5%" over the words "3.5 percent").
    ("45%", "45 percent"),
    ("3.5%", "3.5 percent"),
    ("up 1,200 % today", "up 1,200 percent today"),
    # Times
    ("3:45", "3:45"),
    ("3:45pm", "3:45 PM"),
    ("3:00", "3 o'clock"),
    ("3:05", "3 oh 5"),
    ("23:00", "twenty three hundred"),
    ("00:00", "midnight"),
    ("10 a.m.", "10 AM."),
    ("10am", "10 AM"),
    ("at 10 a.m. tomorrow", "at 10 AM tomorrow"),
    ("Meet at 3:00 p.m. on Friday", "Meet at 3 PM on Friday"),
    ("Call at 10 a.m. Thanks.", "Call at 10 AM. Thanks."),
    ("at 12:05am", "at 12 oh 5 AM"),
    # Only a dotted "a.m."'s own period is taken: one typed after it, or after "am", stays.
    ("We start at 10 a.m.. Then", "We start at 10 AM. Then"),
    ("0a.m.. $", "0 AM. $"),
    ("live at 10am. then", "live at 10 AM. then"),
    ("at 10 a.m... then", "at 10 AM... then"),
    # Dates
    ("2026-11-29", "November 29th, 2026"),
    ("11/29/2026", "November 29th, 2026"),
    ("29/11/2026", "November 29th, 2026"),
    ("5/6/1985", "May 6th, nineteen eighty five"),
    ("29 Nov 2026", "the 29th of November 2026"),
    ("Nov. 29th", "November 29th"),
    ("Jan 5, 2027", "January 5th, 2027"),
    ("in Nov 2026", "in November 2026"),
    ("2026-13-45", "2026-13-45"),
    # A phone number's digits are no day of the month beside them.
    ("Nov 555-123-4567", "Nov 5 5 5, 1 2 3, 4 5 6 7"),
    ("call 555-123-4567 Nov 5", "call 5 5 5, 1 2 3, 4 5 6 7 November 5th"),
    ("Nov 5 555-123-4567", "November 5th 5 5 5, 1 2 3, 4 5 6 7"),
    ("Dec 5 8 PM", "December 5th 8 PM"),
    # Nor is an hour.
    ("Nov 8pm", "Nov 8 PM"),
    ("Nov 8:00", "Nov 8 o'clock"),
    ("Nov 8th 8 PM", "November 8th 8 PM"),
    ("on 5 Nov 8 PM", "on the 5th of November 8 PM"),
    # Nor a measure.
    ("the May 5km run", "the May 5 kilometers run"),
    ("Nov 5%", "Nov 5 percent"),
    # A number before a month that has its day is no day of it.
    ("Top 3 2026-11-29", "Top 3 November 29th, 2026"),
    ("5 Nov, 12 people", "the 5th of November, 12 people"),
    ("5 Nov. 40 people", "the 5th of November 40 people"),
    # Ordinals are already right.
    ("1st", "1st"),
    ("22nd", "22nd"),
    # Years: only where something says it is one, and only where espeak is wrong.
    ("1999", "1999"),
    ("in 1999", "in nineteen ninety nine"),
    ("In 1999, we left.", "In nineteen ninety nine, we left."),
    ("since 1905", "since nineteen oh five"),
    ("in 2005", "in 2005"),
    ("the 1990s", "the nineteen nineties"),
    ("the 1900s", "the nineteen hundreds"),
    ("the 90s", "the nineties"),
    ("the '80s", "the eighties"),
    ("the mid-90s", "the mid-nineties"),
    ("the 80s-90s", "the eighties-nineties"),
    # The last of a chain of numbers the range rule leaves alone is left alone too.
    ("0-0-90s", "0-0-90s"),
    # Ranges
    ("5-10", "5 to 10"),
    ("pages 5-10.", "pages 5 to 10."),
    ("1990–2000", "nineteen ninety to 2000"),
    ("1.5-2.5 kg", "1.5 to 2.5 kilograms"),
    ("5-10km", "5 to 10 kilometers"),
    ("5 - 3 = 2", "5 minus 3 = 2"),
    # Units
    ("5km", "5 kilometers"),
    ("1 km", "1 kilometer"),
    ("3.2 kg", "3.2 kilograms"),
    ("100 km/h", "100 kilometers per hour"),
    ("20°C", "20 degrees Celsius"),
    ("-20°C", "-20 degrees Celsius"),
    ("68°F", "68 degrees Fahrenheit"),
    ("5 GB", "5 gigabytes"),
    ("60fps", "60 frames per second"),
    ("10ms", "10 milliseconds"),
    ("5 min", "5 minutes"),
    ("10 sec", "10 seconds"),
    ("5 secs", "5 seconds"),
    ("5 oz", "5 ounces"),
    ("6 ft", "6 feet"),
    ("5000mAh", "5000 milliamp hours"),
    ("24h", "24 hours"),
    ("5 mph", "5 mph"),
    ("5 GHz", "5 GHz"),
    # E-mail addresses: read right, written out as the words captions time them by;
    # URLs are misread.
    ("alice.smith@example.com", "alice dot smith at example dot com"),
    ("Mail bob99@x.com.", "Mail bob99 at x dot com."),
    ("a_b+c-d@my-host.io", "a underscore b plus c dash d at my dash host dot io"),
    ("https://example.com/path?x=1", "example dot com slash path question mark x equals 1"),
    ("See https://a.io/x-y_z, then go.", "See a dot io slash x dash y underscore z, then go."),
    ("www.foo.org", "www dot foo dot org"),
    # An address's words are read with the words around them, as any typed words are.
    ("#https://a.io", "hashtag a dot io"),
    ("https://a.io/5km", "a dot io slash 5 kilometers"),
    # Codes
    ("#A7X92", "number A7 X 9 2"),
    ("A7X92", "A7 X 9 2"),
    ("Order #A7X92 arrives in 3.5 hours", "Order number A7 X 9 2 arrives in 3.5 hours"),
    ("ID 4471-B", "ID 4 4 7 1 B"),
    ("ticket ABC-123", "ticket A-B C 1 2 3"),
    # A code's last digit, said alone, is read with what follows it.
    ("A7X92 km", "A7 X 9 2 kilometers"),
    ("0AM0$", "0 A-M 0 dollars"),
    ("Order #4471 shipped", "Order number 4 4 7 1 shipped"),
    ("MP3", "MP3"),
    ("PS5", "PS5"),
    ("COVID-19", "COVID-19"),
    ("x86", "x86"),
    ("v2.13.1", "version 2 point 13 point 1"),
    ("Version v2.13.1", "Version 2 point 13 point 1"),
    ("192.168.0.1", "192 dot 168 dot 0 dot 1"),
    ("1.2.3", "1 point 2 point 3"),
    # Phone numbers
    ("555-123-4567", "5 5 5, 1 2 3, 4 5 6 7"),
    ("(555) 123-4567", "5 5 5, 1 2 3, 4 5 6 7"),
    ("+1 555.123.4567", "5 5 5, 1 2 3, 4 5 6 7"),
    # Abbreviations
    ("Dr. Smith arrived.", "Doctor Smith arrived."),
    ("Mr. Jones", "Mister Jones"),
    ("Mrs. Jones", "Missus Jones"),
    ("Prof. Xavier", "Professor Xavier"),
    ("St. Louis", "Saint Louis"),
    ("Mt. Everest", "Mount Everest"),
    ("Main St.", "Main Street."),
    ("Main St. now", "Main Street now"),
    ("5th Ave. is busy", "5th Avenue is busy"),
    # An abbreviation after a name is a street, after another abbreviation too.
    ("Main St St.", "Main Street Street."),
    ("apples, etc.", "apples, et cetera."),
    ("apples, etc. and pears", "apples, et cetera and pears"),
    ("e.g. this", "for example this"),
    ("e.g., this", "for example, this"),
    ("i.e. that", "that is that"),
    ("cats vs. dogs", "cats versus dogs"),
    ("cats vs dogs", "cats versus dogs"),
    ("approx. 5", "approximately 5"),
    ("John Smith Jr. left", "John Smith Junior left"),
    ("No. 5", "number 5"),
    ("U.S. army", "U.S. army"),
    # Symbols
    ("A & B", "A & B"),
    ("1 + 2", "1 + 2"),
    ("x = 3", "x = 3"),
    ("@", "@"),
    ("#1", "number 1"),
    ("x2", "times 2"),
    ("10x faster", "10 times faster"),
    ("~5", "about 5"),
    # Fractions
    ("1/2", "one half"),
    ("3/4", "three quarters"),
    ("2/3", "two thirds"),
    ("1 1/2 cups", "1 and a half cups"),
    ("24/7", "24 7"),
    ("11/29", "11/29"),
    # Large and negative numbers are already right.
    ("1,234,567", "1,234,567"),
    ("-5", "-5"),
    ("−3.5", "−3.5"),
    # Hashtags and mentions
    ("#gaming", "hashtag gaming"),
    ("#ThrowbackThursday", "hashtag Throwback Thursday"),
    ("@streamer", "@streamer"),
    ("C# code", "C# code"),
    # Plain text is untouched.
    ("Hello, world! How are you?", "Hello, world! How are you?"),
    ("", ""),
]


@pytest.mark.parametrize(("typed", "spoken"), CASES)
def test_normalize(typed, spoken):
    assert normalize(typed) == spoken


@pytest.mark.parametrize(("typed", "spoken"), CASES)
def test_normalize_is_idempotent(typed, spoken):
    assert normalize(spoken) == spoken
    assert normalize(normalize(typed)) == normalize(typed)


def test_abbreviations_no_longer_end_a_sentence():
    typed = "Dr. Smith arrived at 10 a.m. today. Then Mr. Lee."
    assert list(split_sentences(normalize(typed))) == [
        "Doctor Smith arrived at 10 AM today.", "Then Mister Lee.",
    ]


def test_a_long_mixed_paragraph_keeps_its_words_in_order():
    text = "Dr. Smith paid $3.50 on 2026-11-29 at 3:00 p.m. for 5km of cable. " * 3
    once = (
        "Doctor Smith paid 3 dollars and 50 cents on November 29th, 2026 at 3 PM "
        "for 5 kilometers of cable."
    )
    assert normalize(text.strip()) == " ".join([once] * 3)


def test_a_long_text_reads_as_its_parts_read_alone():
    # Long text is rewritten only near its numbers and abbreviations: that must not
    # change what any part becomes.
    parts = [(t, s) for t, s in CASES if t and not t.endswith(".")]
    filler = " and the weather stayed fine all day long ; "
    text = filler.join([t for t, _ in parts] * 3)
    assert normalize(text) == filler.join([s for _, s in parts] * 3)


# Hand-written spoken forms: letters by sound ("eigh" is the letter A) so the reference
# cannot share a misreading with the normalizer's output.
SPOKEN = [
    ("Order #A7X92 arrives in 3.5 hours",
     "Order number eigh seven ex nine two arrives in three point five hours"),
    ("It costs $3.50 today.", "It costs three dollars and fifty cents today."),
    ("They raised £1.2m last year.", "They raised one point two million pounds last year."),
    ("We lost -$5 on it.", "We lost minus five dollars on it."),
    ("Meet me at 23:00.", "Meet me at twenty three hundred."),
    ("Dinner at 7:05 p.m. tonight.", "Dinner at seven oh five P M tonight."),
    ("It happened on 2026-11-29.",
     "It happened on November twenty ninth, two thousand twenty six."),
    ("Born 11/29/1999.", "Born November twenty ninth, nineteen ninety nine."),
    ("Dr. Smith drove 100 km/h.", "Doctor Smith drove one hundred kilometers per hour."),
    ("Wait 10ms or 5 secs.", "Wait ten milliseconds or five seconds."),
    ("Visit https://example.com/path?x=1 now.",
     "Visit example dot com slash path question mark x equals one now."),
    ("Install v2.13.1, e.g. today.",
     "Install version two point thirteen point one, for example today."),
    ("Call 555-123-4567.", "Call five five five, one two three, four five six seven."),
    ("Add 3/4 cup at approx. 20°C.",
     "Add three quarters cup at approximately twenty degrees Celsius."),
    ("Pages 5-10 of #gaming.", "Pages five to ten of hashtag gaming."),
    ("It was the 1990s, in 1985.", "It was the nineteen nineties, in nineteen eighty five."),
    ("ID 4471-B is 5GB.", "ID four four seven one bee is five gigabytes."),
    ("It's 10x faster at 60fps.", "It's ten times faster at sixty frames per second."),
]


@pytest.fixture(scope="module")
def phonemes():
    from piper import PiperVoice

    from pipeline.voice.phonemes import load_voice_config

    # The shipped voice's phonemizer: espeak with the voice's own settings.
    voice = PiperVoice(session=None, config=load_voice_config())

    def sounds(text: str) -> str:
        # Stress marks and word gaps are espeak's prosody for digits versus number
        # words ("pɔɪnt" vs "pˈɔɪnt"); the phonemes and sentence breaks are the reading.
        return " | ".join(re.sub(r"[ˈˌ\s]", "", "".join(s)) for s in voice.phonemize(text))

    return sounds


@pytest.mark.parametrize(("typed", "spoken"), SPOKEN)
def test_espeak_reads_the_normalized_text_as_spoken(phonemes, typed, spoken):
    assert phonemes(normalize(typed)) == phonemes(spoken)


@pytest.mark.parametrize(("typed", "spoken"), SPOKEN)
def test_espeak_misreads_the_raw_text(phonemes, typed, spoken):
    # Each case above earns its place: espeak alone gets it wrong.
    assert phonemes(typed) != phonemes(spoken)


def _cpu_ms(text: str) -> float:
    best = float("inf")
    for _ in range(3):
        t0 = time.process_time()
        normalize(text)
        best = min(best, time.process_time() - t0)
    return best * 1000


def test_a_sentence_is_normalized_in_well_under_a_millisecond():
    assert _cpu_ms("Order #A7X92 arrives in 3.5 hours, for $3.50, at 3:00 p.m. on Nov. 29th.") < 3


def test_twenty_thousand_characters_are_normalized_quickly():
    paragraph = (
        "Dr. Smith said the parcel, order #A7X92, left on 2026-11-29 and costs $3.50. "
        "It weighs 3.2 kg and travels at 100 km/h, e.g. by truck. "
        "The weather was fine and everyone in the office was in a good mood that day. "
        "See https://example.com/track?id=7 for details, or mail help@example.com. "
        "Nobody expected the delivery to take so long, but it did, as usual. "
    )
    text = (paragraph * (20_000 // len(paragraph) + 1))[:20_000]
    # The budget is 50 ms; the bound leaves room for a loaded CI machine.
    assert _cpu_ms(text) < 150


@pytest.mark.parametrize("text", ["x" * 20_000, "1" * 20_000, "1-" * 10_000, "A1" * 10_000,
                                  "#" * 20_000, "$1" * 10_000, "a@" * 10_000, "1 " * 10_000])
def test_pathological_input_stays_linear(text):
    assert _cpu_ms(text) < 300


# What espeak already read right is written out the same way: the reading does not move.
READ_AS_BEFORE = ["It rose 3.5% today.", "Up 45% on the year.",
                  "Mail alice.smith@example.com today.", "Write to bob99@x.com."]


@pytest.mark.parametrize("typed", READ_AS_BEFORE)
def test_signs_written_out_are_read_as_espeak_read_them(phonemes, typed):
    assert normalize(typed) != typed
    # The same phonemes, but that espeak flaps the t of a written "at" before a vowel
    # ("smith at example": ɾ), the American allophone of the same t.
    assert phonemes(normalize(typed)).replace("ɾ", "t") == phonemes(typed).replace("ɾ", "t")


def test_spans_pair_each_rewrite_with_what_was_typed():
    typed = "Dr. Smith paid $3.50 for 3.5% of it; mail ann.lee@example.com or see https://a.io/x."
    spans = normalize_spans(typed)
    assert "".join(t for t, _ in spans) == typed
    assert "".join(s for _, s in spans) == normalize(typed)
    assert [pair for pair in spans if pair[0] != pair[1]] == [
        ("Dr.", "Doctor"), ("$3.50", "3 dollars and 50 cents"), ("3.5%", "3.5 percent"),
        ("ann.lee@example.com", "ann dot lee at example dot com"), ("https://a.io/x", "a dot io slash x")]


def test_each_sentence_spoken_gets_the_text_typed_for_it():
    typed = ("Dr. Smith paid $3.50 on 2026-11-29 at 3:00 p.m. for 5km. Mail ann.lee@example.com, "
             "3.5% off! Then Mr. Lee left.")
    behind = TypedText(normalize_spans(typed))
    pieces = list(split_sentences(normalize(typed)))
    assert pieces[1] == "Mail ann dot lee at example dot com, 3.5 percent off!"
    assert [behind.typed(piece) for piece in pieces] == [
        "Dr. Smith paid $3.50 on 2026-11-29 at 3:00 p.m. for 5km.",
        "Mail ann.lee@example.com, 3.5% off!", "Then Mr. Lee left."]
    assert behind.typed("not a piece of it") == ""
