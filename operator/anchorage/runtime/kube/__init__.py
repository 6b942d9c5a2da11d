"""The Kubernetes side of a run, beside ``runtime.local``: what the operator (``anchorage.controller``) sends to the
API server and what runs in the pods it creates. No Kubernetes client here.

* ``jobs`` — pure builders of the objects the operator creates (trial, verifier and protocol Jobs, NetworkPolicies,
  gateway-token Secrets, child custom resources) and the operator's settings (``OperatorConfig``);
* ``crds`` — the CustomResourceDefinitions, generated from the pydantic models (``anchorage dev crds``);
* ``status`` — the custom resources' ``status`` as pydantic models; ``conditions`` — the generic lifecycle
  conditions every status carries; ``scores`` — a ScoringRun's status, bounded whatever the number of artifacts;
* ``rescoring`` — what a ScoringRun with ``campaignRef`` rescores (read from the store);
* ``pod`` — the programs inside the operator's pods (``python -m anchorage.runtime.kube.pod CMD``), with
  ``resolver``, the upload sidecar's name resolution.
"""
