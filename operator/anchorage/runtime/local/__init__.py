"""The local engine's runtime: sandboxed processes on this machine (bubblewrap or unshare).

Called by ``anchorage run``/``anchorage oracle`` and by the campaign engine; see
:mod:`.sandbox` for the isolation and :mod:`.trials` for one trial end to end.
"""
