"""Label selectors as kubectl's ``-l`` reads them, for ``gke-tpu-priority-check -l``: which of the given objects
to check (as ``kubectl apply -f DIR -l app=x`` picks objects from files).

Equality (``k=v``, ``k==v``, ``k!=v``), existence (``k``, ``!k``) and sets (``k in (a,b)``, ``k notin (a,b)``),
comma-separated, all of them to match; a malformed selector is refused with what is wrong.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

Match = Callable[[Mapping[str, str]], bool]

_KEY = r"[A-Za-z0-9](?:[-A-Za-z0-9_./]*[A-Za-z0-9])?"
_VALUE = r"(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?)?"
_SET = re.compile(rf"^({_KEY})\s+(in|notin)\s+\(([^()]*)\)$")
_EQUALITY = re.compile(rf"^({_KEY})\s*(==|=|!=)\s*({_VALUE})$")
_EXISTS = re.compile(rf"^(!?)\s*({_KEY})$")


class SelectorError(ValueError):
    """The selector does not parse; the message names the part that does not."""


def _terms(selector: str) -> list[str]:
    """The requirements: split at commas outside parentheses."""
    terms, depth, current = [], 0, ""
    for char in selector:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            terms.append(current.strip())
            current = ""
        else:
            current += char
    terms.append(current.strip())
    return terms


def _requirement(term: str) -> Match:
    found = _SET.match(term)
    if found:
        key, operator, listed = found.groups()
        values = frozenset(v.strip() for v in listed.split(","))
        if not all(re.fullmatch(_VALUE, v) for v in values):
            raise SelectorError(f"{term!r}: a value of the set is not a label value")
        if operator == "in":
            return lambda labels: labels.get(key) in values
        return lambda labels: labels.get(key) not in values
    found = _EQUALITY.match(term)
    if found:
        key, operator, value = found.groups()
        if operator == "!=":
            return lambda labels: labels.get(key) != value
        return lambda labels: labels.get(key) == value
    found = _EXISTS.match(term)
    if found:
        negated, key = found.groups()
        return (lambda labels: key not in labels) if negated else (lambda labels: key in labels)
    raise SelectorError(
        f"{term!r} is not a requirement (key=value, key==value, key!=value, key, !key, key in (a,b), key notin (a,b))"
    )


def parse_selector(selector: str) -> Match:
    """A predicate over an object's labels that is true when every requirement of ``selector`` holds."""
    if not selector.strip():
        raise SelectorError("empty selector")
    requirements = [_requirement(term) for term in _terms(selector)]
    return lambda labels: all(requirement(labels) for requirement in requirements)
