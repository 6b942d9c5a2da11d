"""Anchorage's container images: built from a checkout with buildah (:mod:`.building`), smoke-tested
(:mod:`.smoke`) and published to a registry (:mod:`.publishing`). The command is ``anchorage images build|push``
(:mod:`anchorage.commands.images`); the Dockerfiles are under ``images/`` of the repository, which is the build
context (:mod:`.checkout`)."""
