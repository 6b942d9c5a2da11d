"""The CRDs' CEL validation rules (``x-kubernetes-validations``), evaluated as the API server does.

Used by ``anchorage_devcluster.apiserver``: :func:`compile_schema` runs when a CRD is registered (and rejects a
rule the fake cannot evaluate, so nothing is silently accepted), :func:`validate` on every write of a
custom resource. Rules are evaluated with cel-python (``celpy``) against the object converted by its
schema (``integer`` → int, ``number`` → double, so ``1.0`` is a double as in Kubernetes).

What the fake supports, and where it follows Kubernetes rather than cel-python:

* variables ``self`` and ``oldSelf`` (transition rules: evaluated on update only, when the old object
  has a value at the same place; not under list items — the fake does not correlate list items, so
  such a rule is refused at registration, as is ``optionalOldSelf``);
* the standard CEL functions and macros cel-python has (``has``, ``all``, ``exists``, ``exists_one``,
  ``map``, ``filter``, ``size``, ``contains``, ``startsWith``, ``endsWith``, ``matches``, conversions,
  timestamps and durations), equality across numeric types (``1.0 == 1`` is true, as in Kubernetes,
  where cel-python has no overload), equality of different types being false, and ``error || error``
  giving one of the errors (cel-python's message for it doubled per element inside ``exists``/``all``;
  this module replaces cel-python's ``logical_or``/``logical_and`` process-wide to avoid that);
* of the Kubernetes CEL libraries, the string helpers ``lowerAscii``, ``upperAscii``, ``trim``,
  ``replace``, ``split``, ``join``, ``indexOf``, ``lastIndexOf`` and the list helpers ``isSorted``,
  ``sum``, ``min``, ``max``. Not supported (refused at registration): quantities, ``url``, ``ip``,
  ``cidr``, ``format``, ``authorizer``, regex ``find``/``findAll``, optional syntax (``.?``), and
  anything else cel-python does not parse;
* ``message``, ``messageExpression`` (falls back to ``message``, then ``failed rule: <rule>``),
  ``fieldPath`` (``.a.b`` / ``['a']``, checked against the schema) and ``reason``
  (``FieldValueInvalid`` by default, ``FieldValueForbidden``, ``FieldValueRequired``,
  ``FieldValueDuplicate``), rendered into causes as the API server writes them.

No cost estimation and no ratcheting: every rule is checked on every write (results are remembered per
value, as rules are pure).
"""

from __future__ import annotations

import functools
import itertools
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import celpy
import lark
from celpy import celtypes
from celpy.adapter import json_to_cel
from celpy.evaluation import CELEvalError, base_functions, bool_eq

Cause = dict[str, str]
Failure = tuple[str, tuple[str, ...], str]  # reason, field path below the rule's node, message
CACHE_SIZE = 4096  # remembered (value → failures) per schema node

MACROS = frozenset({"has", "dyn", "all", "exists", "exists_one", "map", "filter"})
TYPE_NAMES = frozenset({"int", "uint", "double", "string", "bool", "bytes", "list", "map", "null_type", "type",
                        "duration", "timestamp"})
REASONS = {"FieldValueInvalid", "FieldValueForbidden", "FieldValueRequired", "FieldValueDuplicate"}


class RuleError(ValueError):
    """A validation rule the fake refuses at CRD registration (invalid, or not evaluable here)."""


# ----------------------------------------------------------------- Kubernetes semantics and libraries
_NUMBERS = (celtypes.IntType, celtypes.UintType, celtypes.DoubleType)


def _equal(left: Any, right: Any) -> Any:
    """CEL equality as Kubernetes has it: numbers compare across types, other type mismatches are unequal."""
    for side in (left, right):
        if isinstance(side, CELEvalError):
            return side  # an error operand stays an error
    if isinstance(left, _NUMBERS) and isinstance(right, _NUMBERS):
        return celtypes.BoolType(float(left) == float(right))
    try:
        return celtypes.BoolType(bool(bool_eq(left, right)))
    except TypeError:
        return celtypes.BoolType(False)


def _not_equal(left: Any, right: Any) -> Any:
    equal = _equal(left, right)
    return equal if isinstance(equal, CELEvalError) else celtypes.BoolType(not equal)


def _string_function(fn: Callable[..., Any]) -> Callable[..., Any]:
    def wrapped(*args: Any) -> Any:
        result = fn(*[str(a) if isinstance(a, celtypes.StringType) else a for a in args])
        if isinstance(result, str):
            return celtypes.StringType(result)
        if isinstance(result, list):
            return celtypes.ListType([celtypes.StringType(r) for r in result])
        return celtypes.IntType(result)
    return wrapped


def _sum(items: celtypes.ListType) -> Any:
    total: Any = celtypes.IntType(0)
    for item in items:
        total = total + item
    return total


_ORIGINAL_OR, _ORIGINAL_AND = celtypes.logical_or, celtypes.logical_and


def _two_errors(x: Any, y: Any, symbol: str) -> Any:
    if isinstance(x, Exception) or isinstance(y, Exception):
        return x if isinstance(x, Exception) else y
    raise TypeError(f"no such overload: {type(x).__name__} {symbol} {type(y).__name__}")


def _logical_or(x: Any, y: Any) -> Any:
    """``||`` as cel-python has it, except that two errors give the first one.

    cel-python raises a TypeError quoting both operands' reprs there; inside ``exists``/``all`` over a list
    whose elements all fail (``!has(self.baseline) || self.entries.exists(e, e.name == self.baseline)``
    without a baseline) each step quotes the previous message again, escaped, so its size doubles per
    element: 40 entries took gigabytes. CEL only asks for an error, not that text.
    """
    if isinstance(x, celtypes.BoolType) or isinstance(y, celtypes.BoolType):
        return _ORIGINAL_OR(x, y)
    return _two_errors(x, y, "||")


def _logical_and(x: Any, y: Any) -> Any:
    """``&&`` as cel-python has it, except that two errors give the first one (see :func:`_logical_or`)."""
    if isinstance(x, celtypes.BoolType) or isinstance(y, celtypes.BoolType):
        return _ORIGINAL_AND(x, y)
    return _two_errors(x, y, "&&")


# The macros all()/exists() call celtypes.logical_and/_or by module attribute, not through the function
# table: the fake replaces them there (as it patches kmock's path parser; see devcluster.apiserver).
celtypes.logical_or = _logical_or
celtypes.logical_and = _logical_and

EXTENSIONS: dict[str, Callable[..., Any]] = {
    "_||_": _logical_or,
    "_&&_": _logical_and,
    "_==_": _equal,
    "_!=_": _not_equal,
    "lowerAscii": _string_function(lambda s: s.lower()),
    "upperAscii": _string_function(lambda s: s.upper()),
    "trim": _string_function(lambda s: s.strip()),
    "replace": _string_function(lambda s, old, new, n=-1: s.replace(old, new, int(n))),
    "split": _string_function(lambda s, sep, n=-1: s.split(sep, int(n) - 1 if int(n) > 0 else -1)),
    "join": lambda items, sep=celtypes.StringType(""): celtypes.StringType(str(sep).join(str(i) for i in items)),
    "indexOf": lambda target, x: celtypes.IntType(
        target.find(x) if isinstance(target, str) else next((i for i, v in enumerate(target) if _equal(v, x)), -1)),
    "lastIndexOf": lambda target, x: celtypes.IntType(
        target.rfind(x) if isinstance(target, str)
        else next((i for i in range(len(target) - 1, -1, -1) if _equal(target[i], x)), -1)),
    "isSorted": lambda items: celtypes.BoolType(all(a <= b for a, b in itertools.pairwise(items))),
    "sum": _sum,
    "min": lambda items: min(items),
    "max": lambda items: max(items),
}
SUPPORTED_FUNCTIONS = frozenset(base_functions) | MACROS | frozenset(EXTENSIONS)


# ----------------------------------------------------------------- compiled rules and schema tree
@dataclass
class Rule:
    """One compiled ``x-kubernetes-validations`` entry."""

    rule: str
    program: celpy.Runner
    message: str | None
    message_program: celpy.Runner | None
    field_path: list[str]
    reason: str
    transition: bool


@dataclass
class Node:
    """A schema node with its compiled rules and the nodes below it that carry rules."""

    type: str | None
    schema: dict[str, Any]
    rules: list[Rule] = field(default_factory=list)
    properties: dict[str, Node] = field(default_factory=dict)
    items: Node | None = None
    additional: Node | None = None
    cache: dict[str, list[Failure]] = field(default_factory=dict, repr=False)

    @functools.cached_property
    def any_rules(self) -> bool:
        """Whether this node or one below it has rules (nodes without are not walked)."""
        children = [*self.properties.values(), self.items, self.additional]
        return bool(self.rules) or any(c is not None and c.any_rules for c in children)


_ENV = celpy.Environment()


def _names(tree: lark.Tree[Any]) -> Iterator[tuple[str, str]]:
    """(kind, name) of each function, method and identifier the expression uses; macro variables are 'bound'."""
    for node in tree.iter_subtrees():
        if node.data == "ident_arg":
            yield "function", str(node.children[0])
        elif node.data == "member_dot_arg":
            name = str(node.children[1])
            yield "function", name
            args = node.children[2] if len(node.children) > 2 else None
            if name in MACROS and isinstance(args, lark.Tree) and args.children:
                first = args.children[0]
                idents = [t for t in first.iter_subtrees() if t.data == "ident"] if isinstance(first, lark.Tree) else []
                if idents:
                    yield "bound", str(idents[0].children[0])
        elif node.data in ("dot_ident", "dot_ident_arg"):
            yield "unsupported", "." + str(node.children[0])
        elif node.data == "ident":
            yield "ident", str(node.children[0])


def _compile(expr: str, where: str, allow_old: bool) -> tuple[celpy.Runner, bool]:
    """Compile one expression; returns the program and whether it uses ``oldSelf``."""
    try:
        tree = _ENV.compile(expr)
    except Exception as exc:  # celpy raises CELParseError (and lark errors) with a caret diagram
        line, column = getattr(exc, "line", None), getattr(exc, "column", None)
        at = f"syntax error at line {line}, column {column}" if line is not None else " ".join(str(exc).split())[:240]
        raise RuleError(f"{where}: the CEL expression {expr!r} does not compile ({at}; the fake parses with "
                        "cel-python, which lacks optional syntax '.?')") from None
    names = list(_names(tree))
    bound = {name for kind, name in names if kind == "bound"}
    for kind, name in names:
        if kind == "function" and name not in SUPPORTED_FUNCTIONS:
            raise RuleError(f"{where}: {expr!r} calls {name}(), which the cluster fake cannot evaluate "
                            f"(supported: see anchorage_devcluster.cel)")
        if kind == "unsupported":
            raise RuleError(f"{where}: {expr!r} uses a leading-dot name {name}, which the cluster fake does not support")
        if kind == "ident" and name not in bound | TYPE_NAMES | {"self", "oldSelf", "null"}:
            raise RuleError(f"{where}: {expr!r} refers to {name!r}; only self and oldSelf are variables of a "
                            "validation rule")
    uses_old = any(kind == "ident" and name == "oldSelf" for kind, name in names)
    if uses_old and not allow_old:
        raise RuleError(f"{where}: {expr!r} uses oldSelf under a list item, which the fake cannot correlate "
                        "with the old object; move the rule to the list's parent")
    return _ENV.program(tree, functions=EXTENSIONS), uses_old


def _field_path(text: str, schema: dict[str, Any], where: str) -> list[str]:
    parts = re.findall(r"\.([A-Za-z_][A-Za-z0-9_-]*)|\['([^']*)'\]", text)
    if not text:
        return []
    if "".join(f".{a}" if a else f"['{b}']" for a, b in parts) != text:
        raise RuleError(f"{where}: fieldPath {text!r} is not a path like '.spec.field' or \"['key']\"")
    path, node = [], schema
    for dotted, quoted in parts:
        name = dotted or quoted
        props = node.get("properties") or {}
        if name in props:
            node = props[name]
        elif isinstance(node.get("additionalProperties"), dict):
            node = node["additionalProperties"]
        else:
            raise RuleError(f"{where}: fieldPath {text!r} names {name!r}, which the schema does not declare")
        path.append(name)
    return path


def _rule(entry: dict[str, Any], schema: dict[str, Any], where: str, allow_old: bool) -> Rule:
    unknown = set(entry) - {"rule", "message", "messageExpression", "fieldPath", "reason"}
    if unknown:
        raise RuleError(f"{where}: {sorted(unknown)} in a validation rule are not supported by the cluster fake")
    if not isinstance(entry.get("rule"), str) or not entry["rule"].strip():
        raise RuleError(f"{where}: a validation rule needs a non-empty 'rule'")
    reason = entry.get("reason", "FieldValueInvalid")
    if reason not in REASONS:
        raise RuleError(f"{where}: reason {reason!r} is not one of {sorted(REASONS)}")
    program, transition = _compile(entry["rule"], where, allow_old)
    message_program = _compile(entry["messageExpression"], where, allow_old)[0] if entry.get("messageExpression") \
        else None
    return Rule(entry["rule"], program, entry.get("message"), message_program,
                _field_path(entry.get("fieldPath", ""), schema, where), reason, transition)


def compile_schema(schema: dict[str, Any], where: str = "openAPIV3Schema", *, in_list: bool = False) -> Node:
    """Compile every rule of a structural schema; :class:`RuleError` on one the fake cannot evaluate."""
    node = Node(schema.get("type"), schema)
    for entry in schema.get("x-kubernetes-validations") or []:
        if "optionalOldSelf" in entry:
            raise RuleError(f"{where}: optionalOldSelf is not supported by the cluster fake")
        node.rules.append(_rule(entry, schema, f"{where}.x-kubernetes-validations", not in_list))
    for name, sub in (schema.get("properties") or {}).items():
        node.properties[name] = compile_schema(sub, f"{where}.properties.{name}", in_list=in_list)
    if isinstance(schema.get("items"), dict):
        node.items = compile_schema(schema["items"], f"{where}.items", in_list=True)
    if isinstance(schema.get("additionalProperties"), dict):
        node.additional = compile_schema(schema["additionalProperties"], f"{where}.additionalProperties",
                                         in_list=in_list)
    return node


# ----------------------------------------------------------------- evaluation
def to_cel(value: Any, schema: dict[str, Any]) -> Any:
    """A JSON value as a CEL value, typed by its schema (Kubernetes reads ``number`` fields as doubles)."""
    kind = schema.get("type")
    if value is None:
        return None
    if kind == "number" and isinstance(value, int | float) and not isinstance(value, bool):
        return celtypes.DoubleType(value)
    if kind == "array" and isinstance(value, list):
        return celtypes.ListType([to_cel(v, schema.get("items") or {}) for v in value])
    if kind == "object" and isinstance(value, dict):
        props, extra = schema.get("properties") or {}, schema.get("additionalProperties")
        return celtypes.MapType({celtypes.StringType(k): to_cel(v, props.get(k) or (extra if isinstance(extra, dict)
                                                                                    else {}))
                                 for k, v in value.items()})
    return json_to_cel(value)


def _path_text(path: list[str | int]) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
    return text or "<root>"


def _evaluate(program: celpy.Runner, activation: dict[str, Any]) -> Any:
    result = program.evaluate(activation)
    if isinstance(result, CELEvalError):
        raise result
    return result


def _failure(rule: Rule, kind: str | None, activation: dict[str, Any]) -> Failure:
    message = rule.message or f"failed rule: {rule.rule}"
    if rule.message_program is not None:
        try:
            text = _evaluate(rule.message_program, activation)
            if isinstance(text, str) and text.strip() and "\n" not in text:
                message = str(text)
        except CELEvalError:
            pass
    value = f'"{kind or "object"}"'
    rendered = {"FieldValueForbidden": f"Forbidden: {message}", "FieldValueRequired": f"Required value: {message}",
                "FieldValueDuplicate": f"Duplicate value: {value}"}.get(rule.reason, f"Invalid value: {value}: {message}")
    return rule.reason, tuple(rule.field_path), rendered


def _node_failures(node: Node, value: Any, old: Any) -> list[Failure]:
    """(reason, field path below the node, message) of each rule of ``node`` that ``value`` fails."""
    failures: list[Failure] = []
    current = to_cel(value, node.schema)
    previous = to_cel(old, node.schema) if old is not None else None
    kind = node.type or "object"
    for rule in node.rules:
        if rule.transition and previous is None:
            continue
        activation = {"self": current, **({"oldSelf": previous} if rule.transition else {})}
        try:
            ok = _evaluate(rule.program, activation)
        except CELEvalError as exc:
            detail = exc.args[0] if exc.args else exc
            failures.append(("FieldValueInvalid", (), f'Invalid value: "{kind}": {detail} evaluating rule: {rule.rule}'))
            continue
        if not isinstance(ok, celtypes.BoolType):
            failures.append(("FieldValueInvalid", (), f'Invalid value: "{kind}": rule {rule.rule!r} evaluated to '
                                                      f"{type(ok).__name__}, not bool"))
        elif not ok:
            failures.append(_failure(rule, node.type, activation))
    return failures


def _cached_failures(node: Node, value: Any, old: Any) -> list[Failure]:
    """:func:`_node_failures`, remembered per value: rules are pure, and a campaign writes the same agent spec
    into every Trial (cel-python evaluates a rule in about 0.3 ms, the schema check of a whole object is ~0.05)."""
    uses_old = old is not None and any(rule.transition for rule in node.rules)
    key = json.dumps([value, old if uses_old else None], sort_keys=True, default=str)
    found = node.cache.get(key)
    if found is None:
        if len(node.cache) >= CACHE_SIZE:
            node.cache.clear()
        found = node.cache[key] = _node_failures(node, value, old)
    return found


def validate(node: Node, value: Any, old: Any = None, path: list[str | int] | None = None) -> list[Cause]:
    """Causes for every rule that ``value`` fails (``old``: the stored object on update, for oldSelf)."""
    path = path or []
    if value is None or not node.any_rules:
        return []
    causes: list[Cause] = [{"reason": reason, "field": _path_text([*path, *below]), "message": message}
                           for reason, below, message in (_cached_failures(node, value, old) if node.rules else [])]
    if isinstance(value, dict):
        for name, sub in value.items():
            child = node.properties.get(name) or node.additional
            if child is not None:
                old_sub = old.get(name) if isinstance(old, dict) else None
                causes += validate(child, sub, old_sub, [*path, name])
    elif isinstance(value, list) and node.items is not None:
        for index, item in enumerate(value):
            causes += validate(node.items, item, None, [*path, index])
    return causes
