"""The chart's RBAC lists exactly what the operator's code does: application rules are derived here by
reading ``operator/anchorage/controller`` (kopf handler decorators and Kubernetes client calls, followed
through the ``kube`` wrappers) and must equal the rendered application Roles, both ways; framework rules
are kopf's own needs, declared below with the reason for each; the peering rules are derived by reading kopf's
own peering code (the Kubernetes API calls reachable from the peering tasks kopf spawns)."""

from __future__ import annotations

import ast
import functools
import importlib
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from charts.conftest import NAMESPACE, Rendered

Rule = tuple[str, str, str]  # (apiGroup, resource, verb)
Render = Callable[[dict[str, Any]], Rendered]

CONTROLLER = "anchorage.controller"
# kopf decorators: handlers that change objects (progress annotations, finalizers, status) vs. watch-only.
CHANGING = {"create", "update", "resume", "delete", "field", "timer", "daemon"}
WATCHING = {"event", "index"}
# Typed client methods → (apiGroup, plural) of the kind in their name; an unknown kind fails the test.
TYPED_KINDS = {"job": ("batch", "jobs"), "network_policy": ("networking.k8s.io", "networkpolicies"),
               "config_map": ("", "configmaps"), "secret": ("", "secrets"), "pod": ("", "pods"),
               "event": ("", "events"), "service": ("", "services"), "local_queue": ("kueue.x-k8s.io", "localqueues"),
               "local_queue_pending_workloads": ("visibility.kueue.x-k8s.io", "localqueues/pendingworkloads")}
METHOD = re.compile(r"^(?P<verb>create|get|read|list|patch|replace|delete)_namespaced_(?P<kind>\w+?)(?P<status>_status)?$")
VERB = {"read": "get", "replace": "update", "GET": "get", "POST": "create", "PATCH": "patch", "PUT": "update",
        "DELETE": "delete"}
KOPF_FRAMEWORK: dict[Rule, str] = {
    ("apiextensions.k8s.io", "customresourcedefinitions", "list"): "kopf observes CRDs (resource scanning)",
    ("apiextensions.k8s.io", "customresourcedefinitions", "watch"): "kopf observes CRDs (resource scanning)",
    ("", "namespaces", "list"): "kopf observes namespaces to resolve watched ones",
    ("", "namespaces", "watch"): "kopf observes namespaces to resolve watched ones",
    ("", "events", "create"): "kopf posts events about handled objects",
}
# kopf's HTTP primitives (kopf._cogs.clients.api) → RBAC verb; api.get is get or list by its URL.
KOPF_API_VERBS = {"patch": "patch", "post": "create", "delete": "delete", "stream": "watch"}


# ----- deriving the rules from the code --------------------------------------------------------------


def modules() -> Iterator[tuple[Any, ast.Module]]:
    package = importlib.import_module(CONTROLLER)
    for path in sorted(Path(package.__file__ or "").parent.glob("*.py")):
        module = importlib.import_module(f"{CONTROLLER}.{path.stem}") if path.stem != "__init__" else package
        yield module, ast.parse(path.read_text(), str(path))


def evaluate(node: ast.expr, module: Any) -> Any:
    """The value of a decorator or call argument (a literal or a module-level name such as API_GROUP)."""
    return eval(compile(ast.Expression(node), "<arg>", "eval"), vars(module))


def dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Attribute):
        return f"{dotted(node.value)}.{node.attr}"
    return node.id if isinstance(node, ast.Name) else ""


def handler_rules(module: Any, tree: ast.Module) -> set[Rule]:
    rules: set[Rule] = set()
    for fn in (n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))):
        for deco in (d for d in fn.decorator_list if isinstance(d, ast.Call)):
            name = dotted(deco.func)
            if not name.startswith("kopf."):
                continue
            kind = name.rsplit(".", 1)[-1]
            if kind not in CHANGING | WATCHING:
                continue
            group, _version, plural = (evaluate(a, module) for a in deco.args[:3])
            rules |= {(group, plural, "list"), (group, plural, "watch")}
            if kind in CHANGING:
                rules |= {(group, plural, "patch"), (group, f"{plural}/status", "patch")}
    return rules


def client_ops(node: ast.AST) -> Iterator[tuple[str | None, str, str]]:
    """(apiGroup or None for "the custom object's", resource, verb) of a Kubernetes client method named or
    called at ``node`` (a method may be passed on uncalled, e.g. to ``functools.partial``)."""
    match = METHOD.match(node.attr) if isinstance(node, ast.Attribute) else None
    if match and match["kind"] == "custom_object":
        yield None, "/status" if match["status"] else "", VERB.get(match["verb"], match["verb"])
    elif match:
        assert match["kind"] in TYPED_KINDS, f"unknown kind in {match.string}: add it to TYPED_KINDS"
        group, plural = TYPED_KINDS[match["kind"]]
        yield group, plural + ("/status" if match["status"] else ""), VERB.get(match["verb"], match["verb"])
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "call_api":
        path = node.args[0]
        parts = path.values if isinstance(path, ast.JoinedStr) else [path]
        text = "".join(str(v.value) if isinstance(v, ast.Constant) else "{}" for v in parts)
        found = re.match(r"^/apis?/(?:(?P<g>[^/]+)/)?v\d\w*/namespaces/\{\}/(?P<plural>[a-z]+)", text)
        method = node.args[1]
        assert found and isinstance(method, ast.Constant), f"cannot read call_api({ast.unparse(node)})"
        yield found["g"] or "", found["plural"], VERB[str(method.value)]


def wrapper_ops(tree: ast.Module) -> dict[str, set[tuple[str | None, str, str]]]:
    """Each function of ``kube``: the client operations it performs, following calls to its siblings."""
    functions = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    direct = {name: {op for node in ast.walk(fn) for op in client_ops(node)} for name, fn in functions.items()}
    calls = {name: {c.func.id for c in ast.walk(fn) if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)
                    and c.func.id in functions} for name, fn in functions.items()}
    ops: dict[str, set[tuple[str | None, str, str]]] = {}
    for name in functions:
        seen, todo = set(), [name]
        while todo:
            current = todo.pop()
            if current not in seen:
                seen.add(current)
                todo.extend(calls[current])
        ops[name] = set().union(*(direct[n] for n in seen))
    return ops


def call_rules(module: Any, tree: ast.Module, kube: dict[str, set[tuple[str | None, str, str]]],
               group: str) -> set[Rule]:
    rules: set[Rule] = set()
    for node in ast.walk(tree):
        ops: list[tuple[tuple[str | None, str, str], ast.Call | None]] = [(op, None) for op in client_ops(node)]
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and dotted(node.func.value) == "kube":
            ops += [(op, node) for op in kube.get(node.func.attr, ())]  # kube's functions (not its classes)
        for (op_group, resource, verb), call in ops:
            if op_group is None:  # a custom object: the plural is the kube wrapper's first argument
                assert call is not None, f"custom object call outside the kube wrappers: {ast.unparse(node)}"
                rules.add((group, f"{evaluate(call.args[0], module)}{resource}", verb))
            else:
                rules.add((op_group, resource, verb))
    return rules


def derived_application_rules() -> set[Rule]:
    from anchorage.manifests import API_GROUP

    parsed = list(modules())
    kube = wrapper_ops(next(tree for module, tree in parsed if module.__name__.endswith(".kube")))
    rules: set[Rule] = set()
    for module, tree in parsed:
        rules |= handler_rules(module, tree)
        # the operator's own watches (controller.watching): list and watch what it declares it watches
        rules |= {(group, plural, verb) for group, _version, plural in getattr(module, "WATCHED", {}).values()
                  for verb in ("list", "watch")}
        if not module.__name__.endswith(".kube"):
            rules |= call_rules(module, tree, kube, API_GROUP)
    return rules


# ----- deriving kopf's peering verbs from kopf's code -------------------------------------------------


@functools.cache
def kopf_functions(module_name: str) -> tuple[Any, dict[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """A kopf module and the ASTs of its module-level functions by name."""
    module = importlib.import_module(module_name)
    tree = ast.parse(Path(module.__file__ or "").read_text())
    return module, {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}


def kopf_function(module_name: str, name: str) -> tuple[Any, ast.FunctionDef | ast.AsyncFunctionDef] | None:
    """The module and AST of kopf's module-level function ``module_name.name`` (None: not a function)."""
    module, functions = kopf_functions(module_name)
    return (module, functions[name]) if name in functions else None


def kopf_api_verb(call: ast.Call) -> str:
    """The RBAC verb of a call of ``kopf._cogs.clients.api``: ``get`` of an object's URL (``get_url(name=...)``)
    is get, of a collection's URL list."""
    method = dotted(call.func).rsplit(".", 1)[-1]
    if method != "get":
        assert method in KOPF_API_VERBS, f"unknown kopf API call {ast.unparse(call)}: add it to KOPF_API_VERBS"
        return KOPF_API_VERBS[method]
    url = next((k.value for k in call.keywords if k.arg == "url"), call.args[0] if call.args else None)
    assert isinstance(url, ast.Call) and dotted(url.func).endswith(".get_url"), f"cannot read {ast.unparse(call)}"
    return "get" if any(k.arg == "name" for k in url.keywords) else "list"


def kopf_peering_verbs() -> set[str]:
    """The verbs kopf uses on its peering objects: the ``kopf._cogs.clients.api`` calls reachable from the peering
    tasks of ``orchestration.spawn_missing_peerings`` (the keep-alive and the observer with its processor),
    following calls and references to module-level functions of kopf's modules."""
    verbs: set[str] = set()
    seen: set[tuple[str, str]] = set()
    todo = [("kopf._core.reactor.orchestration", "spawn_missing_peerings")]
    while todo:
        module_name, name = todo.pop()
        found = kopf_function(module_name, name) if (module_name, name) not in seen else None
        seen.add((module_name, name))
        if found is None:
            continue
        module, fn = found
        modules = {alias: value.__name__ for alias, value in vars(module).items()
                   if getattr(value, "__name__", "").startswith("kopf.") and isinstance(value, type(ast))}
        api_calls = {id(c.func) for c in ast.walk(fn) if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute)
                     and modules.get(dotted(c.func.value)) == "kopf._cogs.clients.api"}
        for node in ast.walk(fn):
            if isinstance(node, ast.Call) and id(node.func) in api_calls:
                verbs.add(kopf_api_verb(node))
            elif isinstance(node, ast.Attribute) and dotted(node.value) in modules and id(node) not in api_calls:
                assert modules[dotted(node.value)] != "kopf._cogs.clients.api", f"uncalled {ast.unparse(node)}"
                todo.append((modules[dotted(node.value)], node.attr))
            elif isinstance(node, ast.Name) and node.id != name:
                todo.append((module_name, node.id))
    return verbs


def kopf_peering_rules() -> dict[Rule, str]:
    return {("kopf.dev", "kopfpeerings", verb): "kopf peering (derived from kopf's code)" for verb in kopf_peering_verbs()}


# ----- reading the rendered RBAC ---------------------------------------------------------------------


def rendered_rules(rendered: Rendered, suffixes: tuple[str, ...], kinds: tuple[str, ...]) -> set[Rule]:
    rules: set[Rule] = set()
    for role in (r for r in rendered.objects if r["kind"] in kinds and r["metadata"]["name"].endswith(suffixes)):
        for rule in role["rules"]:
            rules |= {(g, r, v) for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]}
    return rules


def test_the_derivation_sees_the_controllers_api_use() -> None:
    """Guards the scanner itself: the calls we know the controller makes are found."""
    rules = derived_application_rules()
    assert {("anchorage.dev", "trials", "watch"), ("batch", "jobs", "create"), ("batch", "jobs", "get"),
            ("batch", "jobs", "watch"), ("anchorage.dev", "scoringruns", "watch"),
            ("anchorage.dev", "scoringruns", "create"), ("anchorage.dev", "trials/status", "patch"),
            ("networking.k8s.io", "networkpolicies", "create")} <= rules


APPLICATION = ("-operator-application", f"-operator-application-{NAMESPACE}", "-operator-trials",
               f"-operator-unserved-{NAMESPACE}")


@pytest.mark.parametrize("values", [{}, {"operator": {"peering": {"enabled": False}, "watchNamespaces": ["team-a"]}},
                                    {"operator": {"clusterWide": True}}],
                         ids=["defaults", "standalone", "cluster-wide"])
def test_application_rules_are_exactly_what_the_controller_uses(render: Render, values: dict[str, Any]) -> None:
    rendered = render(values)
    granted = rendered_rules(rendered, (*APPLICATION, "-operator-gateway"), ("Role", "ClusterRole"))
    used = derived_application_rules()
    assert sorted(granted - used) == [], "granted but never used by the controller"
    assert sorted(used - granted) == [], "used by the controller but not granted"


def test_the_kopf_derivation_sees_the_peering_keep_alives_and_watch() -> None:
    """Guards the kopf scanner: keep-alives are PATCHes of the KopfPeering, the observer lists and watches."""
    assert {"patch", "list", "watch"} <= kopf_peering_verbs()


@pytest.mark.parametrize("values, peering", [
    ({"operator": {"peering": {"enabled": False}}}, False), ({}, True),
    ({"operator": {"peering": {"priority": 5}, "watchNamespaces": ["team-a", "team-b"]}}, True),
    ({"operator": {"clusterWide": True}}, True), ({"operator": {"clusterWide": True, "peering": {"enabled": False}}}, False),
], ids=["standalone", "peering", "peering-namespaces", "cluster-wide", "cluster-wide-standalone"])
def test_framework_rules_are_kopfs_needs_only(render: Render, values: dict[str, Any], peering: bool) -> None:
    rendered = render(values)
    cluster_wide = bool(values.get("operator", {}).get("clusterWide"))
    plural = "clusterkopfpeerings" if cluster_wide else "kopfpeerings"  # kopf's cluster-wide peering: its cluster kind
    expected = {**KOPF_FRAMEWORK, **({(g, plural, v): why for (g, _, v), why in kopf_peering_rules().items()}
                                     if peering else {})}
    granted = rendered_rules(rendered, ("-operator-framework", f"-operator-framework-{NAMESPACE}"),
                             ("Role", "ClusterRole"))
    assert granted == set(expected)
    if cluster_wide:  # every framework rule cluster-wide, no Role in any namespace
        assert [r for r in rendered.of_kind("Role") if r["metadata"]["name"].endswith("-operator-framework")] == []
        assert bool(rendered.of_kind("ClusterKopfPeering")) == peering
        return
    # the peering rules are granted in every namespace that holds a KopfPeering (each watched one)
    peerings = {p["metadata"]["namespace"] for p in rendered.of_kind("KopfPeering")}
    with_peering = {r["metadata"]["namespace"] for r in rendered.of_kind("Role")
                    if any("kopfpeerings" in rule["resources"] for rule in r["rules"])}
    assert with_peering == peerings and bool(peerings) == peering


@pytest.mark.parametrize("values", [{"operator": {"watchNamespaces": ["team-a"]}}, {"operator": {"clusterWide": True}}],
                         ids=["namespaced", "cluster-wide"])
def test_jobs_pods_and_policies_are_touched_only_in_the_trials_namespace(render: Render, values: dict[str, Any]) -> None:
    rendered = render(values)
    for role in rendered.of_kind("Role"):
        writes = {r for rule in role["rules"] if {"create", "delete"} & set(rule["verbs"]) for r in rule["resources"]}
        if writes & {"jobs", "networkpolicies", "pods"}:
            assert role["metadata"]["namespace"] == "anchorage-trials", role["metadata"]["name"]
    # delete: exactly the trials namespace's Jobs and their pods (a deleted Trial's) and its NetworkPolicies (the
    # enforcement preflight's own probe policy), nothing else anywhere
    deletes = {(g, r, role["kind"], role["metadata"].get("namespace"))
               for role in rendered.of_kind("Role") + rendered.of_kind("ClusterRole")
               for rule in role["rules"] if "delete" in rule["verbs"] for g in rule["apiGroups"] for r in rule["resources"]}
    assert deletes == {("batch", "jobs", "Role", "anchorage-trials"), ("", "pods", "Role", "anchorage-trials"),
                       ("networking.k8s.io", "networkpolicies", "Role", "anchorage-trials")}
    cluster = rendered_rules(rendered, ("-operator-framework-anchorage", "-operator-unserved-anchorage"), ("ClusterRole",))
    assert {v for _, r, v in cluster if r != "events"} <= {"list", "watch"} | ({"patch"} if "clusterWide" in
                                                                            values["operator"] else set())


def test_unserved_namespaces_are_seen_read_only_and_only_when_reported(render: Render) -> None:
    """operator.reportUnserved (default): list and watch of the three kinds and create of Events in every namespace,
    nothing else; off (or cluster-wide, where every namespace is served): no such ClusterRole, --no-report-unserved."""
    rendered = render({})
    unserved = rendered.one("ClusterRole", f"anchorage-operator-unserved-{NAMESPACE}")
    assert rendered_rules(rendered, (f"-operator-unserved-{NAMESPACE}",), ("ClusterRole",)) == {
        ("anchorage.dev", plural, verb) for plural in ("trials", "scoringruns", "verificationcampaigns")
        for verb in ("list", "watch")} | {("", "events", "create")}, unserved
    bound = rendered.one("ClusterRoleBinding", f"anchorage-operator-unserved-{NAMESPACE}")
    assert bound["roleRef"]["name"] == unserved["metadata"]["name"]
    from charts.test_chart_render import cli_params, container

    assert cli_params("operator", container(rendered, "anchorage-operator")["args"][1:])["report_unserved"] is True
    for values in ({"operator": {"reportUnserved": False}}, {"operator": {"clusterWide": True}}):
        other = render(values)
        assert [r for r in other.of_kind("ClusterRole") if "-unserved-" in r["metadata"]["name"]] == []
        args = container(other, "anchorage-operator")["args"][1:]
        assert cli_params("operator", args)["report_unserved"] is False or "clusterWide" in values["operator"]


def test_a_cluster_wide_operator_is_bound_cluster_wide_and_watches_every_namespace(render: Render) -> None:
    from charts.test_chart_render import cli_params, container

    rendered = render({"operator": {"clusterWide": True, "watchNamespaces": ["team-a"]}})
    params = cli_params("operator", container(rendered, "anchorage-operator")["args"][1:])
    assert params["all_namespaces"] is True
    roles = {(r["metadata"].get("namespace"), r["metadata"]["name"]) for r in rendered.of_kind("Role")}
    # no Role per served namespace (it serves them all): the trials namespace's, and the gateway lookup in its own
    assert roles == {("anchorage-trials", "anchorage-operator-trials"), (NAMESPACE, "anchorage-operator-gateway")}
    bound = {b["roleRef"]["name"] for b in rendered.of_kind("ClusterRoleBinding")}
    assert bound == {f"anchorage-operator-framework-{NAMESPACE}", f"anchorage-operator-application-{NAMESPACE}"}


def test_every_watched_namespace_is_bound(render: Render) -> None:
    rendered = render({"operator": {"watchNamespaces": ["team-a", "team-b"]}})
    bound = {(b["metadata"]["namespace"], b["roleRef"]["name"]) for b in rendered.of_kind("RoleBinding")}
    for ns in ("team-a", "team-b", "anchorage-trials"):
        assert {(ns, "anchorage-operator-framework"), (ns, "anchorage-operator-application")} <= bound
    for binding in rendered.of_kind("RoleBinding") + rendered.of_kind("ClusterRoleBinding"):
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "anchorage-operator", "namespace": "anchorage"}]
