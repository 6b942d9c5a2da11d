"""Deterministic child names, shared by the local engine (run-folder names) and the operator
(Kubernetes object names), so a restarted driver finds the work it already did instead of
repeating it.

Every name is a DNS-1123 label (≤ 63 chars); when the readable form is too long it is cut and a
short hash of the full identity is appended, so two different identities never share a name.
"""

from __future__ import annotations

import hashlib
import re

MAX_LEN = 63
_UNSAFE = re.compile(r"[^a-z0-9-]+")


def dns_label(text: str, max_len: int = MAX_LEN) -> str:
    """``text`` as a DNS label: lower case, [a-z0-9-], no leading/trailing '-', ≤ max_len.

    A label that had to change (characters replaced or cut) ends in an 8-hex-digit hash of the
    original text, so different texts never map to the same label.
    """
    label = re.sub(r"-{2,}", "-", _UNSAFE.sub("-", text.lower())).strip("-") or "x"
    if label == text and len(label) <= max_len:
        return label
    digest = hashlib.sha256(text.encode()).hexdigest()[:8]
    return f"{label[: max_len - 9].rstrip('-')}-{digest}"


_LABEL_VALUE = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")


def label_value(text: str) -> str:
    """``text`` as a Kubernetes label value (≤ 63 characters of ``[A-Za-z0-9-_.]``, alphanumeric at both ends):
    itself when it already is one, else cut with an 8-hex-digit hash of the whole text appended (deterministic:
    the same name gives the same value; the full name goes in an annotation beside it)."""
    if len(text) <= MAX_LEN and (text == "" or _LABEL_VALUE.fullmatch(text)):
        return text
    cleaned = re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-_.") or "x"
    digest = hashlib.sha256(text.encode()).hexdigest()[:8]
    return f"{cleaned[: MAX_LEN - 9].rstrip('-_.')}-{digest}"


def child_name(parent: str, suffix: str) -> str:
    """The name of an object derived from ``parent`` (``<parent>-<suffix>``), a DNS label of ≤ 63 characters
    (a Job's name becomes its pods' label value), cut and hashed when too long."""
    return dns_label(f"{parent}-{suffix}")


def task_short(task: str) -> str:
    """The task part of a name: the last path component, without a leading ``owner/``."""
    return task.rstrip("/").rsplit("/", 1)[-1]


def trial_name(campaign: str, entry: str, task: str, seed: int) -> str:
    """Name of the Trial of (campaign, entry, task, seed)."""
    return dns_label(f"{campaign}-{entry}-{task_short(task)}-s{seed}")


def scoring_run_name(trial: str) -> str:
    """Name of the ScoringRun that scores ``trial``."""
    return child_name(trial, "score")
