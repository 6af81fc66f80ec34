"""A tiny, safe partition-filter language for selecting partitions to compact.

Grammar (keywords are case-insensitive)::

    filter     := condition ("and" condition)*
    condition  := field op value
                | field "in" "(" value ("," value)* ")"
                | field "is" "null"
                | field "is" "not" "null"
    op         := "=" | "!=" | "<" | "<=" | ">" | ">="
    field      := identifier            (a Python identifier, e.g. ts_day; not a keyword)
    value      := number | 'quoted' | "quoted" | bare-word | date
    bare-word  := letters, digits and _ . : + -   (Unicode letters/digits allowed)

* ``number``: ``42``, ``-7``, ``3.5`` (a bare word that parses as an int or a float).
* ``date``: a bare ``YYYY-MM-DD`` (validated as a calendar date).
* quoted strings use ``'`` or ``"``; the quote character is escaped by doubling it (``'it''s'``).
* ``true`` / ``false`` (bare) are booleans. A bare ``null`` is rejected (write ``is null``).
* Anything else is rejected with :class:`PlanningError` naming the offending token: other operators (``==``,
  ``<>``, ``like``), ``or`` / ``not`` / other SQL keywords, ``;``, comments (``--``, ``/*``), parentheses outside
  ``in (...)``, unbalanced quotes, an empty filter.

Matching a :class:`PartitionKey` (all conditions must hold):

* A condition's field is looked up first by partition field name (``ts_day``, ``id_bucket``, ``region``), then
  by source column name among *identity* partition fields (``region`` for ``identity(region)``). If the
  partition's spec has no such field, the condition is **false**: partitions of a spec that does not partition
  by that field never match (after spec evolution, ``ts_day=...`` does not select the old unpartitioned spec's
  files).
* Null semantics are SQL's: a null partition value satisfies only ``is null``; ``=``, ``!=``, ``<`` ... and
  ``in`` are false for it.
* A date literal is compared as days since 1970-01-01 against ``day``-transform fields and against
  identity fields holding an ``int`` (Iceberg's internal representation of a ``date``); against a string
  partition value it compares as its ``YYYY-MM-DD`` text. Numbers compare numerically with int/float values and
  with decimal strings; a number against a non-numeric string compares as its text. A value of an incomparable
  type (a quoted string against an int bucket) makes the condition false.

The filter is data: :meth:`PartitionFilter.to_dict` / :meth:`PartitionFilter.from_dict` and
:meth:`PartitionFilter.conjuncts` (``(field, op, value)`` triples, dates as :class:`datetime.date`) let the Spark
side build Iceberg ``Expressions`` without any SQL text.
"""

from __future__ import annotations

import datetime as _dt
import decimal
import math
import re
from dataclasses import dataclass
from typing import Mapping, Union

from compaction.core.errors import PlanningError
from compaction.core.model import PartitionFieldValue, PartitionKey, PartitionScalar

__all__ = [
    "FilterLiteral",
    "FilterValue",
    "FilterCondition",
    "PartitionFilter",
    "parse_partition_filter",
    "COMPARISON_OPS",
]

COMPARISON_OPS: tuple[str, ...] = ("=", "!=", "<", "<=", ">", ">=")
_ALL_OPS = (*COMPARISON_OPS, "in", "is_null", "not_null")
_EPOCH = _dt.date(1970, 1, 1)

_KEYWORDS = frozenset(
    {
        "and", "or", "not", "in", "is", "null", "like", "ilike", "rlike", "regexp", "between", "exists",
        "select", "from", "where", "union", "drop", "delete", "insert", "update", "case", "when", "then",
        "else", "end", "all", "any", "xor",
    }
)  # fmt: skip
_INT_RE = re.compile(r"[+-]?[0-9]+\Z")
_FLOAT_RE = re.compile(r"[+-]?(?:[0-9]+\.[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?\Z|[+-]?[0-9]+[eE][+-]?[0-9]+\Z")
_DATE_RE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}\Z")
_WORD_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.:+-")
_OP_CHARS = frozenset("=<>!")


def _is_word_char(ch: str) -> bool:
    return ch in _WORD_CHARS or (not ch.isascii() and ch.isalnum())


def _is_identifier(text: str) -> bool:
    return text.isidentifier() and text.lower() not in _KEYWORDS

FilterValue = Union[int, float, str, bool, _dt.date]


@dataclass(frozen=True)
class FilterLiteral:
    """A typed literal. ``kind`` is one of ``int``, ``float``, ``str``, ``bool``, ``date`` (ISO text in ``text``)."""

    kind: str
    text: str

    @property
    def value(self) -> FilterValue:
        if self.kind == "int":
            return int(self.text)
        if self.kind == "float":
            return float(self.text)
        if self.kind == "bool":
            return self.text == "true"
        if self.kind == "date":
            return _dt.date.fromisoformat(self.text)
        return self.text

    def render(self) -> str:
        if self.kind == "str":
            return "'" + self.text.replace("'", "''") + "'"
        return self.text

    def to_dict(self) -> dict[str, object]:
        value = self.value
        return {"type": self.kind, "value": value.isoformat() if isinstance(value, _dt.date) else value}

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> FilterLiteral:
        kind, value = data.get("type"), data.get("value")
        if set(data) != {"type", "value"}:
            raise PlanningError(f"bad filter literal {dict(data)!r}")
        if kind == "int" and isinstance(value, int) and not isinstance(value, bool):
            return cls("int", str(value))
        if kind == "float" and isinstance(value, (int, float)) and not isinstance(value, bool):
            if math.isfinite(value):
                return cls("float", repr(float(value)))
        if kind == "bool" and isinstance(value, bool):
            return cls("bool", "true" if value else "false")
        if kind == "str" and isinstance(value, str):
            return cls("str", value)
        if kind == "date" and isinstance(value, str) and _DATE_RE.match(value):
            try:
                _dt.date.fromisoformat(value)
            except ValueError:
                pass
            else:
                return cls("date", value)
        raise PlanningError(f"bad filter literal {dict(data)!r}")


@dataclass(frozen=True)
class FilterCondition:
    """``field op values``. ``values`` has one literal for comparisons, one or more for ``in``, none for
    ``is_null`` / ``not_null``."""

    field: str
    op: str
    values: tuple[FilterLiteral, ...] = ()

    def render(self) -> str:
        if self.op == "is_null":
            return f"{self.field} is null"
        if self.op == "not_null":
            return f"{self.field} is not null"
        if self.op == "in":
            return f"{self.field} in ({', '.join(v.render() for v in self.values)})"
        return f"{self.field} {self.op} {self.values[0].render()}"

    def triple(self) -> tuple[str, str, FilterValue | tuple[FilterValue, ...] | None]:
        if self.op in ("is_null", "not_null"):
            return (self.field, self.op, None)
        if self.op == "in":
            return (self.field, self.op, tuple(v.value for v in self.values))
        return (self.field, self.op, self.values[0].value)

    def to_dict(self) -> dict[str, object]:
        return {"field": self.field, "op": self.op, "values": [v.to_dict() for v in self.values]}

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> FilterCondition:
        field, op, values = data.get("field"), data.get("op"), data.get("values")
        if set(data) != {"field", "op", "values"} or not isinstance(field, str) or not isinstance(values, list):
            raise PlanningError(f"bad filter condition {dict(data)!r}")
        if not _is_identifier(field) or op not in _ALL_OPS:
            raise PlanningError(f"bad filter condition {dict(data)!r}")
        literals = []
        for v in values:
            if not isinstance(v, Mapping):
                raise PlanningError(f"bad filter condition {dict(data)!r}")
            literals.append(FilterLiteral.from_dict(v))
        expected_ok = (
            len(literals) == 0 if op in ("is_null", "not_null") else len(literals) >= 1 if op == "in" else len(literals) == 1
        )
        if not expected_ok:
            raise PlanningError(f"bad filter condition {dict(data)!r}")
        return cls(field, str(op), tuple(literals))

    # Matching -------------------------------------------------------------------------------------------------
    def matches(self, key: PartitionKey) -> bool:
        pf = _lookup(key, self.field)
        if pf is None:
            return False
        if self.op == "is_null":
            return pf.value is None
        if self.op == "not_null":
            return pf.value is not None
        if pf.value is None:
            return False
        if self.op == "in":
            return any(_compare(pf, lit) == 0 for lit in self.values)
        cmp = _compare(pf, self.values[0])
        if cmp is None:
            return False
        if self.op == "=":
            return cmp == 0
        if self.op == "!=":
            return cmp != 0
        if self.op == "<":
            return cmp < 0
        if self.op == "<=":
            return cmp <= 0
        if self.op == ">":
            return cmp > 0
        return cmp >= 0  # ">="


def _lookup(key: PartitionKey, name: str) -> PartitionFieldValue | None:
    for pf in key.fields:
        if pf.name == name:
            return pf
    for pf in key.fields:
        if pf.transform == "identity" and pf.source_column == name:
            return pf
    return None


def _sign(a: object, b: object) -> int:
    return int(a > b) - int(a < b)  # type: ignore[operator]


def _compare(pf: PartitionFieldValue, lit: FilterLiteral) -> int | None:
    """Three-way comparison of a (non-null) partition value with a literal; ``None`` when incomparable."""
    pv: PartitionScalar = pf.value
    if isinstance(pv, bool):
        return _sign(pv, lit.value) if lit.kind == "bool" else None
    if isinstance(pv, (int, float)):
        if lit.kind in ("int", "float"):
            return _sign(pv, lit.value)
        if lit.kind == "date" and (pf.transform == "day" or (pf.transform == "identity" and isinstance(pv, int))):
            days = (_dt.date.fromisoformat(lit.text) - _EPOCH).days
            return _sign(pv, days)
        return None
    if isinstance(pv, str):
        if lit.kind in ("int", "float"):
            try:
                return _sign(decimal.Decimal(pv), decimal.Decimal(lit.text))
            except decimal.InvalidOperation:
                return _sign(pv, lit.text)
        if lit.kind in ("str", "date"):
            return _sign(pv, lit.text)
        return None
    return None


@dataclass(frozen=True)
class PartitionFilter:
    """A conjunction of :class:`FilterCondition`. Callable: ``flt(key) -> bool``."""

    conditions: tuple[FilterCondition, ...]

    def __post_init__(self) -> None:
        if not self.conditions:
            raise PlanningError("empty partition filter")

    def matches(self, key: PartitionKey) -> bool:
        return all(c.matches(key) for c in self.conditions)

    def __call__(self, key: PartitionKey) -> bool:
        return self.matches(key)

    def to_text(self) -> str:
        """Canonical text; ``parse_partition_filter(f.to_text()) == f``."""
        return " and ".join(c.render() for c in self.conditions)

    def __str__(self) -> str:
        return self.to_text()

    def conjuncts(self) -> list[tuple[str, str, FilterValue | tuple[FilterValue, ...] | None]]:
        """The conjunction as ``(field, op, value)`` triples. ``op`` is one of ``= != < <= > >= in is_null
        not_null``; ``value`` is a Python scalar (``datetime.date`` for dates), a tuple for ``in``, ``None`` for
        the null tests."""
        return [c.triple() for c in self.conditions]

    def to_dict(self) -> dict[str, object]:
        return {"text": self.to_text(), "conditions": [c.to_dict() for c in self.conditions]}

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> PartitionFilter:
        conditions = data.get("conditions")
        if set(data) - {"text", "conditions"} or not isinstance(conditions, list):
            raise PlanningError(f"bad partition filter {dict(data)!r}")
        parsed = []
        for c in conditions:
            if not isinstance(c, Mapping):
                raise PlanningError(f"bad partition filter condition {c!r}")
            parsed.append(FilterCondition.from_dict(c))
        return cls(tuple(parsed))


# --------------------------------------------------------------------------------------------------------------
# Tokenizer / parser


@dataclass(frozen=True)
class _Token:
    kind: str  # "word", "str", "op", "(", ")", ","
    text: str
    pos: int


def _bad(token: str, pos: int, why: str) -> PlanningError:
    return PlanningError(f"invalid partition filter: {why}: {token!r} at position {pos}")


def _tokenize(text: str) -> list[_Token]:
    tokens: list[_Token] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch.isspace():
            i += 1
            continue
        if text.startswith("--", i) or text.startswith("/*", i) or text.startswith("*/", i):
            raise _bad(text[i : i + 2], i, "comments are not allowed")
        if ch in "'\"":
            j, buf = i + 1, []
            while True:
                if j >= n:
                    raise _bad(text[i:], i, "unbalanced quote")
                if text[j] == ch:
                    if j + 1 < n and text[j + 1] == ch:
                        buf.append(ch)
                        j += 2
                        continue
                    break
                buf.append(text[j])
                j += 1
            tokens.append(_Token("str", "".join(buf), i))
            i = j + 1
            continue
        if ch in "(),":
            tokens.append(_Token(ch, ch, i))
            i += 1
            continue
        if ch in _OP_CHARS:
            j = i
            while j < n and text[j] in _OP_CHARS:
                j += 1
            op = text[i:j]
            if op not in COMPARISON_OPS:
                raise _bad(op, i, "unknown operator")
            tokens.append(_Token("op", op, i))
            i = j
            continue
        if _is_word_char(ch):
            j = i
            while j < n and _is_word_char(text[j]):
                if text.startswith("--", j):
                    raise _bad("--", j, "comments are not allowed")
                j += 1
            tokens.append(_Token("word", text[i:j], i))
            i = j
            continue
        raise _bad(ch, i, "unexpected character")
    return tokens


class _Parser:
    def __init__(self, text: str) -> None:
        self.tokens = _tokenize(text)
        self.i = 0
        self.end = len(text)

    def peek(self) -> _Token | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def take(self, what: str) -> _Token:
        tok = self.peek()
        if tok is None:
            raise PlanningError(f"invalid partition filter: expected {what} at end of input")
        self.i += 1
        return tok

    def parse(self) -> PartitionFilter:
        if not self.tokens:
            raise PlanningError("invalid partition filter: empty filter")
        conditions = [self.condition()]
        while (tok := self.peek()) is not None:
            if tok.kind == "word" and tok.text.lower() == "and":
                self.i += 1
                conditions.append(self.condition())
                continue
            if tok.kind == "word" and tok.text.lower() in _KEYWORDS:
                raise _bad(tok.text, tok.pos, "unsupported keyword (only 'and' is supported)")
            raise _bad(tok.text, tok.pos, "expected 'and' or end of filter")
        return PartitionFilter(tuple(conditions))

    def condition(self) -> FilterCondition:
        tok = self.take("a field name")
        if tok.kind != "word" or not tok.text.isidentifier():
            raise _bad(tok.text, tok.pos, "expected a field name")
        if tok.text.lower() in _KEYWORDS:
            raise _bad(tok.text, tok.pos, "unsupported keyword (only 'and' is supported)")
        field = tok.text
        op_tok = self.take(f"an operator after {field!r}")
        if op_tok.kind == "op":
            return FilterCondition(field, op_tok.text, (self.literal(),))
        low = op_tok.text.lower() if op_tok.kind == "word" else ""
        if low == "in":
            return FilterCondition(field, "in", self.in_list())
        if low == "is":
            nxt = self.take("'null' or 'not null'")
            if nxt.kind == "word" and nxt.text.lower() == "null":
                return FilterCondition(field, "is_null")
            if nxt.kind == "word" and nxt.text.lower() == "not":
                last = self.take("'null'")
                if last.kind == "word" and last.text.lower() == "null":
                    return FilterCondition(field, "not_null")
                raise _bad(last.text, last.pos, "expected 'null'")
            raise _bad(nxt.text, nxt.pos, "expected 'null' or 'not null'")
        if op_tok.kind == "word" and low in _KEYWORDS:
            raise _bad(op_tok.text, op_tok.pos, "unsupported operator")
        raise _bad(op_tok.text, op_tok.pos, "expected an operator (= != < <= > >= in, is [not] null)")

    def in_list(self) -> tuple[FilterLiteral, ...]:
        tok = self.take("'('")
        if tok.kind != "(":
            raise _bad(tok.text, tok.pos, "expected '(' after 'in'")
        values = [self.literal()]
        while True:
            tok = self.take("',' or ')'")
            if tok.kind == ")":
                return tuple(values)
            if tok.kind != ",":
                raise _bad(tok.text, tok.pos, "expected ',' or ')'")
            values.append(self.literal())

    def literal(self) -> FilterLiteral:
        tok = self.take("a value")
        if tok.kind == "str":
            return FilterLiteral("str", tok.text)
        if tok.kind != "word":
            raise _bad(tok.text, tok.pos, "expected a value")
        text = tok.text
        low = text.lower()
        if low == "null":
            raise _bad(text, tok.pos, "use 'is null' / 'is not null' to test for null")
        if low in _KEYWORDS:
            raise _bad(text, tok.pos, "unsupported keyword (quote it to use it as a string)")
        if low in ("true", "false"):
            return FilterLiteral("bool", low)
        if _INT_RE.match(text):
            return FilterLiteral("int", str(int(text)))
        if _FLOAT_RE.match(text):
            number = float(text)
            if not math.isfinite(number):
                raise _bad(text, tok.pos, "number out of range")
            return FilterLiteral("float", repr(number))
        if _DATE_RE.match(text):
            try:
                _dt.date.fromisoformat(text)
            except ValueError:
                raise _bad(text, tok.pos, "invalid date") from None
            return FilterLiteral("date", text)
        return FilterLiteral("str", text)


def parse_partition_filter(text: str) -> PartitionFilter:
    """Parse a partition filter (see the module docstring for the grammar). Raises :class:`PlanningError`."""
    if not isinstance(text, str):
        raise PlanningError(f"invalid partition filter: expected text, got {type(text).__name__}")
    return _Parser(text).parse()
