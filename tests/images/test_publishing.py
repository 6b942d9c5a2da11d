"""``anchorage images build|push``: the checkout it needs, its input errors, and a real push to a registry on loopback.

The push test runs the dev cluster's registry (CNCF Distribution, ``make kube`` builds it) on 127.0.0.1, once open and
once asking for credentials (htpasswd), and pushes a one-file image made here with buildah (no image build needed):
the digest ``push`` reports is the one the registry serves, both compressed and uncompressed, and without the
credentials the push fails with the registry's answer.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from jsonschema import Draft7Validator
from typer.testing import CliRunner

from anchorage.cli import app
from anchorage.errors import InfrastructureError, InputError
from anchorage.images import building, checkout, publishing
from anchorage_devcluster.ports import free_port

REPO = Path(__file__).resolve().parents[2]


def test_a_checkout_is_found_around_the_current_folder_else_where_the_package_is(tmp_path: Path,
                                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    assert checkout.find(cwd=REPO / "operator" / "anchorage") == REPO
    assert checkout.find(cwd=tmp_path) == REPO  # this package lives in a checkout
    assert checkout.chart_version(REPO) == yaml.safe_load((REPO / "charts/anchorage/Chart.yaml").read_text())[
        "appVersion"]
    monkeypatch.setattr(checkout, "INSTALLED", tmp_path / "site-packages")  # a wheel: no Dockerfiles beside it
    with pytest.raises(InputError, match="no checkout of the Anchorage repository") as caught:
        checkout.find(cwd=tmp_path)
    assert "git clone" in str(caught.value) and "--context" in str(caught.value)


@pytest.mark.parametrize(("args", "message"), [
    (["images", "build", "--context", "{tmp}"], "is not a checkout of the Anchorage repository"),
    (["images", "push", "--registry", "r.example", "nope"], "unknown image 'nope'"),
    (["images", "push", "--registry", "r.example", "operater"], "did you mean 'operator'"),
    (["images", "push", "--registry", "https://r.example"], "is not a registry name"),
    (["images", "push", "--registry", "r.example", "--tls-verify", "maybe"], "neither true nor false"),
    (["images", "push", "--registry", "r.example", "--authfile", "{tmp}/none.json"], "does not exist"),
    (["images", "build", "--build-arg", "NOEQUALS"], "is not KEY=VALUE"),
])
def test_bad_input_is_one_clear_error_before_anything_is_built(args: list[str], message: str, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(building, "ensure_tools", lambda: pytest.fail("reached the build"))
    monkeypatch.setattr(building, "build_base", lambda: pytest.fail("reached the build"))
    result = CliRunner().invoke(app, [a.replace("{tmp}", str(tmp_path)) for a in args])
    assert isinstance(result.exception, InputError), result.output
    assert message in str(result.exception)


def test_help_says_the_checkout_is_the_build_context() -> None:
    for command in (["images", "--help"], ["images", "build", "--help"], ["images", "push", "--help"]):
        out = " ".join(CliRunner().invoke(app, command).output.replace("│", " ").split())
        assert "checkout of the Anchorage repository" in out or "checkout of the repository" in out, (command, out)


def test_the_values_push_writes_pin_every_image_and_the_chart_accepts_them() -> None:
    digest = "sha256:" + "c" * 64
    pushed = {name: publishing.Pushed(name, publishing.repository("r.example:5000/team", name), "0.1.0", digest)
              for name in publishing.PUBLISHED}
    values = publishing.chart_values(pushed)
    assert values["image"] == {"repository": "r.example:5000/team/anchorage/operator", "tag": "0.1.0",
                               "digest": digest}
    assert values["tasks"]["image"]["repository"] == "r.example:5000/team/anchorage/tasks"
    assert values["operator"]["agentImage"]["repository"] == "r.example:5000/team/anchorage/agent-base"
    assert values["operator"]["verifierImage"]["repository"] == "r.example:5000/team/anchorage/verifier"
    schema = json.loads((REPO / "charts" / "anchorage" / "values.schema.json").read_text())
    assert not list(Draft7Validator(schema).iter_errors(values))


# ----- a real push ----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def registry_binary() -> Path:
    from anchorage_devcluster import binaries

    path = binaries.node_paths()["registry"]
    if not path.exists():
        pytest.skip(f"the registry binary is not built ({path}): make kube builds it with Go")
    if shutil.which("buildah") is None:
        pytest.skip("buildah is missing (apt-get install buildah)")
    return path


@contextlib.contextmanager
def _serve(binary: Path, folder: Path, htpasswd: Path | None = None) -> Iterator[str]:
    address = f"127.0.0.1:{free_port()}"
    config: dict[str, Any] = {"version": 0.1, "log": {"level": "error"},
                              "storage": {"filesystem": {"rootdirectory": str(folder / "data")}},
                              "http": {"addr": address, "secret": "not-a-secret"}}
    if htpasswd is not None:
        config["auth"] = {"htpasswd": {"realm": "test", "path": str(htpasswd)}}
    (folder / "config.yml").write_text(yaml.safe_dump(config))
    with subprocess.Popen([str(binary), "serve", str(folder / "config.yml")], stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL) as proc:
        try:
            for _ in range(100):
                try:
                    urllib.request.urlopen(f"http://{address}/v2/", timeout=1)
                    break
                except urllib.error.HTTPError:
                    break  # 401: it answers
                except OSError:
                    time.sleep(0.1)
            yield address
        finally:
            proc.terminate()


@pytest.fixture(scope="module")
def tiny_image(registry_binary: Path) -> Iterator[str]:
    """A one-file image in the builder's storage (no base, nothing downloaded), named for this process: the storage
    is the machine's, and under xdist each worker running this module makes (and at its end removes) its own — one
    shared name let a worker remove the image another was pushing."""
    local = f"localhost/anchorage/publishing-test:{os.getpid()}"
    ident = building.buildah("from", "scratch", quiet=True).strip()
    try:
        building.buildah("copy", ident, str(REPO / "charts" / "anchorage" / "Chart.yaml"), "/Chart.yaml", quiet=True)
        building.buildah("commit", "--rm", ident, local, quiet=True)
    except BaseException:
        subprocess.run(["buildah", *building.storage(), "rm", ident], capture_output=True, check=False)
        raise
    yield local
    subprocess.run(["buildah", *building.storage(), "rmi", local], capture_output=True, check=False)


def _served_digest(address: str, repository: str, tag: str, auth: str | None = None) -> str:
    headers = {"Accept": "application/vnd.docker.distribution.manifest.v2+json, "
                         "application/vnd.oci.image.manifest.v1+json"}
    if auth:
        headers["Authorization"] = f"Basic {auth}"
    request = urllib.request.Request(f"http://{address}/v2/{repository}/manifests/{tag}", method="HEAD",
                                     headers=headers)
    with urllib.request.urlopen(request, timeout=10) as response:
        return str(response.headers["Docker-Content-Digest"])


@pytest.mark.parametrize("compress", [True, False], ids=["gzip", "uncompressed"])
def test_push_puts_the_image_at_registry_anchorage_name_and_reports_the_served_digest(
        registry_binary: Path, tiny_image: str, tmp_path: Path, compress: bool) -> None:
    with _serve(registry_binary, tmp_path) as address:
        pushed = publishing.push("tiny", tiny_image, address, "0.1.0", tls_verify=False, compress=compress)
        assert pushed.reference == f"{address}/anchorage/tiny:0.1.0"
        assert pushed.digest.startswith("sha256:")
        assert pushed.digest == _served_digest(address, "anchorage/tiny", "0.1.0")


def test_a_registry_asking_for_credentials_refuses_the_push_without_them(registry_binary: Path, tiny_image: str,
                                                                          tmp_path: Path) -> None:
    from anchorage_devcluster import addons, binaries

    found = binaries.find()
    if isinstance(found, str):
        pytest.skip(found)
    htpasswd = tmp_path / "htpasswd"
    htpasswd.write_text(addons.htpasswd_line(found, "pusher", "s3cret-pass") + "\n")
    with _serve(registry_binary, tmp_path, htpasswd) as address:
        with pytest.raises(InfrastructureError, match=r"(?i)unauthorized|authentication required"):
            publishing.push("tiny", tiny_image, address, "0.1.0", tls_verify=False)
        token = base64.b64encode(b"pusher:s3cret-pass").decode()
        auth = tmp_path / "auth.json"
        auth.write_text(json.dumps({"auths": {address: {"auth": token}}}))
        pushed = publishing.push("tiny", tiny_image, address, "0.1.0", tls_verify=False, authfile=auth)
        assert pushed.digest == _served_digest(address, "anchorage/tiny", "0.1.0", token)


def test_build_json_prints_only_the_tags_on_stdout(monkeypatch: pytest.MonkeyPatch) -> None:
    """``anchorage images build --json`` (what ``anchorage dev cluster`` reads): progress on stderr, JSON on stdout."""
    def build_image(name: str, base: str, args: dict[str, str], built: dict[str, str], context: Path) -> str:
        print(f"+ buildah bud ... {name}")  # what the builder prints while it works
        built[name] = f"localhost/anchorage/{name}:0123456789ab"
        return built[name]

    monkeypatch.setattr(building, "ensure_tools", lambda: None)
    monkeypatch.setattr(building, "build_base", lambda: "localhost/anchorage/debian-base:x")
    monkeypatch.setattr(building, "build_image", build_image)
    result = CliRunner().invoke(app, ["images", "build", "operator", "tasks", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {"operator": "localhost/anchorage/operator:0123456789ab",
                                         "tasks": "localhost/anchorage/tasks:0123456789ab"}
    assert "+ buildah bud ... operator" in result.stderr
