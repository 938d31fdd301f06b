"""The package's version, readable from every room (it is not a room of its own)."""

__version__ = "0.1.0"
