"""Verification protocols (SPEC §7): adversarial panel, consequence-based utility, ranking metrics, Lean audit.

Pure package (no aiohttp/kopf/kubernetes/boto3): model calls go through :class:`models.ModelClient`,
whose HTTP implementation uses urllib. Called by ``anchorage verify`` and ``anchorage audit``
(:mod:`anchorage.commands.verify`, :mod:`anchorage.commands.audit`); see docs/verification.md.
Modules: ``cleaning``, ``verdicts``, ``voting``, ``settings``, ``prompts``, ``models``, ``panel``,
``numeric``, ``cbu``, ``ranking``, ``lean_audit``, ``semantic_audit``.
"""
