"""Java's `SimpleDateFormat` patterns, in UTC, as TimestampConverter's `format` setting takes
them (`yyyy-MM-dd'T'HH:mm:ss.SSSXXX`), over Python's strptime/strftime: a Connect user's pattern
works unchanged. A pattern letter this module does not know is refused when the transform is
configured, as Java refuses an illegal pattern character.

Timestamps are what Connect calls raw: milliseconds since the epoch (a `java.util.Date`).
"""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_MILLIS = "\ue000"  # stands for `S` while strftime formats the rest (a NUL would end it)

# letter → (strftime/strptime directive by run length: 1, 2, 3, 4 or more)
_DIRECTIVES = {
    "y": ("%Y", "%y", "%Y", "%Y"), "M": ("%m", "%m", "%b", "%B"), "d": ("%d",) * 4,
    "H": ("%H",) * 4, "h": ("%I",) * 4, "m": ("%M",) * 4, "s": ("%S",) * 4,
    "a": ("%p",) * 4, "E": ("%a", "%a", "%a", "%A"), "D": ("%j",) * 4, "Z": ("%z",) * 4,
    "X": ("%z",) * 4, "z": ("%Z",) * 4, "S": (_MILLIS,) * 4,
}


class PatternError(ValueError):
    """A pattern `SimpleDateFormat` would refuse, or one using a letter this worker lacks."""


def _translate(pattern: str) -> str:
    out, i = [], 0
    while i < len(pattern):
        c = pattern[i]
        if c == "'":
            end = pattern.find("'", i + 1)
            if end == i + 1:          # '' is a quote
                out.append("'")
                i += 2
                continue
            if end < 0:
                raise PatternError(f"Unterminated quote in {pattern}")
            out.append(pattern[i + 1:end].replace("%", "%%"))
            i = end + 1
            continue
        if c.isascii() and c.isalpha():
            run = len(pattern) - i - len(pattern[i:].lstrip(c))
            if c not in _DIRECTIVES:
                raise PatternError(f"Illegal pattern character '{c}'")
            out.append(_DIRECTIVES[c][min(run, 4) - 1])
            i += run
            continue
        out.append("%%" if c == "%" else c)
        i += 1
    return "".join(out)


class JavaDateFormat:
    """One pattern, compiled once: `format(millis)` and `parse(text)`, both in UTC."""

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self._format = _translate(pattern)
        self._parse = self._format.replace(_MILLIS, "%f")
        self._z_literal = "X" in pattern  # Java's X writes "Z" for UTC, %z writes +0000

    def format(self, millis: int) -> str:
        when = _EPOCH + timedelta(milliseconds=millis)
        text = when.strftime(self._format)
        if self._z_literal:
            text = text.replace("+0000", "Z")
        return text.replace(_MILLIS, f"{when.microsecond // 1000:03d}")

    def parse(self, text: str) -> int:
        """Milliseconds since the epoch; ValueError when `text` does not match."""
        when = datetime.strptime(text, self._parse)
        if when.tzinfo is None:
            when = when.replace(tzinfo=timezone.utc)
        delta = when - _EPOCH
        return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000
