"""Offline restatement of the API server's ValidatingAdmissionPolicy type checking.

kube-apiserver's policy status controller type-checks every ``spec.validations[i].expression`` and
``.messageExpression`` once per kind the policy matches and publishes the failures as
``status.typeChecking.expressionWarnings``. This module does the same offline, so a test can demand a clean
result. It mirrors, function by function:

- ``validating/typechecking.go``: :meth:`TypeChecker.check` (``Check``), :func:`types_to_check`
  (``typesToCheck`` with ``extractGroups``/``extractVersions``/``extractResources``, at most 10 kinds, sorted
  by group, version, kind), :meth:`TypeChecker.check_expression` (``CheckExpression``), the environment of
  ``buildEnvSet`` (``object``/``oldObject`` typed from the kind, ``request``, ``namespaceObject``,
  ``authorizer``) and the result text of ``TypeCheckingResult.String`` (``/v1, Kind=Pod: ERROR: ...``).
- ``plugin/cel/composition.go``: variables compiled in order (``CompileAndStoreVariables``), each stored in
  the ``kubernetes.variables`` object with :func:`convert_cel_type_to_decl_type` (objects become ``dyn``,
  lists and maps converted recursively, a variable that fails to compile becomes ``dyn``).
- ``plugin/cel/compile.go``: :func:`build_request_type`, :func:`build_namespace_type`.
- ``cel/common/schemas.go`` + ``cel/types.go``: :func:`schema_decl_type` (``SchemaDeclType``, with the names
  ``MaybeAssignTypeName`` gives nested objects: ``Pod.spec.containers.@idx``, map values ``.@elem``).
- ``cel/openapi/resolver``: schemas with ``$ref`` (also wrapped in ``allOf``) replaced by the referred one,
  a circular reference becoming an empty object.
- cel-go ``checker/``: overload resolution with type parameters (``isAssignable``,
  ``isValidTypeSubstitution``, ``mostGeneral``, ``joinTypes``), field selection, ``has()``, comprehension
  macros, and the error texts (``undefined field 'x'``, ``found no matching overload for '_?_:_' applied to
  '(bool, list(A), list(B))'``, ``undeclared reference to 'x' (in container '')``).

Schemas: CRD kinds from their served CRD version with ``metadata`` replaced by the full ObjectMeta (what the
served OpenAPI of a CRD carries); built-in kinds from kubernetes-validate's schemas for
:data:`tests.support.kube_schemas.KUBERNETES_VERSION`, read as the served OpenAPI v3: ``IntOrString`` is
``dyn`` (format ``int-or-string``), ``Quantity`` has no type (``oneOf`` string/number) so, exactly as on a
real server, a map of quantities (``resources.limits``) is not exposed and reading it is
``undefined field 'limits'``. Wrap the value in ``dyn(...)`` to read it anyway.

Stricter than the server in one way, on request (``strict=True``, the default): every variable's own
expression is checked per kind too and reported as ``spec.variables[name]``; the server hides those failures
by turning the variable into ``dyn``. ``match_conditions=True`` also checks ``spec.matchConditions``.

Root object types are named after the kind (the server appends a nanosecond stamp, ``Pod123456``).
Positions are the ones cel-go reports (``.`` of a selection, ``(`` of a call, ``[`` of an index, the operator
of an operation, ``?`` of a ternary), 1-based columns.

Not modelled, and refused loudly with :class:`UnmodelledCelError` rather than passed: ``params``/paramKind,
``authorizer`` use, message construction (``T{...}``), leading-dot names, optional syntax, and every function
or macro outside :data:`SUPPORTED_FUNCTIONS`.
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import celpy
import lark
from celpy.celparser import CELParseError
from kubernetes_validate import utils as kv_utils

from tests.support import kube_schemas
from tests.support.crd_validation import CrdCatalog, default_catalog

MAX_TYPES_TO_CHECK = 10
"""typechecking.go maxTypesToCheck."""

Schema = Mapping[str, Any]


class UnmodelledCelError(RuntimeError):
    """The expression uses CEL this checker does not model; never treated as a pass."""


# --------------------------------------------------------------------------------------------------------
# Types (cel-go common/types.Type, restricted to what policies use)


@dataclass(frozen=True)
class CelType:
    """A CEL type. ``kind`` is one of the cel-go kinds; objects compare by name, like IsExactType."""

    kind: str
    name: str = ""
    params: tuple[CelType, ...] = ()
    fields: Mapping[str, CelType] | None = field(default=None, compare=False, hash=False, repr=False)

    def __str__(self) -> str:
        if self.kind == "list":
            return f"list({self.params[0]})"
        if self.kind == "map":
            return f"map({self.params[0]}, {self.params[1]})"
        if self.kind in ("object", "type_param", "opaque"):
            return self.name
        return _KIND_NAMES.get(self.kind, self.kind)


_KIND_NAMES = {
    "error": "*error*",
    "null": "null_type",
    "timestamp": "google.protobuf.Timestamp",
    "duration": "google.protobuf.Duration",
}

DYN = CelType("dyn")
ERROR = CelType("error")
BOOL = CelType("bool")
INT = CelType("int")
UINT = CelType("uint")
DOUBLE = CelType("double")
STRING = CelType("string")
BYTES = CelType("bytes")
NULL = CelType("null")
TIMESTAMP = CelType("timestamp")
DURATION = CelType("duration")
_PRIMITIVES = frozenset({"bool", "int", "uint", "double", "string", "bytes", "timestamp", "duration"})


def list_of(elem: CelType) -> CelType:
    return CelType("list", params=(elem,))


def map_of(key: CelType, value: CelType) -> CelType:
    return CelType("map", params=(key, value))


def object_type(name: str, fields: Mapping[str, CelType]) -> CelType:
    return CelType("object", name=name, fields=dict(fields))


def type_param(name: str) -> CelType:
    return CelType("type_param", name=name)


# --------------------------------------------------------------------------------------------------------
# Type assignability (cel-go checker/types.go)


class Mapping_:
    """cel-go checker mapping: type parameter name -> substitution."""

    def __init__(self, subs: dict[str, CelType] | None = None) -> None:
        self.subs = dict(subs or {})

    def copy(self) -> Mapping_:
        return Mapping_(self.subs)

    def find(self, t: CelType) -> CelType | None:
        return self.subs.get(t.name)

    def add(self, t: CelType, sub: CelType) -> None:
        self.subs[t.name] = sub


def _is_dyn(t: CelType) -> bool:
    return t.kind == "dyn"


def _is_dyn_or_error(t: CelType) -> bool:
    return t.kind in ("dyn", "error")


def _is_nullable(t: CelType) -> bool:
    return t.kind in ("object", "null", "dyn")


def _exact(t1: CelType, t2: CelType) -> bool:
    return t1 == t2


def substitute(m: Mapping_, t: CelType, type_param_to_dyn: bool) -> CelType:
    if t.kind == "type_param":
        sub = m.find(t)
        if sub is not None:
            return substitute(m, sub, type_param_to_dyn)
        return DYN if type_param_to_dyn else t
    if t.kind in ("list", "map"):
        return CelType(t.kind, params=tuple(substitute(m, p, type_param_to_dyn) for p in t.params))
    return t


def _not_referenced_in(m: Mapping_, t: CelType, within: CelType) -> bool:
    if _exact(t, within):
        return False
    if within.kind == "type_param":
        sub = m.find(within)
        return True if sub is None else _not_referenced_in(m, t, sub)
    if within.kind in ("list", "map"):
        return all(_not_referenced_in(m, t, p) for p in within.params)
    return True


def _is_equal_or_less_specific(t1: CelType, t2: CelType) -> bool:
    if _is_dyn(t1) or t1.kind == "type_param":
        return True
    if _is_dyn(t2) or t2.kind == "type_param":
        return False
    if t1.kind != t2.kind:
        return False
    if t1.kind in ("list", "map"):
        return all(_is_equal_or_less_specific(a, b) for a, b in zip(t1.params, t2.params, strict=True))
    return _exact(t1, t2)


def most_general(t1: CelType, t2: CelType) -> CelType:
    return t1 if _is_equal_or_less_specific(t1, t2) else t2


def _is_valid_type_substitution(m: Mapping_, t1: CelType, t2: CelType) -> tuple[bool, bool]:
    if t1.kind == t2.kind and _exact(t1, t2):
        return True, True
    t2_sub = m.find(t2)
    if t2_sub is not None:
        if t1.kind == t2_sub.kind and _exact(t1, t2_sub):
            return True, True
        if is_assignable(m, t1, t2_sub):
            t2_new = most_general(t1, t2_sub)
            if _not_referenced_in(m, t2, t2_new):
                m.add(t2, t2_new)
            return True, True
        return False, True
    if _not_referenced_in(m, t2, t1):
        m.add(t2, t1)
        return True, False
    return False, False


def is_assignable(m: Mapping_, t1: CelType, t2: CelType) -> bool:
    """cel-go internalIsAssignable: can a value of ``t1`` be used where ``t2`` is expected (or vice versa)."""
    if t2.kind == "type_param":
        valid, has_sub = _is_valid_type_substitution(m, t1, t2)
        if valid:
            return True
        if has_sub:
            return False
    if t1.kind == "type_param":
        return _is_valid_type_substitution(m, t2, t1)[0]
    if _is_dyn_or_error(t1) or _is_dyn_or_error(t2):
        return True
    if t1.kind == "null":
        return _is_nullable(t2)
    if t2.kind == "null":
        return _is_nullable(t1)
    if t1.kind in _PRIMITIVES or t1.kind == "object":
        return _exact(t1, t2)
    if t1.kind in ("list", "map"):
        return (
            t1.kind == t2.kind
            and len(t1.params) == len(t2.params)
            and all(is_assignable(m, a, b) for a, b in zip(t1.params, t2.params, strict=True))
        )
    return _exact(t1, t2)


# --------------------------------------------------------------------------------------------------------
# Overloads (cel-go stdlib, k8s lists/strings libraries): the subset policies use

A, B = type_param("A"), type_param("B")


@dataclass(frozen=True)
class Overload:
    params: tuple[CelType, ...]
    result: CelType
    instance: bool = False


def _ov(*params: CelType, result: CelType, instance: bool = False) -> Overload:
    return Overload(tuple(params), result, instance)


_NUMERIC = (INT, UINT, DOUBLE)
_ORDERED = (*_NUMERIC, STRING, BYTES, BOOL, TIMESTAMP, DURATION)
_COMPARISON = [_ov(t, t, result=BOOL) for t in _ORDERED] + [
    _ov(a, b, result=BOOL) for a, b in itertools.permutations(_NUMERIC, 2)
]  # k8s enables cross-type numeric comparisons

OPERATORS: dict[str, list[Overload]] = {
    "_?_:_": [_ov(BOOL, A, A, result=A)],
    "_&&_": [_ov(BOOL, BOOL, result=BOOL)],
    "_||_": [_ov(BOOL, BOOL, result=BOOL)],
    "!_": [_ov(BOOL, result=BOOL)],
    "-_": [_ov(INT, result=INT), _ov(DOUBLE, result=DOUBLE)],
    "_==_": [_ov(A, A, result=BOOL)],
    "_!=_": [_ov(A, A, result=BOOL)],
    "_<_": _COMPARISON,
    "_<=_": _COMPARISON,
    "_>_": _COMPARISON,
    "_>=_": _COMPARISON,
    "@in": [_ov(A, list_of(A), result=BOOL), _ov(A, map_of(A, B), result=BOOL)],
    "_+_": [
        *(_ov(t, t, result=t) for t in (INT, UINT, DOUBLE, STRING, BYTES)),
        _ov(list_of(A), list_of(A), result=list_of(A)),
        _ov(TIMESTAMP, DURATION, result=TIMESTAMP),
        _ov(DURATION, TIMESTAMP, result=TIMESTAMP),
        _ov(DURATION, DURATION, result=DURATION),
    ],
    "_-_": [
        *(_ov(t, t, result=t) for t in _NUMERIC),
        _ov(TIMESTAMP, TIMESTAMP, result=DURATION),
        _ov(TIMESTAMP, DURATION, result=TIMESTAMP),
        _ov(DURATION, DURATION, result=DURATION),
    ],
    "_*_": [_ov(t, t, result=t) for t in _NUMERIC],
    "_/_": [_ov(t, t, result=t) for t in _NUMERIC],
    "_%_": [_ov(t, t, result=t) for t in (INT, UINT)],
    "_[_]": [_ov(list_of(A), INT, result=A), _ov(map_of(A, B), A, result=B)],
}

_SIZED = (STRING, BYTES, list_of(A), map_of(A, B))
FUNCTIONS: dict[str, list[Overload]] = {
    "size": [_ov(t, result=INT) for t in _SIZED] + [_ov(t, result=INT, instance=True) for t in _SIZED],
    "string": [_ov(t, result=STRING) for t in (STRING, INT, UINT, DOUBLE, BOOL, BYTES, TIMESTAMP, DURATION)],
    "int": [_ov(t, result=INT) for t in (INT, UINT, DOUBLE, STRING, TIMESTAMP)],
    "dyn": [_ov(A, result=DYN)],
    "matches": [_ov(STRING, STRING, result=BOOL), _ov(STRING, STRING, result=BOOL, instance=True)],
    "startsWith": [_ov(STRING, STRING, result=BOOL, instance=True)],
    "endsWith": [_ov(STRING, STRING, result=BOOL, instance=True)],
    "contains": [_ov(STRING, STRING, result=BOOL, instance=True)],
    # k8s strings (cel-go ext strings): join
    "join": [
        _ov(list_of(STRING), result=STRING, instance=True),
        _ov(list_of(STRING), STRING, result=STRING, instance=True),
    ],
    # k8s lists library: sum
    "sum": [_ov(list_of(t), result=t, instance=True) for t in (INT, UINT, DOUBLE, DURATION)],
}
MACROS = frozenset({"has", "all", "exists", "exists_one", "map", "filter", "cel.bind"})
SUPPORTED_FUNCTIONS = frozenset(FUNCTIONS) | MACROS
"""Every function and macro the checker models; anything else raises UnmodelledCelError."""


# --------------------------------------------------------------------------------------------------------
# Issues


@dataclass(frozen=True)
class Issue:
    """One cel-go checker error."""

    line: int
    column: int
    message: str

    def __str__(self) -> str:
        return f"ERROR: <input>:{self.line}:{self.column}: {self.message}"


@dataclass(frozen=True)
class GVK:
    group: str
    version: str
    kind: str

    def __str__(self) -> str:
        """apimachinery GroupVersionKind.String(): ``batch/v1, Kind=Job``, ``/v1, Kind=Pod``."""
        return f"{self.group}/{self.version}, Kind={self.kind}"


@dataclass(frozen=True)
class CheckResult:
    """An expression's compile result: its output type (``None`` when it failed) and its issues."""

    output_type: CelType | None
    issues: tuple[Issue, ...]


@dataclass(frozen=True)
class TypeCheckWarning:
    """The issues of one expression (``field_ref``) for one matched kind."""

    field_ref: str
    gvk: GVK
    issues: tuple[Issue, ...]

    def __str__(self) -> str:
        return f"{self.field_ref}: {self.gvk}: " + "\n".join(str(i) for i in self.issues)


# --------------------------------------------------------------------------------------------------------
# Checker (cel-go checker/checker.go over cel-python's lark tree)

_BINARY = {
    "conditionalor": ("_||_", "||"),
    "conditionaland": ("_&&_", "&&"),
}
_RELATION = {
    "relation_lt": ("_<_", "<"),
    "relation_le": ("_<=_", "<="),
    "relation_gt": ("_>_", ">"),
    "relation_ge": ("_>=_", ">="),
    "relation_eq": ("_==_", "=="),
    "relation_ne": ("_!=_", "!="),
    "relation_in": ("@in", "in"),
    "addition_add": ("_+_", "+"),
    "addition_sub": ("_-_", "-"),
    "multiplication_mul": ("_*_", "*"),
    "multiplication_div": ("_/_", "/"),
    "multiplication_mod": ("_%_", "%"),
}
_LITERALS = {
    "INT_LIT": INT,
    "UINT_LIT": UINT,
    "FLOAT_LIT": DOUBLE,
    "STRING_LIT": STRING,
    "MLSTRING_LIT": STRING,
    "BYTES_LIT": BYTES,
    "BOOL_LIT": BOOL,
    "NULL_LIT": NULL,
}


def _format_args(args: Sequence[CelType], instance: bool) -> str:
    if instance:
        return f"{args[0]}.(" + ", ".join(str(a) for a in args[1:]) + ")"
    return "(" + ", ".join(str(a) for a in args) + ")"


@functools.cache
def _parser() -> celpy.Environment:
    return celpy.Environment()


def parse(expression: str) -> lark.Tree[Any]:
    try:
        return _parser().compile(expression)
    except CELParseError as error:
        raise UnmodelledCelError(f"cel-python cannot parse {expression!r}: {error}") from error


class _Checker:
    def __init__(self, text: str, variables: Mapping[str, CelType], bindings: bool = False) -> None:
        self.text = text
        self.env = variables
        self.bindings = bindings
        self.scopes: list[dict[str, CelType]] = []
        self.mapping = Mapping_()
        self.issues: list[tuple[int, Issue]] = []
        self._fresh = itertools.count()

    # positions -------------------------------------------------------------------------------------
    def _report(self, offset: int, message: str) -> None:
        line = self.text.count("\n", 0, offset) + 1
        column = offset - (self.text.rfind("\n", 0, offset) + 1) + 1
        self.issues.append((offset, Issue(line, column, message)))

    def _after(self, node: lark.Tree[Any] | lark.Token, symbol: str) -> int:
        """Offset of ``symbol`` following ``node`` (operators are not kept in the tree)."""
        end = node.end_pos if isinstance(node, lark.Token) else node.meta.end_pos
        found = self.text.find(symbol, end if end is not None else 0)
        return found if found >= 0 else (end or 0)

    @staticmethod
    def _start(node: lark.Tree[Any]) -> int:
        return getattr(node.meta, "start_pos", 0) or 0

    # types -----------------------------------------------------------------------------------------
    def _fresh_params(self, overload: Overload) -> tuple[tuple[CelType, ...], CelType]:
        names: dict[str, CelType] = {}

        def fresh(t: CelType) -> CelType:
            if t.kind == "type_param":
                return names.setdefault(t.name, type_param(f"_var{next(self._fresh)}"))
            if t.kind in ("list", "map"):
                return CelType(t.kind, params=tuple(fresh(p) for p in t.params))
            return t

        return tuple(fresh(p) for p in overload.params), fresh(overload.result)

    def resolve(
        self, name: str, args: list[CelType], overloads: Iterable[Overload], offset: int, instance: bool
    ) -> CelType:
        """cel-go resolveOverload: every matching overload; differing results make the result dyn."""
        result: CelType | None = None
        for overload in overloads:
            if overload.instance != instance or len(overload.params) != len(args):
                continue
            params, overload_result = self._fresh_params(overload)
            trial = self.mapping.copy()
            if all(is_assignable(trial, a, p) for a, p in zip(args, params, strict=True)):
                self.mapping = trial
                found = substitute(trial, overload_result, False)
                if result is None:
                    result = found
                elif not _is_dyn(result) and not _exact(found, result):
                    result = DYN
        if result is None:
            shown = [substitute(self.mapping, a, True) for a in args]
            self._report(
                offset, f"found no matching overload for '{name}' applied to '{_format_args(shown, instance)}'"
            )
            return ERROR
        return result

    def _current(self, t: CelType) -> CelType:
        return substitute(self.mapping, t, False)

    def select(self, operand: CelType, name: str, offset: int) -> CelType:
        """cel-go checkSelect / lookupFieldType over the DeclTypeProvider."""
        operand = self._current(operand)
        if _is_dyn_or_error(operand) or operand.kind == "type_param":
            return DYN
        if operand.kind == "object":
            assert operand.fields is not None
            if name in operand.fields:
                return operand.fields[name]
            self._report(offset, f"undefined field '{name}'")
            return ERROR
        if operand.kind == "map":
            return operand.params[1]
        self._report(offset, f"type '{operand}' does not support field selection")
        return ERROR

    # walk ------------------------------------------------------------------------------------------
    def check(self, node: lark.Tree[Any]) -> CelType:
        method: Callable[[lark.Tree[Any]], CelType] | None = getattr(self, f"_n_{node.data}", None)
        if method is None:
            raise UnmodelledCelError(f"CEL syntax {str(node.data)!r} is not modelled by the type checker")
        return method(node)

    def _n_expr(self, node: lark.Tree[Any]) -> CelType:
        if len(node.children) == 1:
            return self.check(node.children[0])
        cond, then, otherwise = node.children
        args = [self.check(cond), self.check(then), self.check(otherwise)]
        return self.resolve("_?_:_", args, OPERATORS["_?_:_"], self._after(cond, "?"), False)

    def _binary(self, node: lark.Tree[Any]) -> CelType:
        if len(node.children) == 1:
            return self.check(node.children[0])
        left, right = node.children
        name, symbol = _BINARY[node.data]
        args = [self.check(left), self.check(right)]
        return self.resolve(name, args, OPERATORS[name], self._after(left, symbol), False)

    _n_conditionalor = _binary
    _n_conditionaland = _binary

    def _operation(self, node: lark.Tree[Any]) -> CelType:
        if len(node.children) == 1:
            return self.check(node.children[0])
        op_node, right = node.children
        name, symbol = _RELATION[op_node.data]
        (left,) = op_node.children
        args = [self.check(left), self.check(right)]
        return self.resolve(name, args, OPERATORS[name], self._after(left, symbol), False)

    _n_relation = _operation
    _n_addition = _operation
    _n_multiplication = _operation

    def _n_unary(self, node: lark.Tree[Any]) -> CelType:
        if len(node.children) == 1:
            return self.check(node.children[0])
        op_node, operand = node.children
        name = "!_" if op_node.data == "unary_not" else "-_"
        return self.resolve(name, [self.check(operand)], OPERATORS[name], self._start(node), False)

    def _n_member(self, node: lark.Tree[Any]) -> CelType:
        return self.check(node.children[0])

    _n_primary = _n_member

    def _n_paren_expr(self, node: lark.Tree[Any]) -> CelType:
        return self.check(node.children[0])

    def _n_member_dot(self, node: lark.Tree[Any]) -> CelType:
        operand, name = node.children
        return self.select(self.check(operand), str(name), self._after(operand, "."))

    def _n_member_index(self, node: lark.Tree[Any]) -> CelType:
        operand, index = node.children
        args = [self.check(operand), self.check(index)]
        return self.resolve("_[_]", args, OPERATORS["_[_]"], self._after(operand, "["), False)

    def _n_literal(self, node: lark.Tree[Any]) -> CelType:
        token = node.children[0]
        assert isinstance(token, lark.Token)
        return _LITERALS[token.type]

    def _n_ident(self, node: lark.Tree[Any]) -> CelType:
        name = str(node.children[0])
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        if name in ("params", "authorizer") and name in self.env:
            raise UnmodelledCelError(f"{name!r} is declared by the server but not modelled by this checker")
        if name in self.env:
            return self.env[name]
        self._report(self._start(node), f"undeclared reference to '{name}' (in container '')")
        return ERROR

    def _n_list_lit(self, node: lark.Tree[Any]) -> CelType:
        elems: CelType | None = None
        before = len(self.issues)
        seen: list[tuple[CelType, lark.Tree[Any]]] = []
        for child in node.children[0].children if node.children else ():
            checked = self.check(child)
            seen.append((checked, child))
            elems = self._join(elems, checked, child)
        if len(self.issues) == before:  # AST validators run only on an expression that checked
            self._homogeneous(seen)
        return list_of(elems if elems is not None else type_param(f"_var{next(self._fresh)}"))

    def _homogeneous(self, seen: list[tuple[CelType, lark.Tree[Any]]]) -> None:
        """cel-go's ValidateHomogeneousAggregateLiterals (k8s base env since 1.29): every element or map value of
        a literal has an equivalent type; unlike joinTypes, dyn and string are not equivalent."""
        if not seen:
            return
        first = self._current(seen[0][0])
        for checked, child in seen[1:]:
            current = self._current(checked)
            if ERROR in (first, current):
                return
            if current != first:
                self._report(self._start(child), f"expected type '{first}' but found '{current}'")
                return

    def _n_map_lit(self, node: lark.Tree[Any]) -> CelType:
        keys: CelType | None = None
        values: CelType | None = None
        entries = node.children[0].children if node.children else []
        before = len(self.issues)
        seen_keys: list[tuple[CelType, lark.Tree[Any]]] = []
        seen_values: list[tuple[CelType, lark.Tree[Any]]] = []
        for key, value in zip(entries[::2], entries[1::2], strict=True):
            key_type, value_type = self.check(key), self.check(value)
            seen_keys.append((key_type, key))
            seen_values.append((value_type, value))
            keys = self._join(keys, key_type, key)
            values = self._join(values, value_type, value)
        if len(self.issues) == before:  # AST validators run only on an expression that checked
            self._homogeneous(seen_keys)
            self._homogeneous(seen_values)
        if keys is None or values is None:
            return map_of(type_param(f"_var{next(self._fresh)}"), type_param(f"_var{next(self._fresh)}"))
        return map_of(keys, values)

    def _join(self, previous: CelType | None, current: CelType, node: lark.Tree[Any]) -> CelType:
        """cel-go joinTypes under HomogeneousAggregateLiterals (k8s environment/base.go sets it)."""
        if previous is None:
            return current
        if is_assignable(self.mapping, previous, current):
            return most_general(previous, current)
        self._report(
            self._start(node), f"expected type '{self._current(previous)}' but found '{self._current(current)}'"
        )
        return ERROR

    def _args(self, node: lark.Tree[Any] | None) -> list[lark.Tree[Any]]:
        return list(node.children) if node is not None else []

    def _n_ident_arg(self, node: lark.Tree[Any]) -> CelType:
        name_token = node.children[0]
        name = str(name_token)
        args = self._args(node.children[1] if len(node.children) > 1 else None)
        offset = self._after(name_token, "(")
        if name == "has":
            return self._has(args, offset)
        if name not in FUNCTIONS:
            raise UnmodelledCelError(f"CEL function {name}() is not modelled by the type checker")
        return self.resolve(name, [self.check(a) for a in args], FUNCTIONS[name], offset, False)

    def _has(self, args: list[lark.Tree[Any]], offset: int) -> CelType:
        selection = _unwrap(args[0]) if len(args) == 1 else None
        if selection is None or selection.data != "member_dot":
            raise UnmodelledCelError("has() takes exactly one field selection")
        operand, name = selection.children
        self.select(self.check(operand), str(name), self._after(operand, "."))
        return BOOL

    def _n_member_dot_arg(self, node: lark.Tree[Any]) -> CelType:
        target, name_token = node.children[0], node.children[1]
        name = str(name_token)
        args = self._args(node.children[2] if len(node.children) > 2 else None)
        offset = self._after(name_token, "(")
        target_ident = _unwrap(target)
        if (
            name == "bind"
            and target_ident is not None
            and target_ident.data == "ident"
            and str(target_ident.children[0]) == "cel"
        ):
            if not self.bindings:
                # Kubernetes' base environment (apiserver/pkg/cel/environment/base.go) has no ext.Bindings: there
                # cel.bind is no macro but a call on an undeclared identifier `cel`.
                self._report(self._start(target), "undeclared reference to 'cel' (in container '')")
                return ERROR
            return self._bind(args)
        if name in ("all", "exists", "exists_one", "map", "filter"):
            return self._comprehension(name, target, args, offset)
        if name not in FUNCTIONS:
            raise UnmodelledCelError(f"CEL method .{name}() is not modelled by the type checker")
        arg_types = [self.check(target), *(self.check(a) for a in args)]
        return self.resolve(name, arg_types, FUNCTIONS[name], offset, True)

    def _iter_var(self, node: lark.Tree[Any]) -> str:
        ident = _unwrap(node)
        if ident is None or ident.data != "ident":
            raise UnmodelledCelError("a macro's variable must be a simple identifier")
        return str(ident.children[0])

    def _bind(self, args: list[lark.Tree[Any]]) -> CelType:
        if len(args) != 3:
            raise UnmodelledCelError("cel.bind takes (name, init, expr)")
        var = self._iter_var(args[0])
        init = self.check(args[1])
        self.scopes.append({var: init})
        try:
            return self.check(args[2])
        finally:
            self.scopes.pop()

    def _comprehension(self, name: str, target: lark.Tree[Any], args: list[lark.Tree[Any]], offset: int) -> CelType:
        arity = {"all": (2,), "exists": (2,), "exists_one": (2,), "filter": (2,), "map": (2, 3)}[name]
        if len(args) not in arity:
            raise UnmodelledCelError(f"macro .{name}() with {len(args)} arguments is not modelled")
        range_type = self._current(self.check(target))
        if range_type.kind == "list" or range_type.kind == "map":
            var_type = range_type.params[0]
        elif _is_dyn_or_error(range_type) or range_type.kind == "type_param":
            var_type = DYN
        else:
            self._report(
                self._start(target),
                f"expression of type '{range_type}' cannot be range of a comprehension (must be list, map, or dynamic)",
            )
            var_type = DYN
        var = self._iter_var(args[0])
        self.scopes.append({var: var_type})
        try:
            bodies = [self.check(a) for a in args[1:]]
        finally:
            self.scopes.pop()
        step = {"all": "_&&_", "exists": "_||_"}
        if name in step:
            self.resolve(step[name], [BOOL, bodies[0]], OPERATORS[step[name]], offset, False)
            return BOOL
        if name == "exists_one" or (name == "filter") or len(bodies) == 2:
            # the predicate guards the step: `p ? accu + [..] : accu`
            self.resolve("_?_:_", [bodies[0], DYN, DYN], OPERATORS["_?_:_"], offset, False)
        if name == "exists_one":
            return BOOL
        if name == "filter":
            return list_of(var_type)
        return list_of(bodies[-1])


def _unwrap(node: lark.Tree[Any]) -> lark.Tree[Any] | None:
    """The single meaningful node under a chain of one-child wrappers (expr -> ... -> primary)."""
    while isinstance(node, lark.Tree) and node.data in (
        "expr",
        "conditionalor",
        "conditionaland",
        "relation",
        "addition",
        "multiplication",
        "unary",
        "member",
        "primary",
    ):
        if len(node.children) != 1:
            return node
        node = node.children[0]
    return node if isinstance(node, lark.Tree) else None


def check_expression(expression: str, variables: Mapping[str, CelType], *, bindings: bool = False) -> CheckResult:
    """Type-check one expression in an environment of declared variables (cel.Env.Compile); ``bindings``
    adds cel-go's ext.Bindings (``cel.bind``), which Kubernetes' environment lacks."""
    checker = _Checker(expression, variables, bindings)
    output = checker.check(parse(expression))
    issues = tuple(issue for _, issue in sorted(checker.issues, key=lambda pair: pair[0]))
    if issues:
        return CheckResult(None, issues)
    return CheckResult(substitute(checker.mapping, output, True), ())


# --------------------------------------------------------------------------------------------------------
# Schemas to types (cel/common/schemas.go SchemaDeclType + cel/types.go MaybeAssignTypeName)


def _schema_type(schema: Schema) -> str:
    declared = schema.get("type")
    if isinstance(declared, list):  # kubernetes-validate writes ["string", "null"]
        declared = next((t for t in declared if t != "null"), "")
    return str(declared or "")


def schema_decl_type(schema: Schema | None, is_resource_root: bool, name: str) -> CelType | None:
    """SchemaDeclType with the type names MaybeAssignTypeName gives: None when the schema is not exposed."""
    if schema is None:
        return None
    if schema.get("format") == "int-or-string" or schema.get("x-kubernetes-int-or-string"):
        return DYN
    if is_resource_root:
        schema = with_type_and_object_meta(schema)
    kind = _schema_type(schema)
    if kind == "array":
        items = schema.get("items")
        if not isinstance(items, Mapping):
            return None
        elem = schema_decl_type(items, bool(items.get("x-kubernetes-embedded-resource")), f"{name}.@idx")
        return None if elem is None else list_of(elem)
    if kind == "object":
        additional = schema.get("additionalProperties")
        if isinstance(additional, Mapping):
            value = schema_decl_type(
                additional, bool(additional.get("x-kubernetes-embedded-resource")), f"{name}.@elem"
            )
            return None if value is None else map_of(STRING, value)
        fields: dict[str, CelType] = {}
        for prop_name, prop in (schema.get("properties") or {}).items():
            field_type = schema_decl_type(prop, bool(prop.get("x-kubernetes-embedded-resource")), f"{name}.{prop_name}")
            if field_type is not None and _escapable(prop_name):
                fields[_escape(prop_name)] = field_type
        return object_type(name, fields)
    if kind == "string":
        return {"byte": BYTES, "duration": DURATION, "date": TIMESTAMP, "date-time": TIMESTAMP}.get(
            str(schema.get("format", "")), STRING
        )
    return {"boolean": BOOL, "number": DOUBLE, "integer": INT}.get(kind)


_CEL_RESERVED = frozenset(
    [
        "true",
        "false",
        "null",
        "in",
        "as",
        "break",
        "const",
        "continue",
        "else",
        "for",
        "function",
        "if",
        "import",
        "let",
        "loop",
        "package",
        "namespace",
        "return",
        "var",
        "void",
        "while",
    ]
)


def _escapable(name: str) -> bool:
    return bool(re.fullmatch(r"[a-zA-Z_.\-/][a-zA-Z0-9_.\-/]*", name))


def _escape(name: str) -> str:
    """apiservercel.Escape: reserved words become __x__; ``.``, ``-``, ``/`` and ``__`` are spelled out."""
    if name in _CEL_RESERVED:
        return f"__{name}__"
    out = name.replace("__", "__underscores__")
    for char, word in ((".", "__dot__"), ("-", "__dash__"), ("/", "__slash__")):
        out = out.replace(char, word)
    return out


def with_type_and_object_meta(schema: Schema) -> Schema:
    """WithTypeAndObjectMeta: kind, apiVersion, metadata.name and metadata.generateName are always there."""
    props = dict(schema.get("properties") or {})
    meta = props.get("metadata") or {}
    meta_props = meta.get("properties") or {}
    if (
        _schema_type(props.get("kind", {})) == "string"
        and _schema_type(props.get("apiVersion", {})) == "string"
        and _schema_type(meta) == "object"
        and _schema_type(meta_props.get("name", {})) == "string"
        and _schema_type(meta_props.get("generateName", {})) == "string"
    ):
        return schema
    props["kind"] = {"type": "string"}
    props["apiVersion"] = {"type": "string"}
    props["metadata"] = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "generateName": {"type": "string"}},
    }
    return {**schema, "properties": props}


def populate_refs(schema: Schema, definitions: Mapping[str, Schema], visited: frozenset[str] = frozenset()) -> Schema:
    """resolver populateRefs: a ``$ref`` (also inside ``allOf``) replaced by the referred schema, recursively."""
    ref = _ref_of(schema)
    if ref is not None:
        if ref in visited:
            return {"type": "object"}  # circular reference: empty object placeholder
        visited = visited | {ref}
        schema = definitions[ref]
        if ref == "io.k8s.apimachinery.pkg.util.intstr.IntOrString":
            # The served OpenAPI v3 carries format int-or-string; kubernetes-validate's JSON schema dropped it.
            schema = {**schema, "format": "int-or-string"}
    out = dict(schema)
    if isinstance(schema.get("properties"), Mapping):
        out["properties"] = {k: populate_refs(v, definitions, visited) for k, v in schema["properties"].items()}
    if isinstance(schema.get("additionalProperties"), Mapping):
        out["additionalProperties"] = populate_refs(schema["additionalProperties"], definitions, visited)
    if isinstance(schema.get("items"), Mapping):
        out["items"] = populate_refs(schema["items"], definitions, visited)
    return out


def _ref_of(schema: Schema) -> str | None:
    ref = schema.get("$ref")
    if isinstance(ref, str):
        return ref.rpartition("/")[2]
    for wrapped in schema.get("allOf") or ():
        found = _ref_of(wrapped)
        if found is not None:
            return found
    return None


# --------------------------------------------------------------------------------------------------------
# Schema resolution and REST mapping

_BUILTIN_RESOURCES = {
    ("", "v1", "pods"): "Pod",
    ("", "v1", "namespaces"): "Namespace",
    ("", "v1", "configmaps"): "ConfigMap",
    ("", "v1", "services"): "Service",
    ("", "v1", "nodes"): "Node",
    ("batch", "v1", "jobs"): "Job",
    ("batch", "v1", "cronjobs"): "CronJob",
    ("apps", "v1", "deployments"): "Deployment",
    ("apps", "v1", "statefulsets"): "StatefulSet",
    ("apps", "v1", "replicasets"): "ReplicaSet",
    ("apps", "v1", "daemonsets"): "DaemonSet",
}
OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"


class SchemaResolver:
    """REST mapping and schemas for CRD kinds (a CRD catalog) and built-in kinds (kubernetes-validate)."""

    def __init__(self, catalog: CrdCatalog | None = None, kube_version: str = kube_schemas.KUBERNETES_VERSION) -> None:
        self.catalog = catalog or default_catalog()
        self.kube_version = kube_version

    def kinds_for(self, group: str, version: str, resource: str) -> list[GVK]:
        """RESTMapper.KindsFor; an unknown resource raises instead of being skipped like on the server."""
        builtin = _BUILTIN_RESOURCES.get((group, version, resource))
        if builtin:
            return [GVK(group, version, builtin)]
        for crd_group, kind in self.catalog.group_kinds():
            if crd_group != group:
                continue
            for served in self.catalog.versions(crd_group, kind):
                if served.version == version and served.plural == resource:
                    return [GVK(group, version, kind)]
        raise UnmodelledCelError(f"no kind known for resource {resource!r} in {group or 'core'}/{version}")

    @functools.cache  # noqa: B019 - resolvers live for the test session
    def _definitions(self) -> Mapping[str, Schema]:
        schema_dir = f"v{kube_schemas._resolved_version(self.kube_version)}-local"
        contents = kv_utils.schema_contents(f"kubernetes-json-schema/{schema_dir}/_definitions.json", self.kube_version)
        return dict(contents["$defs"])

    def resolve_schema(self, gvk: GVK) -> Schema:
        """The kind's schema with every $ref populated (ClientDiscoveryResolver.ResolveSchema)."""
        api_version = f"{gvk.group}/{gvk.version}" if gvk.group else gvk.version
        definitions = self._definitions()
        if self.catalog.knows(api_version, gvk.kind):
            schema = dict(self.catalog.lookup(api_version, gvk.kind).schema)
            # The served OpenAPI of a CRD refers to the full ObjectMeta for metadata.
            schema["properties"] = {**schema.get("properties", {}), "metadata": {"$ref": f"#/$defs/{OBJECT_META}"}}
        else:
            schema_dir = f"v{kube_schemas._resolved_version(self.kube_version)}-local"
            file = f"{gvk.kind.lower()}-{kube_schemas._schema_api_version(api_version)}.json"
            try:
                schema = kv_utils.schema_contents(f"kubernetes-json-schema/{schema_dir}/{file}", self.kube_version)
            except FileNotFoundError as error:
                raise UnmodelledCelError(f"no schema for {gvk}") from error
        return populate_refs(schema, definitions)

    @functools.cache  # noqa: B019
    def decl_type(self, gvk: GVK) -> CelType:
        """TypeChecker.declType: SchemaDeclType(schema, isResourceRoot=true) named after the kind."""
        declared = schema_decl_type(self.resolve_schema(gvk), True, gvk.kind)
        if declared is None:
            raise UnmodelledCelError(f"the schema of {gvk} is not exposed to CEL")
        return declared


def types_to_check(policy: Mapping[str, Any], resolver: SchemaResolver) -> list[GVK]:
    """typesToCheck: kinds of matchConstraints.resourceRules without wildcards or subresources, sorted."""
    rules = ((policy.get("spec") or {}).get("matchConstraints") or {}).get("resourceRules") or []
    found: set[GVK] = set()
    count = 0
    for rule in rules:
        groups = list(rule.get("apiGroups") or [])
        versions = list(rule.get("apiVersions") or [])
        if any("*" in g for g in groups) or any("*" in v for v in versions):
            continue
        resources = [r for r in rule.get("resources") or [] if "*" not in r and "/" not in r]
        for group, version, resource in itertools.product(sorted(groups), sorted(versions), sorted(resources)):
            for gvk in resolver.kinds_for(group, version, resource):
                found.add(gvk)
                count += 1
                if count == MAX_TYPES_TO_CHECK:
                    return sorted(found, key=lambda g: (g.group, g.version, g.kind))
    return sorted(found, key=lambda g: (g.group, g.version, g.kind))


# --------------------------------------------------------------------------------------------------------
# Environment (typechecking.go buildEnvSet, plugin/cel/compile.go, composition.go)


def build_request_type() -> CelType:
    gvk = object_type("kubernetes.GroupVersionKind", {"group": STRING, "version": STRING, "kind": STRING})
    gvr = object_type("kubernetes.GroupVersionResource", {"group": STRING, "version": STRING, "resource": STRING})
    user_info = object_type(
        "kubernetes.UserInfo",
        {"username": STRING, "uid": STRING, "groups": list_of(STRING), "extra": map_of(STRING, list_of(STRING))},
    )
    return object_type(
        "kubernetes.AdmissionRequest",
        {
            "kind": gvk,
            "resource": gvr,
            "subResource": STRING,
            "requestKind": gvk,
            "requestResource": gvr,
            "requestSubResource": STRING,
            "name": STRING,
            "namespace": STRING,
            "operation": STRING,
            "userInfo": user_info,
            "dryRun": BOOL,
            "options": DYN,
        },
    )


def build_namespace_type() -> CelType:
    strings = list_of(STRING)
    condition = object_type(
        "kubernetes.NamespaceCondition",
        {"status": STRING, "type": STRING, "lastTransitionTime": TIMESTAMP, "message": STRING, "reason": STRING},
    )
    metadata = object_type(
        "kubernetes.NamespaceMetadata",
        {
            "name": STRING,
            "generateName": STRING,
            "namespace": STRING,
            "labels": map_of(STRING, STRING),
            "annotations": map_of(STRING, STRING),
            "UID": STRING,
            "creationTimestamp": TIMESTAMP,
            "deletionGracePeriodSeconds": INT,
            "deletionTimestamp": TIMESTAMP,
            "generation": INT,
            "resourceVersion": STRING,
            "finalizers": strings,
        },
    )
    return object_type(
        "kubernetes.Namespace",
        {
            "metadata": metadata,
            "spec": object_type("kubernetes.NamespaceSpec", {"finalizers": strings}),
            "status": object_type("kubernetes.NamespaceStatus", {"conditions": list_of(condition), "phase": STRING}),
        },
    )


AUTHORIZER = CelType("opaque", name="kubernetes.authorization.Authorizer")


def convert_cel_type_to_decl_type(t: CelType | None) -> CelType:
    """composition.go convertCelTypeToDeclType: what a variable's type becomes inside ``variables``."""
    if t is None:
        return DYN
    if t.kind in _PRIMITIVES or t.kind in ("dyn", "null"):
        return t
    if t.kind == "list":
        return list_of(convert_cel_type_to_decl_type(t.params[0]))
    if t.kind == "map":
        return map_of(convert_cel_type_to_decl_type(t.params[0]), convert_cel_type_to_decl_type(t.params[1]))
    return DYN


class TypeChecker:
    """typechecking.go TypeChecker over offline schemas."""

    def __init__(self, resolver: SchemaResolver | None = None) -> None:
        self.resolver = resolver or SchemaResolver()

    def environment(self, policy: Mapping[str, Any], gvk: GVK | None) -> dict[str, CelType]:
        """The type-checking environment for ``gvk``; ``None``: the run-time one, where ``object`` is dyn
        (validating/compile.go compiles with DynType for object, oldObject and params)."""
        spec = policy.get("spec") or {}
        if spec.get("paramKind"):
            raise UnmodelledCelError("policies with paramKind are not modelled")
        declared = DYN if gvk is None else self.resolver.decl_type(gvk)
        return {
            "namespaceObject": build_namespace_type(),
            "request": build_request_type(),
            "object": declared,
            "oldObject": declared,
            "authorizer": AUTHORIZER,
        }

    def compile_variables(
        self, policy: Mapping[str, Any], gvk: GVK | None
    ) -> tuple[dict[str, CelType], list[tuple[str, CheckResult]]]:
        """CompileAndStoreVariables: each variable sees the ones before it; failures become dyn."""
        env = self.environment(policy, gvk)
        fields: dict[str, CelType] = {}
        env["variables"] = CelType("object", name="kubernetes.variables", fields=fields)
        results: list[tuple[str, CheckResult]] = []
        for variable in (policy.get("spec") or {}).get("variables") or []:
            result = check_expression(str(variable["expression"]), env)
            fields[str(variable["name"])] = convert_cel_type_to_decl_type(result.output_type)
            results.append((str(variable["name"]), result))
        return env, results

    def check(
        self, policy: Mapping[str, Any], *, strict: bool = True, match_conditions: bool = False
    ) -> list[TypeCheckWarning]:
        """Check: per matched kind, the issues of every validation's expression and messageExpression.

        ``strict`` adds every variable's own expression (``spec.variables[name]``); ``match_conditions``
        adds ``spec.matchConditions[i].expression``.
        """
        spec = policy.get("spec") or {}
        warnings: list[TypeCheckWarning] = []
        for gvk in types_to_check(policy, self.resolver):
            env, variable_results = self.compile_variables(policy, gvk)
            checked: list[tuple[str, str]] = []
            if match_conditions:
                checked += [
                    (f"spec.matchConditions[{i}].expression", str(c["expression"]))
                    for i, c in enumerate(spec.get("matchConditions") or [])
                ]
            for i, validation in enumerate(spec.get("validations") or []):
                checked.append((f"spec.validations[{i}].expression", str(validation["expression"])))
                if validation.get("messageExpression"):
                    checked.append((f"spec.validations[{i}].messageExpression", str(validation["messageExpression"])))
            if strict:
                warnings += [
                    TypeCheckWarning(f"spec.variables[{name}]", gvk, result.issues)
                    for name, result in variable_results
                    if result.issues
                ]
            for field_ref, expression in checked:
                result = check_expression(expression, env)
                if result.issues:
                    warnings.append(TypeCheckWarning(field_ref, gvk, result.issues))
        return warnings

    def runtime_issues(self, policy: Mapping[str, Any]) -> list[tuple[str, tuple[Issue, ...]]]:
        """(field, issues) of every expression that fails to compile where the server runs it, object untyped:
        such an expression errors on every request, which failurePolicy Fail turns into a refusal."""
        spec = policy.get("spec") or {}
        _, variable_results = self.compile_variables(policy, None)
        out = [(f"spec.variables[{name}]", r.issues) for name, r in variable_results if r.issues]
        env, _ = self.compile_variables(policy, None)
        expressions = [
            (f"spec.matchConditions[{i}].expression", str(c["expression"]))
            for i, c in enumerate(spec.get("matchConditions") or [])
        ]
        for i, validation in enumerate(spec.get("validations") or []):
            expressions.append((f"spec.validations[{i}].expression", str(validation["expression"])))
            if validation.get("messageExpression"):
                expressions.append((f"spec.validations[{i}].messageExpression", str(validation["messageExpression"])))
        for field_ref, expression in expressions:
            result = check_expression(expression, env)
            if result.issues:
                out.append((field_ref, result.issues))
        return out

    def expression_warnings(self, policy: Mapping[str, Any]) -> list[dict[str, str]]:
        """What the server would publish as status.typeChecking.expressionWarnings (fieldRef, warning)."""
        by_field: dict[str, list[str]] = {}
        for warning in self.check(policy, strict=False):
            by_field.setdefault(warning.field_ref, []).append(
                f"{warning.gvk}: " + "\n".join(str(i) for i in warning.issues) + "\n"
            )
        return [{"fieldRef": ref, "warning": "\n".join(texts)} for ref, texts in by_field.items()]


def describe(warnings: Sequence[TypeCheckWarning]) -> str:
    return "\n".join(str(w) for w in warnings) or "no type-check warnings"
