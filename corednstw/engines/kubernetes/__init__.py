"""The Kubernetes API engine: what a plugin needs to keep a view of
cluster objects (the kubernetes plugin, the k8s_gateway package).

``client`` (authenticated GETs: a kubeconfig, an endpoint, the
in-cluster service account), ``watch`` (paged lists and watches in
daemon threads, resourceVersion, bookmarks, 410 relists, the REST
client metrics), ``feed`` (the hand-over into the reactor: batches
applied a budget per turn, relists marked and swept, the sync state),
``selector`` (label selectors).  A plugin brings its kinds (API path
and JSON-to-record parser) and a ``feed.Feed`` subclass indexing them.
"""
