"""The HTTP side of the cluster fake: kmock's ``KubernetesEmulator`` with real API semantics.

Started by ``anchorage_devcluster.serving`` (``anchorage dev cluster``) and by the operator tests. kmock gives
the HTTP server, request parsing, discovery (``/api``, ``/apis``, group/version resource lists from
``self.resources``), Status-shaped errors, the request log (``self.requests`` for assertions) and its
DSL: reactions declared with ``fake[...] << ...`` take precedence over the built-in behaviour here,
which is registered as a fallback. The built-in behaviour (``ObjectStore``) adds resourceVersions,
409 conflicts, status subresources, finalizers, owner GC, watch bookmarks and 410 Gone, CRD
registration (``POST customresourcedefinitions`` makes the kind servable; a CEL rule the fake
cannot evaluate is refused with 422), validation of custom resources as the API server does it
(unknown fields pruned, or 400 with ``fieldValidation=Strict``; the CRD's openAPIV3Schema with
jsonschema; then the CRD's own ``x-kubernetes-validations`` CEL rules, ``anchorage_devcluster.cel``) and
server-side Table printing for kubectl.

Fault injection for tests: ``fake.faults.append(Fault(...))`` fails matching requests with a status
code; ``await fake.drop_watches()`` cuts every watch stream; ``fake.expire(plural)`` compacts the
event log so a stale resourceVersion gets 410 Gone.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import copy
import datetime as dt
import json
import re
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import aiohttp.web
import attrs
import kmock

from anchorage import manifests
from anchorage_devcluster import cel, kmockfix, structural
from anchorage_devcluster.storage import ApiError, Event, Obj, ObjectStore, Resource, json_patch, merge_patch, now

kmockfix.install()

CORE: list[tuple[str, str, str, str, bool, bool]] = [
    # group, version, plural, kind, namespaced, status subresource
    ("", "v1", "namespaces", "Namespace", False, True),
    ("", "v1", "pods", "Pod", True, True),
    ("", "v1", "events", "Event", True, False),
    ("", "v1", "configmaps", "ConfigMap", True, False),
    ("", "v1", "secrets", "Secret", True, False),
    ("", "v1", "serviceaccounts", "ServiceAccount", True, False),
    ("batch", "v1", "jobs", "Job", True, True),
    ("networking.k8s.io", "v1", "networkpolicies", "NetworkPolicy", True, False),
    ("events.k8s.io", "v1", "events", "Event", True, False),
    ("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False, True),
]  # kopf's KopfPeering is a CRD (crds/peering/), served once registered, as in a real cluster
SHORT = {"namespaces": ["ns"], "pods": ["po"], "configmaps": ["cm"], "serviceaccounts": ["sa"],
         "networkpolicies": ["netpol"], "customresourcedefinitions": ["crd", "crds"], "events": ["ev"]}
_NOT_CHECKED = {"reason": "FieldValueInvalid", "field": "<nil>", "message": "Invalid value: \"object\": some validation "
                "rules were not checked because the object was invalid; correct the existing errors to complete "
                "validation"}
VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]


@dataclass
class Fault:
    """Fail the next ``times`` requests whose method and path match with HTTP ``code``."""

    code: int
    method: str = ""
    path: str = ""  # a regular expression searched in the request path
    times: int = 1

    def take(self, method: str, path: str) -> bool:
        if self.times <= 0 or (self.method and self.method != method) or not re.search(self.path, path):
            return False
        self.times -= 1
        return True


def _age(stamp: str | None) -> str:
    if not stamp:
        return "<unknown>"
    seconds = int((dt.datetime.now(dt.UTC) - dt.datetime.fromisoformat(stamp.replace("Z", "+00:00"))).total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{max(seconds, 0)}s"


def _jsonpath(obj: Obj, path: str) -> Any:
    node: Any = obj
    for part in path.strip(".").split("."):
        node = node.get(part) if isinstance(node, dict) else None
    return node


def _label_match(selector: str) -> Callable[[Obj], bool]:
    terms = [t.strip() for t in selector.split(",") if t.strip()]

    def match(obj: Obj) -> bool:
        labels = obj["metadata"].get("labels") or {}
        for term in terms:
            key, op, value = re.split(r"(!=|==|=)", term, maxsplit=1) if re.search("=", term) else (term, "", "")
            if op in ("=", "==") and labels.get(key) != value:
                return False
            if op == "!=" and labels.get(key) == value:
                return False
            if not op and (key.lstrip("!") in labels) == key.startswith("!"):
                return False
        return True
    return match


def _field_match(selector: str) -> Callable[[Obj], bool]:
    terms = [t.split("=", 1) for t in selector.split(",") if "=" in t]
    return lambda obj: all(str(_jsonpath(obj, k.rstrip("="))) == v.lstrip("=") for k, v in terms)


_PUBLIC = {"/version", "/healthz", "/readyz", "/livez"}
_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
_LABEL_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
#: Kinds whose names must be DNS labels (≤ 63): a Job's name becomes its pods' ``job-name`` label value.
_LABEL_NAMED = {"jobs", "namespaces", "services"}


def metadata_causes(res: Resource, meta: Obj) -> list[dict[str, str]]:
    """What the API server says about an object's name and labels (DNS names, 63-character label values)."""
    causes: list[dict[str, str]] = []

    def invalid(field: str, value: str, message: str) -> None:
        causes.append({"reason": "FieldValueInvalid", "field": field,
                       "message": f"Invalid value: {json.dumps(value)}: {message}"})

    name = meta.get("name")
    if name:
        limit = 63 if res.plural in _LABEL_NAMED else 253
        if len(name) > limit:
            invalid("metadata.name", name, f"must be no more than {limit} characters")
        elif not _SUBDOMAIN.fullmatch(name) or (limit == 63 and "." in name):
            invalid("metadata.name", name, "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                    "characters, '-' or '.', and must start and end with an alphanumeric character")
    for key, value in (meta.get("labels") or {}).items():
        prefix, _, label = key.rpartition("/")
        if len(label) > 63 or not _LABEL_NAME.fullmatch(label) or len(prefix) > 253 or \
                (prefix and not _SUBDOMAIN.fullmatch(prefix)):
            invalid("metadata.labels", key, "name part must consist of alphanumeric characters, '-', '_' or '.', "
                    "and must start and end with an alphanumeric character (at most 63 characters)")
        if not isinstance(value, str) or len(value) > 63:
            invalid("metadata.labels", str(value), "must be no more than 63 characters")
        elif not _LABEL_VALUE.fullmatch(value):
            invalid("metadata.labels", value, "a valid label must be an empty string or consist of alphanumeric "
                    "characters, '-', '_' or '.', and must start and end with an alphanumeric character")
    return causes


@attrs.define(kw_only=True)
class FakeApiServer(kmock.KubernetesEmulator):
    """The fake Kubernetes API server (see the module docstring)."""

    store: ObjectStore = attrs.field(factory=ObjectStore)
    token: str | None = None  # when set, a request without ``Authorization: Bearer <token>`` gets 401
    faults: list[Fault] = attrs.field(factory=list)
    bookmark_interval: float = 5.0
    keep_requests: int = 20
    counts: collections.Counter[str] = attrs.field(factory=collections.Counter)
    _rules: dict[tuple[str, str], cel.Node] = attrs.field(factory=dict)  # compiled CEL rules per CRD
    _schemas: dict[tuple[str, str], dict[str, Any]] = attrs.field(factory=dict)
    _printer: dict[tuple[str, str], list[dict[str, Any]]] = attrs.field(factory=dict)
    _streams: set[asyncio.Queue[Event | None]] = attrs.field(factory=set)

    def __attrs_post_init__(self) -> None:
        kmock.KubernetesScaffold.__attrs_post_init__(self)
        # JSON for every answer, watch streams included (kubectl picks its decoder by the Content-Type)
        (self ** -1e9)[self._is_object_request] << {"Content-Type": "application/json"} << self._serve
        (self ** -1e9)["get", re.compile(r"^/openapi/v3/.+")] << self._openapi_group_version
        (self ** -1e9)["get /openapi/v3"] << self._openapi_root
        for group, version, plural, kind, namespaced, status in CORE:
            self._serve_kind(Resource(group, version, plural, kind, namespaced, status), SHORT.get(plural, []), [])
        self.store.on_change.append(self._crd_hook)
        self.store.create(self.store.resource("", "namespaces"), None, {"metadata": {"name": "default"}})

    # The emulator's own object tracking is replaced by ObjectStore: skip KubernetesEmulator._handle.
    # kmock matches every request against views over its whole request log, which makes a long run
    # quadratic; the log is cut to its last ``keep_requests`` (20) entries (``counts`` keeps the totals).
    async def _handle(self, request: kmock.Request) -> Any:
        refused = self._refused(request)
        if refused is not None:
            return aiohttp.web.json_response(refused.status(), status=refused.code)
        method = request.method.value.upper() if request.method else "GET"
        verb = "WATCH" if request.params.get("watch") == "true" else method
        plural = request.resource.plural if request.resource is not None and request.resource.plural else "-"
        sub = f"/{request.subresource}" if request.subresource else ""
        self.counts[f"{verb} {plural}{sub}"] += 1
        if len(self._requests) > self.keep_requests:
            del self._requests[: len(self._requests) - self.keep_requests]
        return await kmock.RawHandler._handle(self, request)

    def _refused(self, request: kmock.Request) -> ApiError | None:
        """As an API server with token authentication and anonymous requests allowed: a wrong token is 401, no
        token is the user ``system:anonymous``, who may read only the public health and version endpoints (403)."""
        if self.token is None:
            return None
        given = request.headers.get("Authorization")
        if given is None:
            if request.url.path in _PUBLIC:
                return None
            verb = (request.method.value if request.method else "get").lower()
            return ApiError(403, "Forbidden", f'forbidden: User "system:anonymous" cannot {verb} path '
                            f'"{request.url.path}"')
        return None if given == f"Bearer {self.token}" else ApiError(401, "Unauthorized", "Unauthorized")

    # ----------------------------------------------------------------- discovery and CRDs
    def _serve_kind(self, res: Resource, short: list[str], categories: list[str]) -> None:
        res = self.store.add_resource(res)
        key = kmock.resource(res.group, res.version, res.plural)
        self.resources[key] = kmock.ResourceInfo(
            kind=res.kind, singular=res.kind.lower(), namespaced=res.namespaced, verbs=VERBS,
            shortnames=short, categories=categories, subresources=["status"] if res.status_subresource else [])

    async def _serve_version(self, request: kmock.Request) -> Any:
        listing: dict[str, Any] = await super()._serve_version(request)  # type: ignore[assignment]
        listing["groupVersion"] = listing["groupVersion"].lstrip("/")  # the core group is "v1", not "/v1"
        for item in listing["resources"]:  # subresources carry no short names nor categories
            if "/" in item["name"]:
                item.update(shortNames=[], categories=[], verbs=["get", "patch", "update"])
        return listing

    # kubectl reads /openapi/v3 to learn that the server validates fields itself (fieldValidation);
    # then it sends ?fieldValidation=Strict and leaves validation to us instead of needing schemas.
    def _group_versions(self) -> dict[str, list[Resource]]:
        versions: dict[str, list[Resource]] = {}
        for res in self.store.resources.values():
            prefix = f"apis/{res.group}/{res.version}" if res.group else f"api/{res.version}"
            versions.setdefault(prefix, []).append(res)
        return versions

    async def _openapi_root(self, request: kmock.Request) -> Any:
        return {"paths": {gv: {"serverRelativeURL": f"/openapi/v3/{gv}?hash=fake"} for gv in self._group_versions()}}

    async def _openapi_group_version(self, request: kmock.Request) -> Any:
        prefix = request.url.path.removeprefix("/openapi/v3/")
        resources = self._group_versions().get(prefix)
        if resources is None:
            raise self._error(ApiError(404, "NotFound", f"no OpenAPI document for {prefix}"))
        param = [{"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": True}}]
        paths, schemas = {}, {}
        for res in resources:
            scope = "/namespaces/{namespace}" if res.namespaced else ""
            gvk = {"group": res.group, "version": res.version, "kind": res.kind}
            paths[f"/{prefix}{scope}/{res.plural}/{{name}}"] = {
                "patch": {"parameters": param, "responses": {}, "x-kubernetes-group-version-kind": gvk}}
            schema = self._schemas.get((res.group, res.plural))
            if schema:  # kubectl explain reads these
                schemas[f"{res.group}.{res.version}.{res.kind}"] = {**schema, "x-kubernetes-group-version-kind": [gvk]}
        return {"openapi": "3.0.0", "info": {"title": "anchorage fake", "version": "v0"}, "paths": paths,
                "components": {"schemas": schemas}}

    def _crd_hook(self, res: Resource, event: Event) -> None:
        if res.plural != "customresourcedefinitions" or event.type == "DELETED":
            return
        self.register_crd(event.obj)
        self._establish(res, event.obj)

    def _establish(self, res: Resource, crd: Obj) -> None:
        """Report the CRD Established with its names accepted (``kubectl wait --for condition=established``)."""
        names = crd["spec"]["names"]
        status = crd.get("status") or {}
        if status.get("acceptedNames") == names and any(c.get("type") == "Established" for c in status.get(
                "conditions") or []):
            return
        stamp = now()
        conditions = [{"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
                       "message": "no conflicts found", "lastTransitionTime": stamp},
                      {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
                       "message": "the initial names have been accepted", "lastTransitionTime": stamp}]
        versions = [v["name"] for v in crd["spec"]["versions"] if v.get("storage")]
        self.store.update(res, None, crd["metadata"]["name"], {**crd, "status": {
            "conditions": conditions, "acceptedNames": names, "storedVersions": versions}}, status_only=True)

    @staticmethod
    def compile_crd(crd: Obj) -> cel.Node:
        """The CRD's compiled CEL rules; 422 (as the API server refuses a bad rule) when one cannot be evaluated."""
        spec = crd.get("spec") or {}
        version: Obj = next((v for v in spec.get("versions") or [] if v.get("served", True)), {})
        name = (crd.get("metadata") or {}).get("name", "")
        problems = structural.crd_schema_causes((version.get("schema") or {}).get("openAPIV3Schema") or {})
        if problems:
            text = problems[0] if len(problems) == 1 else f"[{', '.join(problems)}]"
            raise ApiError(422, "Invalid", f'CustomResourceDefinition.apiextensions.k8s.io "{name}" is invalid: {text}',
                           {"name": name, "group": "apiextensions.k8s.io", "kind": "CustomResourceDefinition",
                            "causes": [{"reason": "FieldValueInvalid", "field": p.partition(": ")[0],
                                        "message": p.partition(": ")[2]} for p in problems]})
        try:
            return cel.compile_schema((version.get("schema") or {}).get("openAPIV3Schema") or {},
                                      f"spec.validation.openAPIV3Schema ({version.get('name', '?')})")
        except cel.RuleError as exc:
            cause = {"reason": "FieldValueInvalid", "field": "spec.validation.openAPIV3Schema", "message": str(exc)}
            raise ApiError(422, "Invalid", f'CustomResourceDefinition.apiextensions.k8s.io "{name}" is invalid: {exc}',
                           {"name": name, "group": "apiextensions.k8s.io", "kind": "CustomResourceDefinition",
                            "causes": [cause]}) from None

    def register_crd(self, crd: Obj) -> None:
        """Serve the kind a CRD defines, validating its objects with the CRD's schema and CEL rules."""
        spec = crd["spec"]
        names = spec["names"]
        version = next(v for v in spec["versions"] if v.get("served", True))
        rules = self.compile_crd(crd)
        res = Resource(spec["group"], version["name"], names["plural"], names["kind"],
                       spec.get("scope", "Namespaced") == "Namespaced", "status" in version.get("subresources", {}))
        self._serve_kind(res, names.get("shortNames", []), names.get("categories", []))
        self._schemas[(res.group, res.plural)] = version.get("schema", {}).get("openAPIV3Schema", {})
        self._rules[(res.group, res.plural)] = rules
        self._printer[(res.group, res.plural)] = version.get("additionalPrinterColumns", [])

    def load_crds(self, docs: list[Obj]) -> None:
        """Register CRDs as if ``kubectl apply -f crds/`` had run (ApiError on a rule the fake cannot evaluate)."""
        crds = self.store.resource("apiextensions.k8s.io", "customresourcedefinitions")
        for doc in docs:
            self.compile_crd(doc)
            with contextlib.suppress(ApiError):
                self.store.create(crds, None, doc)

    # ----------------------------------------------------------------- fault injection
    async def drop_watches(self) -> None:
        """End every open watch stream (clients must reconnect)."""
        for queue in list(self._streams):
            queue.put_nowait(None)
        await asyncio.sleep(0)

    def expire(self, plural: str, group: str = manifests.API_GROUP) -> None:
        """Compact the event log of a resource: watches resuming from an older version get 410."""
        self.store.compact(self.store.resource(group, plural))

    # ----------------------------------------------------------------- request routing
    @staticmethod
    def _is_object_request(request: kmock.Request) -> bool:
        res = request.resource
        return bool(res is not None and res.plural and res.version and res.group is not None)

    async def _serve(self, request: kmock.Request) -> Any:
        method = request.method.value.upper() if request.method else "GET"
        for fault in self.faults:
            if fault.take(method, request.url.path):
                raise self._error(ApiError(fault.code, "InternalError" if fault.code >= 500 else "Conflict",
                                           f"injected fault {fault.code}"))
        try:
            return await self._dispatch(request, method)
        except ApiError as exc:
            raise self._error(exc) from None

    @staticmethod
    def _error(exc: ApiError) -> kmock.KubernetesError:
        # Raised, not returned: kmock renders it as a Status with its code. (A returned
        # rendering.Response would overwrite the status of this fallback reaction for good.)
        return kmock.KubernetesError(status=exc.code, reason=exc.reason, message=exc.message,
                                     details=exc.details or {"kind": "", "name": ""})

    async def _dispatch(self, request: kmock.Request, method: str) -> Any:
        assert request.resource is not None
        res = self.store.resource(request.resource.group or "", request.resource.plural or "")
        ns, name, sub = request.namespace, request.name, request.subresource
        if sub not in (None, "status"):
            raise ApiError(404, "NotFound", f"subresource {sub} is not served by the fake")
        if request.action == kmock.action.WATCH:
            return self._watch(request, res, ns)
        if method == "GET":
            return self._table(request, res, self._get(request, res, ns, name))
        if method == "POST":
            return self._create(request, res, ns)
        if method == "DELETE":
            return self._delete(request, res, ns, name)
        if method in ("PUT", "PATCH") and name:
            return self._write(request, res, ns, name, method, sub == "status")
        raise ApiError(405, "MethodNotAllowed", f"{method} is not supported on this path")

    def _get(self, request: kmock.Request, res: Resource, ns: str | None, name: str | None) -> Obj:
        if name:
            return self.store.get(res, ns, name)
        match_labels = _label_match(request.params.get("labelSelector", ""))
        match_fields = _field_match(request.params.get("fieldSelector", ""))
        items = [o for o in self.store.select(res, ns, lambda o: match_labels(o) and match_fields(o))]
        return {"apiVersion": res.api_version, "kind": f"{res.kind}List",
                "metadata": {"resourceVersion": str(self.store.rv)}, "items": items}

    def _create(self, request: kmock.Request, res: Resource, ns: str | None) -> Obj:
        body = request.data if isinstance(request.data, dict) else {}
        ns = ns or body.get("metadata", {}).get("namespace") or (None if not res.namespaced else "default")
        body = self._admit(request, res, body, None)
        if request.params.get("dryRun"):
            return body
        return self.store.create(res, ns, body)

    def _delete(self, request: kmock.Request, res: Resource, ns: str | None, name: str | None) -> Obj:
        options = request.data if isinstance(request.data, dict) else {}
        orphan = (options.get("propagationPolicy") or request.params.get("propagationPolicy")) == "Orphan"
        if name and (request.params.get("dryRun") or options.get("dryRun")):
            return self.store.get(res, ns, name)
        if name:
            return self.store.delete(res, ns, name, orphan=orphan)
        for obj in list(self.store.select(res, ns, _label_match(request.params.get("labelSelector", "")))):
            self.store.delete(res, obj["metadata"].get("namespace"), obj["metadata"]["name"], orphan=orphan)
        return {"apiVersion": "v1", "kind": "Status", "status": "Success", "metadata": {}}

    def _write(self, request: kmock.Request, res: Resource, ns: str | None, name: str, method: str,
               status_only: bool) -> Obj:
        current = self.store.get(res, ns, name)
        body = request.data
        expected: str | None
        if method == "PUT":
            new, expected = body, body.get("metadata", {}).get("resourceVersion")
        else:
            content_type = request.headers.get("Content-Type", "")
            if "json-patch" in content_type:
                new = json_patch(current, body if isinstance(body, list) else json.loads(request.text))
            else:  # merge, strategic-merge (lists replaced: close enough for our objects) and apply
                new = merge_patch(current, body)
            expected = (body.get("metadata") or {}).get("resourceVersion") if isinstance(body, dict) else None
        if not status_only:
            new = self._admit(request, res, new, current)
        elif (res.group, res.plural) in self._schemas:
            self._validate_status(res, new, current)
        if request.params.get("dryRun"):  # validated, not stored (kubectl apply --dry-run=server)
            return dict(new)
        return self.store.update(res, ns, name, new, status_only=status_only, expected_rv=expected)

    # ----------------------------------------------------------------- validation
    def _admit(self, request: kmock.Request, res: Resource, obj: Obj, old: Obj | None) -> Obj:
        """What the API server does before storing a write: names and labels, CRD rules compile, unknown
        fields, schema, CEL."""
        meta_causes = metadata_causes(res, obj.get("metadata") or {})
        if meta_causes:
            raise self._invalid(res, (obj.get("metadata") or {}).get("name", ""), meta_causes)
        if res.plural == "customresourcedefinitions" and res.group == "apiextensions.k8s.io":
            self.compile_crd(obj)
        schema = self._schemas.get((res.group, res.plural))
        if schema is None:
            return obj
        name = obj.get("metadata", {}).get("name", "")
        obj, unknown = structural.prune(schema, obj)
        if unknown and request.params.get("fieldValidation") == "Strict":
            fields = ", ".join(f'unknown field "{u}"' for u in unknown)
            raise ApiError(400, "BadRequest", f'{res.kind} in version "{res.version}" cannot be handled as a '
                           f"{res.kind}: strict decoding error: {fields}")
        # with a status subresource, status is written (and checked) through /status only
        spec_only = {k: v for k, v in obj.items() if k != "status" or not res.status_subresource}
        causes = structural.schema_causes(schema, spec_only)
        rules = self._rules.get((res.group, res.plural))
        if rules is not None:
            # As the API server: CEL rules run only on an object that passed the schema.
            causes = [*causes, _NOT_CHECKED] if causes else \
                cel.validate(rules, spec_only, {k: v for k, v in old.items() if k in spec_only} if old else None)
        if causes:
            raise self._invalid(res, name, causes)
        return obj

    @staticmethod
    def _invalid(res: Resource, name: str, causes: list[dict[str, str]]) -> ApiError:
        texts = [f"{c['field']}: {c['message']}" for c in causes]
        text = texts[0] if len(texts) == 1 else f"[{', '.join(texts)}]"
        return ApiError(422, "Invalid", f'{res.kind}.{res.group} "{name}" is invalid: {text}',
                        {"name": name, "group": res.group, "kind": res.kind, "causes": causes})

    def _validate_status(self, res: Resource, obj: Obj, old: Obj) -> None:
        schema = self._schemas[(res.group, res.plural)].get("properties", {}).get("status")
        if schema and obj.get("status") is not None:
            causes = structural.schema_causes(schema, obj["status"], ["status"])
            rules = self._rules.get((res.group, res.plural))
            status_rules = rules.properties.get("status") if rules is not None else None
            if not causes and status_rules is not None:
                causes = cel.validate(status_rules, obj["status"], old.get("status"), ["status"])
            if causes:
                raise self._invalid(res, obj.get("metadata", {}).get("name", ""), causes)

    # ----------------------------------------------------------------- watches
    async def _watch(self, request: kmock.Request, res: Resource, ns: str | None) -> AsyncIterator[Any]:
        queue: asyncio.Queue[Event | None] = asyncio.Queue()
        res.watchers.add(queue)
        self._streams.add(queue)
        try:
            yield b""
            match_labels = _label_match(request.params.get("labelSelector", ""))
            rv = request.params.get("resourceVersion", "")
            bookmarks = request.params.get("allowWatchBookmarks") == "true"
            timeout = float(request.params.get("timeoutSeconds", "0") or 0) or None
            try:
                backlog = self._backlog(res, ns, rv, match_labels)
            except ApiError as exc:
                yield {"type": "ERROR", "object": exc.status()}
                return
            for event in backlog:
                yield event
            async for item in self._stream(queue, res, ns, match_labels, bookmarks, timeout):
                yield item
        finally:
            res.watchers.discard(queue)
            self._streams.discard(queue)

    def _backlog(self, res: Resource, ns: str | None, rv: str, match: Callable[[Obj], bool]) -> list[Obj]:
        if rv in ("", "0"):
            return [{"type": "ADDED", "object": copy.deepcopy(o)} for o in self.store.select(res, ns, match)]
        return [{"type": e.type, "object": e.obj} for e in self.store.events_since(res, int(rv))
                if (ns is None or e.obj["metadata"].get("namespace") == ns) and match(e.obj)]

    async def _stream(self, queue: asyncio.Queue[Event | None], res: Resource, ns: str | None,
                      match: Callable[[Obj], bool], bookmarks: bool, timeout: float | None) -> AsyncIterator[Obj]:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout if timeout else None
        while deadline is None or loop.time() < deadline:
            wait = self.bookmark_interval if deadline is None else min(self.bookmark_interval, deadline - loop.time())
            try:
                event = await asyncio.wait_for(queue.get(), timeout=max(wait, 0.01))
            except TimeoutError:
                if bookmarks:
                    yield {"type": "BOOKMARK", "object": {"apiVersion": res.api_version, "kind": res.kind,
                                                          "metadata": {"resourceVersion": str(self.store.rv)}}}
                continue
            if event is None:
                return
            if (ns is None or event.obj["metadata"].get("namespace") == ns) and match(event.obj):
                yield {"type": event.type, "object": event.obj}

    # ----------------------------------------------------------------- kubectl tables
    def _table(self, request: kmock.Request, res: Resource, result: Obj) -> Obj:
        if "as=Table" not in request.headers.get("Accept", ""):
            return result
        items = result.get("items", [result])
        columns = [{"name": "Name", "type": "string", "format": "name", "description": "Name", "priority": 0}]
        extra = self._printer.get((res.group, res.plural), [])
        columns += [{"name": c["name"], "type": c["type"], "format": c.get("format", ""),
                     "description": c.get("description", ""), "priority": c.get("priority", 0)} for c in extra]
        if not extra:
            columns.append({"name": "Age", "type": "string", "format": "", "description": "Age", "priority": 0})
        rows = []
        for obj in items:
            cells: list[Any] = [obj["metadata"]["name"]]
            for col in extra:
                value = _jsonpath(obj, col["jsonPath"])
                cells.append(_age(value) if col["type"] == "date" else value)
            if not extra:
                cells.append(_age(obj["metadata"].get("creationTimestamp")))
            partial = {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj["metadata"]}
            rows.append({"cells": cells, "object": partial})
        return {"kind": "Table", "apiVersion": "meta.k8s.io/v1",
                "metadata": {"resourceVersion": str(self.store.rv)}, "columnDefinitions": columns, "rows": rows}
