"""Test support: the App started on port 0 and queried over the wire
(util), upstream DNS servers (our scriptable one, unbound, knot), the
Kubernetes list/watch API server, the Frame Streams reader for dnstap."""
