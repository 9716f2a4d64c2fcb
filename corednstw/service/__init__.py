"""The running process: the twisted Service (``App``), its HTTP endpoints,
signals, and the configuration seen as a twisted.names IResolver."""
