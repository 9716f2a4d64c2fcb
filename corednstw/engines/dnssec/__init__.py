"""DNSSEC signing shared by the dnssec plugin (on the fly) and sign
(whole zone files): key pairs in BIND's file format (``keys``) and RRSIG
records over RRsets (``signer``)."""
