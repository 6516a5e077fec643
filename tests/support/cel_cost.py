"""Actual runtime cost of a CEL expression as the Kubernetes API server charges it, for the subset the policy uses.

A restatement (not a port) of cel-go v0.26 ``interpreter/runtimecost.go`` (``costTrackerFactory.Observe``,
``CostTracker.costCall``, ``actualSize``) with the constants of ``common/cost.go``, the planner shapes that decide
what is observed (``interpreter/planner.go``: ``planSelect``, ``planCallConditional``, ``planCallIndex``;
``interpreter/interpretable.go``: ``evalTestOnly``, ``evalWatchAttr.AddQualifier``, ``folder.foldIterable`` and the
lazy accumulator of ``folder.ResolveName``), the macro expansions of ``parser/macro.go`` and ``ext/bindings.go``
(``celBind``), the ``cel.OptOptimize`` folding of constant list/map literals and constant ``in`` lists
(``interpreter/decorators.go``: ``maybeBuildListLiteral``, ``maybeBuildMapLiteral``, ``maybeOptimizeSetMembership``),
and Kubernetes' ``staging/src/k8s.io/apiserver/pkg/cel/library/cost.go`` (``CostEstimator.CallCost``,
``traversalCost``), with ``PresenceTestHasCost(false)`` as ``pkg/cel/environment/base.go`` sets it.

Expressions are parsed by cel-python and evaluated here on plain JSON values; anything outside the modelled subset
raises :class:`NotModelled`, so nothing is silently under-charged.

Not modelled: optional types, two-variable comprehensions, struct/proto values, timestamps/durations, quantity/IP/URL
libraries, string() of doubles, exhaustive (non-short-circuit) evaluation, qualifiers applied to a ternary, and the
CheckFrequency interrupt (costs are checked against the limit after every step instead).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import celpy

# common/cost.go
SELECT_AND_IDENT_COST = 1
LIST_CREATE_BASE_COST = 10
MAP_CREATE_BASE_COST = 30
STRING_TRAVERSAL_COST_FACTOR = 0.1
REGEX_STRING_LENGTH_COST_FACTOR = 0.25
# staging/src/k8s.io/apiserver/pkg/apis/cel/config.go
PER_CALL_LIMIT = 1_000_000
RUNTIME_CEL_COST_BUDGET = 10_000_000
RUNTIME_CEL_COST_BUDGET_MATCH_CONDITIONS = 2_500_000


class NotModelled(Exception):
    """A construct this cost model does not restate."""


class CelError(Exception):
    """A CEL evaluation error (no such key, no matching overload)."""


def _size(v: Any) -> int:
    # CostTracker.actualSize: traits.Sizer (strings in code points, bytes, lists, maps) else 1
    return len(v) if isinstance(v, str | list | dict) else 1


def _ceil(x: float) -> int:
    return math.ceil(x)


def _traversal(v: Any) -> int:
    # library/cost.go traversalCost (truncating, string length in bytes)
    if isinstance(v, str):
        return int(len(v.encode()) * STRING_TRAVERSAL_COST_FACTOR)
    if isinstance(v, list):
        return sum(_traversal(i) for i in v)
    if isinstance(v, dict):
        return sum(_traversal(k) + _traversal(i) for k, i in v.items())
    return 1


def cel_eq(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if type(a) is not type(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(cel_eq(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(cel_eq(a[k], b[k]) for k in a)
    return a == b


# --------------------------------------------------------------------------------------------------------
# A small AST from cel-python's lark tree


@dataclass
class N:
    kind: str  # lit ident select index call list map cond and or has comp bind
    args: list[Any] = field(default_factory=list)
    value: Any = None


_ESC = {"n": "\n", "t": "\t", "\\": "\\", "'": "'", '"': '"', "r": "\r"}


def _string(tok: str) -> str:
    if tok[:1] in "rR" or tok.startswith(("'''", '"""')):
        raise NotModelled(f"string literal {tok}")
    body = tok[1:-1]
    return re.sub(r"\\(.)", lambda m: _ESC.get(m.group(1)) or _raise(NotModelled(f"escape {m.group(0)}")), body)


def _raise(e: Exception) -> Any:
    raise e


def _literal(tok: Any) -> Any:
    t, s = tok.type, str(tok)
    if t == "INT_LIT":
        return int(s, 0) if not s.lstrip("-").startswith("0x") else int(s, 16)
    if t == "BOOL_LIT":
        return s == "true"
    if t == "NULL_LIT":
        return None
    if t == "STRING_LIT":
        return _string(s)
    if t == "FLOAT_LIT":
        return float(s)
    raise NotModelled(f"literal {t}")


_BIN = {
    "relation_lt": "<",
    "relation_le": "<=",
    "relation_gt": ">",
    "relation_ge": ">=",
    "relation_eq": "==",
    "relation_ne": "!=",
    "relation_in": "in",
    "addition_add": "+",
    "addition_sub": "-",
    "multiplication_mul": "*",
    "multiplication_div": "/",
    "multiplication_mod": "%",
}
MACROS = {"all", "exists", "exists_one", "map", "filter"}


def to_ast(t: Any) -> N:
    d, ch = t.data, t.children
    if d in ("expr",):
        if len(ch) == 1 or ch[1] is None:
            return to_ast(ch[0])
        return N("cond", [to_ast(ch[0]), to_ast(ch[1]), to_ast(ch[2])])
    if d in ("conditionalor", "conditionaland"):
        if ch[0] is None or len(ch) == 1:
            return to_ast(ch[-1])
        return N("or" if d == "conditionalor" else "and", [to_ast(ch[0]), to_ast(ch[1])])
    if d in ("relation", "addition", "multiplication"):
        if len(ch) == 1 or ch[0] is None:
            return to_ast(ch[-1])
        op = ch[0]
        return N("call", [to_ast(op.children[0]), to_ast(ch[1])], _BIN[op.data])
    if d == "unary":
        if len(ch) == 1:
            return to_ast(ch[0])
        inner = to_ast(ch[1])
        if ch[0].data == "unary_not":
            return N("call", [inner], "!")
        if inner.kind == "lit" and isinstance(inner.value, int | float):
            return N("lit", value=-inner.value)
        return N("call", [inner], "-_")
    if d in ("member", "primary"):
        return to_ast(ch[0])
    if d == "paren_expr":
        return to_ast(ch[0])
    if d == "literal":
        return N("lit", value=_literal(ch[0]))
    if d == "ident":
        return N("ident", value=str(ch[0]))
    if d == "member_dot":
        return N("select", [to_ast(ch[0])], str(ch[1]))
    if d == "member_index":
        return N("index", [to_ast(ch[0]), to_ast(ch[1])])
    if d == "list_lit":
        return N("list", [to_ast(e) for e in ch[0].children] if ch and ch[0] is not None else [])
    if d == "map_lit":
        items = [to_ast(e) for e in ch[0].children] if ch and ch[0] is not None else []
        return N("map", items)
    if d in ("ident_arg", "member_dot_arg"):
        target = to_ast(ch[0]) if d == "member_dot_arg" else None
        name = str(ch[1] if d == "member_dot_arg" else ch[0])
        rest = (ch[2] if len(ch) > 2 else None) if d == "member_dot_arg" else (ch[1] if len(ch) > 1 else None)
        args = [to_ast(e) for e in rest.children] if rest is not None else []
        if target is None and name == "has":
            if len(args) != 1 or args[0].kind != "select":
                raise NotModelled("has() needs a field selection")
            return N("has", [args[0].args[0]], args[0].value)
        if target is not None and target.kind == "ident" and target.value == "cel" and name == "bind":
            if args[0].kind != "ident":
                raise NotModelled("cel.bind variable")
            return N("bind", [args[1], args[2]], args[0].value)
        if target is not None and name in MACROS and len(args) in (2, 3) and args[0].kind == "ident":
            if len(args) == 3 and name != "map":
                raise NotModelled(f"{name} with 3 arguments")
            return N("comp", [target, *args[1:]], (name, args[0].value))
        return N("call", ([target] if target is not None else []) + args, name)
    raise NotModelled(f"syntax {d}")


def parse(expression: str) -> N:
    return to_ast(celpy.Environment().compile(expression))


def _is_const(n: N) -> bool:
    # after cel.OptOptimize: literals, and list/map literals of constants (maybeBuildListLiteral/MapLiteral)
    if n.kind == "lit":
        return True
    if n.kind in ("list", "map"):
        return all(_is_const(a) for a in n.args)
    return False


def _is_attr(n: N) -> bool:
    # InterpretableAttribute after planning: identifiers, selections, indexing, ternaries (conditionalAttribute)
    return n.kind in ("ident", "select", "index", "cond")


# --------------------------------------------------------------------------------------------------------
# Evaluation with cost


class _Lazy:
    def __init__(self, thunk: Callable[[], Any]) -> None:
        self.thunk, self.done, self.value = thunk, False, None

    def get(self) -> Any:
        if not self.done:
            self.value, self.done = self.thunk(), True
        return self.value


@dataclass
class Tracker:
    cost: int = 0
    limit: int | None = PER_CALL_LIMIT

    def add(self, n: int) -> None:
        self.cost += n
        if self.limit is not None and self.cost > self.limit:
            raise CelError("operation cancelled: actual cost limit exceeded")


class Evaluator:
    """Evaluate one expression; ``resolve`` maps a top-level name to a value or a zero-argument callable."""

    def __init__(self, resolve: Callable[[str], Any], tracker: Tracker) -> None:
        self.resolve, self.t = resolve, tracker

    def ev(self, n: N, scope: Mapping[str, Any], observed: bool = True) -> Any:
        k = n.kind
        if k == "lit":
            return n.value
        if _is_const(n):  # folded constant: zero cost
            return self._const(n)
        if k == "ident":
            if observed:  # evalWatchAttr.Eval observes the attribute: SelectAndIdentCost
                self.t.add(SELECT_AND_IDENT_COST)
            return self._lookup(n.value, scope)
        if k == "select":
            obj = self._root(n.args[0], scope, observed)
            self.t.add(1)  # evalWatchConstQual: one per qualifier
            return self._select(obj, n.value)
        if k == "index":
            obj = self._root(n.args[0], scope, observed)
            key_n = n.args[1]
            if _is_const(key_n):
                key = self._const(key_n)
                self.t.add(1)
            elif _is_attr(key_n):  # evalWatchAttrQual: the key attribute, observed as one
                key = self.ev(key_n, scope)
            else:  # relative attribute qualifier: key expression + 1
                key = self.ev(key_n, scope)
                self.t.add(1)
            return self._index(obj, key)
        if k == "cond":  # conditionalAttribute: no cost of its own; attribute branches not observed
            c = self.ev(n.args[0], scope)
            if not isinstance(c, bool):
                raise CelError("no matching overload for ?:")
            b = n.args[1] if c else n.args[2]
            return self.ev(b, scope, observed=False)
        if k in ("and", "or"):
            return self._logic(k, n.args, scope)
        if k == "has":
            # evalTestOnly resolves its operand without observing it; the test-only qualifier costs 1 and the
            # presence test itself 0 (PresenceTestHasCost(false))
            obj = self._root(n.args[0], scope, False, wrapped=True)
            self.t.add(1)
            if not isinstance(obj, dict):
                raise CelError("has() on a non-map")
            return n.value in obj
        if k == "list":
            vals = [self.ev(a, scope) for a in n.args]
            self.t.add(LIST_CREATE_BASE_COST)
            return vals
        if k == "map":
            out = {}
            for i in range(0, len(n.args), 2):
                out[self.ev(n.args[i], scope)] = self.ev(n.args[i + 1], scope)
            self.t.add(MAP_CREATE_BASE_COST)
            return out
        if k == "call":
            return self._call(n, scope)
        if k == "comp":
            return self._comp(n, scope)
        if k == "bind":
            # ext/bindings.go celBind: comprehension over [] (constant), accumulator = the variable, initialised
            # lazily on first use (folder.ResolveName); the fold itself costs nothing
            init_n, body = n.args
            lazy = _Lazy(lambda: self.ev(init_n, scope))
            return self.ev(body, {**scope, n.value: lazy})
        raise NotModelled(k)

    # attribute roots: an identifier, or a relative attribute over any other expression
    def _root(self, n: N, scope: Mapping[str, Any], observed: bool, wrapped: bool = False) -> Any:
        if n.kind == "ident":
            if observed:
                self.t.add(SELECT_AND_IDENT_COST)
            return self._lookup(n.value, scope)
        if n.kind in ("select", "index"):
            return self.ev(n, scope, observed)
        if n.kind == "cond":
            raise NotModelled("qualifier on a ternary")
        v = self.ev(n, scope)  # relative attribute: operand observed, plus the attribute if observed
        if observed:
            self.t.add(SELECT_AND_IDENT_COST)
        return v

    def _lookup(self, name: str, scope: Mapping[str, Any]) -> Any:
        v = scope[name] if name in scope else self.resolve(name)
        return v.get() if isinstance(v, _Lazy) else v

    def _const(self, n: N) -> Any:
        if n.kind == "lit":
            return n.value
        if n.kind == "list":
            return [self._const(a) for a in n.args]
        return {self._const(n.args[i]): self._const(n.args[i + 1]) for i in range(0, len(n.args), 2)}

    @staticmethod
    def _select(obj: Any, name: str) -> Any:
        if isinstance(obj, LazyMap):
            return obj.get(name)
        if not isinstance(obj, dict) or name not in obj:
            raise CelError(f"no such key: {name}")
        return obj[name]

    @staticmethod
    def _index(obj: Any, key: Any) -> Any:
        if isinstance(obj, LazyMap):
            return obj.get(key)
        if isinstance(obj, dict):
            if key not in obj or isinstance(key, bool):
                raise CelError(f"no such key: {key}")
            return obj[key]
        if isinstance(obj, list) and isinstance(key, int) and not isinstance(key, bool):
            if not 0 <= key < len(obj):
                raise CelError("index out of range")
            return obj[key]
        raise CelError("no matching overload for _[_]")

    def _logic(self, k: str, args: list[N], scope: Mapping[str, Any]) -> Any:
        # evalAnd/evalOr: no cost; left to right, short-circuit, errors absorbed by a deciding term
        err: Exception | None = None
        decide = k == "or"
        for a in args:
            try:
                v = self.ev(a, scope)
            except CelError as e:
                err = err or e
                continue
            if not isinstance(v, bool):
                err = err or CelError(f"no matching overload for {k}")
            elif v is decide:
                return decide
        if err:
            raise err
        return not decide

    def _call(self, n: N, scope: Mapping[str, Any]) -> Any:
        f = n.value
        if f == "in" and _is_const(n.args[1]) and isinstance(self._const(n.args[1]), list):
            # maybeOptimizeSetMembership: evalSetMembership is no InterpretableCall, so only its argument costs
            lhs = self.ev(n.args[0], scope)
            if not all(isinstance(v, str | int | float | bool) for v in self._const(n.args[1])):
                raise NotModelled("set membership of non-primitive constants")
            return any(cel_eq(lhs, v) for v in self._const(n.args[1]))
        args = [self.ev(a, scope) for a in n.args]
        out = self._apply(f, args)
        self.t.add(self._call_cost(f, args, out))
        return out

    @staticmethod
    def _call_cost(f: str, args: list[Any], out: Any) -> int:
        # library/cost.go CostEstimator.CallCost first, then runtimecost.go CostTracker.costCall
        if f in ("isSorted", "sum", "max", "min", "indexOf", "lastIndexOf"):
            return _traversal(args[0])
        if f in ("lowerAscii", "upperAscii", "trim"):
            return _ceil(_size(args[0]) * STRING_TRAVERSAL_COST_FACTOR)
        if f in ("split", "replace"):
            return _ceil(_size(args[0]) * 2 * STRING_TRAVERSAL_COST_FACTOR)
        if f == "join":
            return _ceil(_size(out) * 2 * STRING_TRAVERSAL_COST_FACTOR)
        if f in ("startsWith", "endsWith"):
            return _ceil(_size(args[0]) * STRING_TRAVERSAL_COST_FACTOR)
        if f == "in":
            return _size(args[1]) if isinstance(args[1], list) else 1  # InList O(n); in_map default
        if f in ("<", "<=", ">", ">="):
            if isinstance(args[0], str):
                return _ceil(min(_size(args[0]), _size(args[1])) * STRING_TRAVERSAL_COST_FACTOR)
            return 1
        if f in ("==", "!="):
            return _ceil(min(_size(args[0]), _size(args[1])) * STRING_TRAVERSAL_COST_FACTOR)
        if f == "+" and isinstance(args[0], str):
            return _ceil((_size(args[0]) + _size(args[1])) * STRING_TRAVERSAL_COST_FACTOR)
        if f == "matches":
            s = _ceil((1 + _size(args[0])) * STRING_TRAVERSAL_COST_FACTOR)
            return s * _ceil(_size(args[1]) * REGEX_STRING_LENGTH_COST_FACTOR)
        if f == "contains":
            return _ceil(_size(args[0]) * STRING_TRAVERSAL_COST_FACTOR) * _ceil(
                _size(args[1]) * STRING_TRAVERSAL_COST_FACTOR
            )
        return 1  # O(1): conversions, size, logical not, list concatenation, int arithmetic

    @staticmethod
    def _apply(f: str, a: list[Any]) -> Any:
        def num(*xs: Any) -> bool:
            return all(isinstance(x, int | float) and not isinstance(x, bool) for x in xs)

        if f == "dyn":  # a type-checker hint: the identity at run time, costed as a conversion
            return a[0]
        if f == "!" and isinstance(a[0], bool):
            return not a[0]
        if f == "==":
            return cel_eq(a[0], a[1])
        if f == "!=":
            return not cel_eq(a[0], a[1])
        if f in ("<", "<=", ">", ">=") and (num(a[0], a[1]) or (isinstance(a[0], str) and isinstance(a[1], str))):
            return {"<": a[0] < a[1], "<=": a[0] <= a[1], ">": a[0] > a[1], ">=": a[0] >= a[1]}[f]
        if f == "in":
            if isinstance(a[1], list):
                return any(cel_eq(a[0], v) for v in a[1])
            if isinstance(a[1], dict):
                return a[0] in a[1] and not isinstance(a[0], bool)
        if f == "+":
            if isinstance(a[0], str) and isinstance(a[1], str):
                return a[0] + a[1]
            if isinstance(a[0], list) and isinstance(a[1], list):
                return a[0] + a[1]
            if isinstance(a[0], int) and isinstance(a[1], int) and num(a[0], a[1]):
                return a[0] + a[1]
        if f == "-" and num(a[0], a[1]) and type(a[0]) is type(a[1]):
            return a[0] - a[1]
        if f == "-_" and num(a[0]):
            return -a[0]
        if f == "size" and isinstance(a[0], str | list | dict):
            return len(a[0])
        if f == "string":
            if isinstance(a[0], str):
                return a[0]
            if isinstance(a[0], int) and not isinstance(a[0], bool):
                return str(a[0])
            raise NotModelled(f"string() of {type(a[0]).__name__}")
        if f == "int":
            if isinstance(a[0], str):
                if not re.fullmatch(r"[+-]?[0-9]+", a[0]):
                    raise CelError("int() of a non-integer string")
                return int(a[0])
            if isinstance(a[0], int) and not isinstance(a[0], bool):
                return a[0]
        if f == "matches" and isinstance(a[0], str):
            return re.search(a[1], a[0]) is not None  # RE2 subset the policy uses
        if f == "startsWith":
            return a[0].startswith(a[1])
        if f == "endsWith":
            return a[0].endswith(a[1])
        if f == "contains":
            return a[1] in a[0]
        if f == "sum" and isinstance(a[0], list) and num(*a[0]):
            return sum(a[0])
        if f == "join" and isinstance(a[0], list) and all(isinstance(x, str) for x in a[0]):
            return (a[1] if len(a) > 1 else "").join(a[0])
        if f in ("!", "+", "-", "<", "<=", ">", ">=", "in", "size", "int", "sum", "join", "matches"):
            raise CelError(f"no matching overload for {f}")
        raise NotModelled(f"function {f}")

    def _comp(self, n: N, scope: Mapping[str, Any]) -> Any:
        # parser/macro.go expansions, evaluated by folder.foldIterable; accumulator init costs 0 (constants)
        macro, var = n.value
        rng = self.ev(n.args[0], scope)  # iterRange: observed
        if isinstance(rng, dict):
            items = list(rng)
        elif isinstance(rng, list):
            items = rng
        else:
            raise CelError("comprehension over a non-iterable")
        t = self.t
        acc: Any = {"all": True, "exists": False, "exists_one": 0, "map": [], "filter": []}[macro]
        for item in items:
            s = {**scope, var: item}
            if macro == "all":  # cond @not_strictly_false(@result): call 1 + accumulator 1
                t.add(2)
                if acc is False:
                    break
                t.add(1)  # step @result && p: accumulator
                acc = self._logic_acc("and", acc, n.args[1], s)
            elif macro == "exists":  # cond @not_strictly_false(!@result): 1 + 1 + 1
                t.add(3)
                if acc is True:
                    break
                t.add(1)
                acc = self._logic_acc("or", acc, n.args[1], s)
            elif macro == "exists_one":  # step p ? @result + 1 : @result
                if self._bool(n.args[1], s):
                    t.add(2)
                    acc += 1
            elif macro == "filter":  # step p ? @result + [x] : @result
                if self._bool(n.args[1], s):
                    t.add(1 + 1 + LIST_CREATE_BASE_COST + 1)
                    acc = [*acc, item]
            else:  # map: step @result + [f]  (or p ? @result + [f] : @result)
                if len(n.args) == 3 and not self._bool(n.args[1], s):
                    continue
                fn = n.args[-1]
                v = self.ev(fn, s)
                t.add(1 + 1 + (0 if _is_const(fn) else LIST_CREATE_BASE_COST))
                acc = [*acc, v]
        t.add(1)  # result: @result
        if macro == "exists_one":
            t.add(1)  # @result == 1
            return acc == 1
        if isinstance(acc, Exception):
            raise acc
        return acc

    def _bool(self, n: N, scope: Mapping[str, Any]) -> bool:
        v = self.ev(n, scope)
        if not isinstance(v, bool):
            raise CelError("predicate is not a bool")
        return v

    def _logic_acc(self, k: str, acc: Any, p: N, scope: Mapping[str, Any]) -> Any:
        try:
            v = self.ev(p, scope)
        except CelError as e:
            return e
        if not isinstance(v, bool):
            return CelError("predicate is not a bool")
        if isinstance(acc, Exception):
            return v if v is (k == "or") else acc
        return (acc and v) if k == "and" else (acc or v)


@dataclass
class Result:
    value: Any
    cost: int


def evaluate(expression: str, activation: Mapping[str, Any], limit: int | None = PER_CALL_LIMIT) -> Result:
    """Value and actual cost of ``expression``; a name maps to a value or a :class:`LazyMap`."""
    tracker = Tracker(limit=limit)
    ast = parse(expression)

    def resolve(name: str) -> Any:
        if name not in activation:
            raise CelError(f"undeclared reference to {name}")
        return activation[name]

    value = Evaluator(resolve, tracker).ev(ast, {})
    return Result(value, tracker.cost)


class LazyMap:
    """``variables``: each evaluated on first use and its cost reported once (composition.go variableAccessor)."""

    def __init__(self, expressions: Mapping[str, str], activation: Mapping[str, Any]) -> None:
        self.expressions, self.activation = dict(expressions), {**activation, "variables": self}
        self.values: dict[str, Any] = {}
        self.costs: dict[str, int] = {}
        self.pending = 0  # compositionContext.accumulatedCost, taken by GetAndResetCost

    def get(self, name: str) -> Any:
        if name not in self.expressions:
            raise CelError(f"no such variable {name}")
        if name not in self.values:
            result = evaluate(self.expressions[name], self.activation)
            self.values[name], self.costs[name] = result.value, result.cost
            self.pending += result.cost
        return self.values[name]

    def take_cost(self) -> int:
        cost, self.pending = self.pending, 0
        return cost
