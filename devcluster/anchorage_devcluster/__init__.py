"""A Kubernetes API fake for tests and for trying the operator without a cluster.

``anchorage dev cluster`` serves it on 127.0.0.1 and writes a kubeconfig; the operator's tests start
it in-process. It is built on kmock's ``KubernetesEmulator`` (HTTP server, request parsing, discovery
scaffold, error rendering, its request log and DSL for extra reactions) and replaces the emulator's
object tracking with the semantics the operator and kubectl rely on (``apiserver``), plus a fake Job
controller and kubelet that run each Job's pod (``kubelet``). kmock is a dev dependency: install
``anchorage-operator[dev]`` to use this package.
"""
