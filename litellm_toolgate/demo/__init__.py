"""The demo: ``toolgate demo`` (a gated run against the loopback upstream), the demo server
and its personalities, and the crash demo. May import every room; nothing imports it.
"""
