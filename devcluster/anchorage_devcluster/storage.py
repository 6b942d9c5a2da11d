"""The object store of the cluster fake: what etcd plus the API server's generic registry do.

Used by ``anchorage_devcluster.apiserver`` (HTTP) and ``anchorage_devcluster.kubelet`` (in-process writes). Keeps one
global resourceVersion counter, a bounded event log per resource (so a watch can resume from a
resourceVersion, or gets 410 Gone when it is older than the log), optimistic concurrency (409 on a
stale resourceVersion), generation bumps on spec changes, deletion with finalizers and
``deletionTimestamp``, and background garbage collection of dependents through ownerReferences.
"""

from __future__ import annotations

import asyncio
import collections
import copy
import datetime as dt
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

Obj = dict[str, Any]
ResKey = tuple[str, str]  # (group, plural)
ObjKey = tuple[str | None, str]  # (namespace, name)


class ApiError(Exception):
    """An API error with the Kubernetes ``Status`` fields."""

    def __init__(self, code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code, self.reason, self.message, self.details = code, reason, message, details or {}

    def status(self) -> Obj:
        """The ``Status`` object the API returns for this error."""
        return {"apiVersion": "v1", "kind": "Status", "metadata": {}, "status": "Failure", "code": self.code,
                "reason": self.reason, "message": self.message, "details": self.details}


def now() -> str:
    """Now, as Kubernetes timestamps are written."""
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch (``null`` deletes a key, objects merge, everything else replaces)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _pointer(path: str) -> list[str]:
    return [p.replace("~1", "/").replace("~0", "~") for p in path.lstrip("/").split("/")] if path else []


def json_patch(target: Obj, ops: list[dict[str, Any]]) -> Obj:
    """RFC 6902 JSON patch (add, remove, replace, test) — what kubectl and clients send."""
    doc = copy.deepcopy(target)
    for op in ops:
        *parents, leaf = _pointer(op["path"])
        node: Any = doc
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node.setdefault(part, {})
        kind = op["op"]
        if kind == "test":
            current = node[int(leaf)] if isinstance(node, list) else node.get(leaf)
            if current != op.get("value"):
                raise ApiError(422, "Invalid", f"test operation failed at {op['path']}")
        elif kind == "remove":
            del node[int(leaf) if isinstance(node, list) else leaf]
        elif isinstance(node, list):
            index = len(node) if leaf == "-" else int(leaf)
            node.insert(index, op["value"]) if kind == "add" else node.__setitem__(index, op["value"])
        else:
            node[leaf] = copy.deepcopy(op["value"])
    return doc


@dataclass
class Event:
    """One watch event, kept in the per-resource log."""

    rv: int
    type: str
    obj: Obj


@dataclass
class Resource:
    """One served resource kind and its objects."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True
    status_subresource: bool = False
    objects: dict[ObjKey, Obj] = field(default_factory=dict)
    log: collections.deque[Event] = field(default_factory=lambda: collections.deque(maxlen=5000))
    watchers: set[asyncio.Queue[Event | None]] = field(default_factory=set)
    compacted_rv: int = 0  # events at or below this rv are no longer in the log

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


class ObjectStore:
    """All objects of the fake cluster, with resourceVersions, watches, finalizers and GC."""

    def __init__(self) -> None:
        self.resources: dict[ResKey, Resource] = {}
        self.rv = 1
        self.on_change: list[Callable[[Resource, Event], None]] = []

    def add_resource(self, res: Resource) -> Resource:
        """Serve a resource kind (idempotent: an existing kind keeps its objects)."""
        return self.resources.setdefault((res.group, res.plural), res)

    def resource(self, group: str, plural: str) -> Resource:
        """The resource kind, or 404 as the API server says it."""
        res = self.resources.get((group, plural))
        if res is None:
            raise ApiError(404, "NotFound", f"the server could not find the requested resource ({plural}.{group})")
        return res

    def _next_rv(self) -> str:
        self.rv += 1
        return str(self.rv)

    def _emit(self, res: Resource, kind: str, obj: Obj) -> None:
        event = Event(int(obj["metadata"]["resourceVersion"]), kind, copy.deepcopy(obj))
        if len(res.log) == res.log.maxlen:
            res.compacted_rv = res.log[0].rv
        res.log.append(event)
        for queue in list(res.watchers):
            queue.put_nowait(event)
        for hook in self.on_change:
            hook(res, event)

    def compact(self, res: Resource) -> None:
        """Forget the event log (as etcd compaction does): older resourceVersions now get 410 Gone."""
        res.compacted_rv = self.rv
        res.log.clear()

    def get(self, res: Resource, ns: str | None, name: str) -> Obj:
        """One object, or 404."""
        obj = res.objects.get((ns if res.namespaced else None, name))
        if obj is None:
            raise ApiError(404, "NotFound", f'{res.plural}.{res.group or "core"} "{name}" not found',
                           {"name": name, "group": res.group, "kind": res.plural})
        return obj

    def select(self, res: Resource, ns: str | None, match: Callable[[Obj], bool] = lambda o: True) -> Iterator[Obj]:
        """Objects of ``res`` in ``ns`` (every namespace when None) that ``match``."""
        for (obj_ns, _), obj in res.objects.items():
            if (ns is None or obj_ns == ns) and match(obj):
                yield obj

    def create(self, res: Resource, ns: str | None, body: Obj) -> Obj:
        """Create; 409 AlreadyExists when the name is taken."""
        obj = copy.deepcopy(body)
        meta = obj.setdefault("metadata", {})
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
        name = meta.get("name")
        if not name:
            raise ApiError(422, "Invalid", f"{res.kind} is invalid: metadata.name: Required value: name or "
                           "generateName is required")
        key = (ns if res.namespaced else None, name)
        if key in res.objects:
            raise ApiError(409, "AlreadyExists", f'{res.plural}.{res.group or "core"} "{name}" already exists',
                           {"name": name, "group": res.group, "kind": res.plural})
        if res.namespaced:
            meta["namespace"] = ns
        meta.update(uid=str(uuid.uuid4()), creationTimestamp=now(), generation=1, resourceVersion=self._next_rv())
        meta.pop("deletionTimestamp", None)
        obj["apiVersion"], obj["kind"] = res.api_version, res.kind
        if res.status_subresource:
            obj.pop("status", None)
        res.objects[key] = obj
        self._emit(res, "ADDED", obj)
        return obj

    def update(self, res: Resource, ns: str | None, name: str, new: Obj, *, status_only: bool = False,
               expected_rv: str | None = None) -> Obj:
        """Replace an object (the caller has applied its patch); keeps the rules of the real API."""
        old = self.get(res, ns, name)
        if expected_rv and expected_rv != old["metadata"]["resourceVersion"]:
            raise ApiError(409, "Conflict", f'Operation cannot be fulfilled on {res.plural}.{res.group or "core"} '
                           f'"{name}": the object has been modified; please apply your changes to the latest '
                           "version and try again", {"name": name, "group": res.group, "kind": res.plural})
        obj = self._merge_rules(res, old, copy.deepcopy(new), status_only)
        if obj == old:
            return old
        obj["metadata"]["resourceVersion"] = self._next_rv()
        key = (ns if res.namespaced else None, name)
        if obj["metadata"].get("deletionTimestamp") and not obj["metadata"].get("finalizers"):
            return self._remove(res, key, obj)
        res.objects[key] = obj
        self._emit(res, "MODIFIED", obj)
        return obj

    @staticmethod
    def _merge_rules(res: Resource, old: Obj, obj: Obj, status_only: bool) -> Obj:
        keep = ("uid", "creationTimestamp", "generation", "namespace", "name", "deletionTimestamp")
        meta = obj.setdefault("metadata", {})
        for key in keep:
            if key in old["metadata"]:
                meta[key] = old["metadata"][key]
        obj["apiVersion"], obj["kind"] = old["apiVersion"], old["kind"]
        if status_only:
            return {**old, "status": obj.get("status")} if obj.get("status") is not None else \
                {k: v for k, v in old.items() if k != "status"}
        if res.status_subresource:
            if "status" in old:
                obj["status"] = old["status"]
            else:
                obj.pop("status", None)
        if any(obj.get(k) != old.get(k) for k in ("spec", "data")) or (not res.status_subresource and
                                                                      obj.get("status") != old.get("status")):
            meta["generation"] = old["metadata"].get("generation", 1) + 1
        return obj

    def delete(self, res: Resource, ns: str | None, name: str, *, orphan: bool = False) -> Obj:
        """Delete: mark with deletionTimestamp while finalizers remain, else remove (and collect dependents)."""
        obj = self.get(res, ns, name)
        meta = obj["metadata"]
        key = (ns if res.namespaced else None, name)
        if meta.get("finalizers"):
            if meta.get("deletionTimestamp"):
                return obj
            obj = copy.deepcopy(obj)
            obj["metadata"].update(deletionTimestamp=now(), resourceVersion=self._next_rv())
            res.objects[key] = obj
            self._emit(res, "MODIFIED", obj)
            return obj
        removed = self._remove(res, key, obj)
        if orphan:
            return removed
        return removed

    def _remove(self, res: Resource, key: ObjKey, obj: Obj) -> Obj:
        res.objects.pop(key, None)
        obj = copy.deepcopy(obj)
        obj["metadata"]["resourceVersion"] = self._next_rv()
        self._emit(res, "DELETED", obj)
        self.collect_garbage(obj["metadata"]["uid"])
        return obj

    def collect_garbage(self, owner_uid: str) -> None:
        """Delete every object owned by ``owner_uid`` (background cascading deletion)."""
        for res in list(self.resources.values()):
            for (ns, name), obj in list(res.objects.items()):
                refs = obj["metadata"].get("ownerReferences") or []
                if any(ref.get("uid") == owner_uid for ref in refs) and (ns, name) in res.objects:
                    self.delete(res, ns, name)

    def events_since(self, res: Resource, rv: int) -> list[Event]:
        """Events after ``rv``; 410 Gone when ``rv`` is older than the retained log."""
        if rv < res.compacted_rv:
            raise ApiError(410, "Expired", f"too old resource version: {rv} ({res.compacted_rv})")
        return [e for e in res.log if e.rv > rv]
