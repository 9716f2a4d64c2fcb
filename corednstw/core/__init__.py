"""The DNS core: the Corefile grammar, configuration, the chain contract
(plugins and their interfaces), requests and responses on the wire, the
listeners and block mux, names, metrics and log lines."""
