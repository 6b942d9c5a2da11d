"""Scripts that run *inside* the sandbox with the bare interpreter (stdlib only, no anchorage import).

The sandbox runner binds this folder read-only at ``/.anchorage``: ``launcher.py`` forwards the
sandbox's loopback port to the gateway socket and runs the agent; ``mock_agent.py`` is the built-in
mock agent; ``model_call.py`` is one isolated model call of a verification protocol;
``seccomp_exec.py`` loads the seccomp filter in the ``unshare`` fallback.
"""
