"""IFBench's 11 single-prompt test constraints (`custom:*`): each belongs to one fixed question (count in
sevens, list Africa's countries backwards, CSV tables, Napoleon's battle dates...) and checks the answer's
shape, and sometimes its content, the way the reference checker does. None takes kwargs. Imported for its side
effect: registration in `registry.REGISTRY`.
"""

from __future__ import annotations

import csv
import io
import re
import string
import unicodedata

from cascade_cli.verifiers.instruction import text as measure
from cascade_cli.verifiers.instruction.registry import instruction

# Capitals of European countries north of 45 degrees, from the highest latitude down (the reference's answer).
_NORTHERN_CAPITALS = (
    "Reykjavik Helsinki Oslo Tallinn Stockholm Riga Moscow Copenhagen Vilnius Minsk Dublin Berlin Amsterdam "
    "Warsaw London Brussels Prague Luxembourg Paris Vienna Bratislava Budapest Vaduz Chisinau Bern Ljubljana "
    "Zagreb"
)
NORTHERN_CAPITALS = tuple(_NORTHERN_CAPITALS.split())
_STRIP_LINE = string.punctuation + " "


def _ascii(text: str) -> str:
    """Diacritics dropped ('São Tomé' -> 'Sao Tome'), then anything outside ASCII."""
    return unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")


@instruction("custom:multiples")
def multiples_of_seven(text: str) -> bool:
    """'Count from 10 to 50 but only print multiples of 7': the numbers are exactly 14, 21, ..., 49."""
    return re.findall(r"\d+", text.replace(",", ", ")) == [str(n) for n in range(14, 51, 7)]


@instruction("custom:mcq_count_length")
def four_growing_questions(text: str) -> bool:
    """Four 'Question N' blocks, nothing before the first, five `A.`-`E.` options each, question texts
    strictly longer each time."""
    if not text.startswith("Question"):
        return False
    blocks = [block.strip() for block in re.split(r"\n*(?:Question \d+[\.|\):;]?\s*)", text) if block.strip()]
    if len(blocks) != 4:
        return False
    lengths = []
    for block in blocks:
        question, options = "", 0
        for line in block.split("\n"):
            if re.match(r"^[A-Ea-e][\.|\)]\s*\w+", line.strip()):
                options += 1
            elif not options:
                question += " " + line.strip()
        if options != 5:
            return False
        lengths.append(len(question.strip()))
    return all(a < b for a, b in zip(lengths, lengths[1:], strict=False))


@instruction("custom:reverse_newline")
def africa_reverse_lines(text: str) -> bool:
    """From the first line naming Zimbabwe on, at least 52 non-blank lines in reverse alphabetical order."""
    lines = [line.strip(_STRIP_LINE) for line in text.split("\n") if line.strip(_STRIP_LINE)]
    start = next((i for i, line in enumerate(lines) if "Zimbabwe" in line), None)
    if start is None or len(lines) - start < 52:
        return False
    names = [_ascii(line) for line in lines[start:]]
    return names == sorted(names, reverse=True)


@instruction("custom:word_reverse")
def words_reversed(text: str) -> bool:
    """The words, read back to front (punctuation dropped, lower-cased), mention 'bald eagle' and make one
    sentence."""
    forward = " ".join(text.lower().strip().translate(measure.DROP_PUNCTUATION).split()[::-1])
    return "bald eagle" in forward and forward in measure.split_sentences_by_rules(forward)


@instruction("custom:character_reverse")
def letters_reversed(text: str) -> bool:
    return "elgae dlab" in text.lower()


@instruction("custom:sentence_alphabet")
def alphabet_story(text: str) -> bool:
    """26 sentences whose first words start with a, b, ..., z (case-insensitively)."""
    sentences = measure.split_sentences_by_rules(text)
    if len(sentences) != 26:
        return False
    for letter, sentence in zip(string.ascii_lowercase, sentences, strict=True):
        first = sentence.split()
        if not first or first[0][0].lower() != letter:
            return False
    return True


@instruction("custom:european_capitals_sort")
def northern_capitals(text: str) -> bool:
    """Exactly the 27 capitals, comma-separated, in the order of NORTHERN_CAPITALS (diacritics ignored)."""
    capitals = [capital.strip() for capital in _ascii(text).split(",") if capital.strip()]
    return tuple(capitals) == NORTHERN_CAPITALS


def _csv_rows(text: str, delimiter: str = ",") -> list[list[str]]:
    return list(csv.reader(io.StringIO(text), delimiter=delimiter))


def _header_matches(text: str, columns: tuple[str, ...], separator: str) -> bool:
    """The first line names the columns, each bare or in double quotes, joined by `separator`."""
    pattern = separator.join(f'({name}|"{name}")' for name in columns)
    return re.match(f"^{pattern}$", text.split("\n")[0].strip()) is not None


@instruction("custom:csv_city")
def city_csv(text: str) -> bool:
    """A comma-separated table: the header ID, Country, City, Year, Count and 7 rows of 5 fields."""
    rows = _csv_rows(text)
    return len(rows) == 8 and rows[0] == ["ID", "Country", "City", "Year", "Count"] and all(
        len(row) == 5 for row in rows[1:]
    )


@instruction("custom:csv_special_character")
def special_character_csv(text: str) -> bool:
    """A comma-separated table with the product header and 14 rows of 5 fields, where a quoted field holds a
    character that is neither a word character nor a space. Like the reference, quotes are tripled before
    parsing (so they survive in the fields) and the rows are checked only up to the first such field."""
    columns = ("ProductID", "Category", "Brand", "Price", "Stock")
    if not _header_matches(text, columns, ",[ \t]*"):
        return False
    rows = _csv_rows(text.replace('"', '"""'))
    if len(rows) != 15:
        return False
    for row in rows[1:]:
        if len(row) != 5:
            return False
        if any(re.match(r'".*[^\d\w\s].*"', field) for field in row):
            return True
    return False


@instruction("custom:csv_quotes")
def quoted_tsv(text: str) -> bool:
    """A tab-separated table with the student header and 3 rows, every field (header included) in double
    quotes."""
    columns = ("StudentID", "Subject", "Grade", "Semester", "Score")
    if not _header_matches(text, columns, "\t *"):
        return False
    rows = _csv_rows(text.replace('"', '"""'), delimiter="\t")
    if len(rows) != 4:
        return False
    for row in rows:
        if len(row) != 5:
            return False
        # an empty field raises IndexError in the reference, which scores it as not followed
        if not all(field.strip()[:1] == '"' and field.strip()[-1:] == '"' for field in row):
            return False
    return True


_DAYS_IN_MONTH = {1: 31, 2: 29, 3: 31, 4: 30, 5: 31, 6: 30, 7: 31, 8: 31, 9: 30, 10: 31, 11: 30, 12: 31}


@instruction("custom:date_format_list")
def napoleon_dates(text: str) -> bool:
    """Comma-separated YYYY-MM-DD dates within Napoleon's life (1769-1821), each a possible calendar day."""
    for date in text.strip().split(","):
        date = date.strip()
        if not re.match(r"^\d{4}-\d{2}-\d{2}$", date):
            return False
        year, month, day = (int(part) for part in date.split("-"))
        # month 00 passes with any day, as in the reference
        if not 1769 <= year <= 1821 or month > 12 or day > _DAYS_IN_MONTH.get(month, 99):
            return False
    return True
