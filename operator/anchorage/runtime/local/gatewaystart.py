"""Start the model gateway for a local run: the deterministic mock upstream, plus any configured ones.

Called by ``anchorage run`` when an entry needs a model. The gateway listens only on unix sockets in a private
folder: one per trial (``Gateway.open_trial_socket``, bound into that trial's sandbox alone: it takes that trial's
token only and has its own connection cap, so one agent's flood of connections costs the engine at most that cap in
descriptors), and one the engine keeps to itself; models named ``mock*`` are served by the in-process mock upstream
(labelled as a mock in every response); other models go to the upstreams of ``--gateway-config``,
and without one they fail with the gateway's error — never silently answered by the mock.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from anchorage.runtime.local import leftovers


@dataclass
class LocalGateway:
    gateway: Any
    mock_server: Any
    folder: Path
    scripted: Any = None

    def stop(self) -> None:
        self.gateway.stop()
        self.mock_server.stop()
        if self.scripted is not None:
            self.scripted.stop()
        shutil.rmtree(self.folder, ignore_errors=True)


def start_local_gateway(config_path: Path | None = None, *, mock_replies: Path | None = None,
                        scripts: Any = None, front_door: dict[str, Any] | None = None) -> LocalGateway:
    """Mock upstream + gateway on a fresh unix socket; ``stop()`` both when done.

    ``mock_replies`` is a :class:`~anchorage.gateway.mock.MockConfig` YAML (``replies[{marker, reply}]``):
    scripted, still labelled, replies of the mock model (the verification-panel demo and tests). ``front_door``:
    limits of :class:`~anchorage.gateway.gatewayconfig.FrontDoorConfig` that replace the config's (tests).
    """
    from anchorage.gateway.gatewayconfig import GatewayConfig
    from anchorage.gateway.mock import MockConfig, MockUpstream
    from anchorage.gateway.running import BackgroundServer, start_gateway

    mock = MockUpstream(MockConfig.load(mock_replies) if mock_replies is not None else None)
    mock_server = BackgroundServer(mock.app(), name="mock-upstream").start()
    folder = leftovers.gateway_folder()  # tagged with this process: a later run removes it if we are killed
    data: dict[str, Any] = {"upstreams": []}
    if config_path is not None:
        data = GatewayConfig.load(config_path).model_dump(mode="python")
        data["upstreams"] = [dict(u, api_key=u["api_key"].get_secret_value() if u.get("api_key") else None)
                             for u in data["upstreams"]]
    data["upstreams"] = [{"name": "anchorage-mock", "base_url": mock_server.url, "models": ["mock*"]}, *data["upstreams"]]
    scripted = None
    if scripts is not None:
        from anchorage.gateway.scripted import start_scripted

        scripted = start_scripted(scripts)
        data["upstreams"] += scripted.upstreams()
    data.update(host=None, port=0, unix_socket=folder / "gateway.sock")
    if front_door:
        data["front_door"] = {**(data.get("front_door") or {}), **front_door}
    try:
        gateway = start_gateway(GatewayConfig.model_validate(data))
    except Exception:
        mock_server.stop()
        if scripted is not None:
            scripted.stop()
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return LocalGateway(gateway, mock_server, folder, scripted)
