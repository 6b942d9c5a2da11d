"""Bad manifests get one clear message each: file:line, the field, and the fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from anchorage.campaigns.documents import check_tasks, load_documents
from anchorage.errors import InputError
from anchorage.manifests import VerificationCampaign
from anchorage.tasks import resolve_task

GOOD = """\
apiVersion: anchorage.dev/v1alpha1
kind: VerificationCampaign
metadata:
  name: c
spec:
  tasks: [smoke-inventory]
  entries:
    - name: mock
      agent: {kind: mock}
  seeds: 2
  parallelism: 2
"""


def _error(tmp_path: Path, text: str) -> str:
    path = tmp_path / "m.yaml"
    path.write_text(text)
    with pytest.raises(InputError) as caught:
        for document in load_documents(path):
            check_tasks(document, resolve_task)
    return str(caught.value)


def test_good_manifest_loads(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(GOOD + "---\n" + GOOD.replace("name: c", "name: d"))
    documents = load_documents(path)
    assert [type(d.resource) for d in documents] == [VerificationCampaign, VerificationCampaign]


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (("  seeds: 2", "  seeds: 0"), ["m.yaml:10:", "spec.seeds", "greater than or equal to 1", "fix:"]),
        (("  parallelism: 2", "  parallelism: 0"), ["m.yaml:11:", "spec.parallelism", "fix:"]),
        (("  seeds: 2", "  seedz: 2"), ["m.yaml:10:", "unknown field 'spec.seedz'", "allowed here:", "seeds"]),
        (("      agent: {kind: mock}", "      agent: {kind: mock, modle: x}"),
         ["m.yaml:9:", "unknown field 'spec.entries[0].agent.modle'", "model"]),
        (("[smoke-inventory]", "[smoke-inventory, no-such-task]"), ["m.yaml:6:", "no-such-task", "fix:"]),
        (("kind: VerificationCampaign", "kind: Campaign"), ["m.yaml:2:", "kind 'Campaign'", "fix:"]),
        (("  seeds: 2", "  seeds: 2\n   bad: [1"), ["m.yaml:", "YAML syntax error", "fix:"]),
    ],
    ids=["seeds-0", "parallelism-0", "unknown-field", "unknown-nested-field", "unknown-task", "bad-kind", "yaml-error"],
)
def test_bad_manifest_messages(tmp_path: Path, change: tuple[str, str], expected: list[str]) -> None:
    message = _error(tmp_path, GOOD.replace(*change))
    for part in expected:
        assert part in message, message
    assert "Traceback" not in message


def test_yaml_error_names_the_line(tmp_path: Path) -> None:
    message = _error(tmp_path, GOOD.replace("  parallelism: 2", "  parallelism: 2\n\tbroken: 1"))
    assert "m.yaml:12:" in message
