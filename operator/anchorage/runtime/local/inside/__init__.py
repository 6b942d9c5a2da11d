"""Scripts that run *inside* the sandbox with the bare interpreter (stdlib only, no anchorage import).

The sandbox runner binds this folder read-only at ``/opt/anchorage``: ``launcher.py`` forwards the
sandbox's loopback port to the gateway socket and runs the agent; ``mock_agent.py`` is the built-in
mock agent.
"""
