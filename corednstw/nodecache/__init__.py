"""NodeLocal DNSCache: the ``node-cache`` command (k8s-dns-node-cache).

node-cache is CoreDNS plus the node's side of the set-up: it renders its
Corefile from the node-local-dns ConfigMap's template (``__PILLAR__``
placeholders, the kube-dns ConfigMap's stub domains and upstreams),
creates the ``nodelocaldns`` interface holding the link-local address,
and installs the iptables rules that keep DNS to that address out of
connection tracking; on exit it removes the rules and the interface.
Same flags, same rules (with their comments, so either binary's rules are
recognised by the other), same placeholders: the DaemonSet of the
kubernetes addon works with this image and ``command: [node-cache]``.
"""
