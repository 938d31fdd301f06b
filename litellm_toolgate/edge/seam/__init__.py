"""The seam: every bet the edge makes on code that is not a public API, in one place.

litellm's modules outside its top-level namespace (:mod:`.symbols`), the stack frames of a
litellm call (:mod:`.frames`) and the private attributes of litellm's, httpx's and the OpenAI
SDK's objects (:mod:`.privates`) are reached only through these modules; no other module of
the package imports a litellm submodule, reads a frame or touches those attributes
(``tests/test_seam.py`` lists every module that does). Each entry says which litellm
versions it was read from. :func:`missing` names every entry the installed litellm (or
httpx, or openai) no longer has: the test suite runs it on every supported litellm version,
so an upgrade that moves one fails there, by name, not somewhere in a call.
"""

from __future__ import annotations

from .frames import missing as _missing_frames
from .privates import missing as _missing_privates
from .symbols import missing as _missing_symbols


def missing() -> list[str]:
    """What the seam reads that the installed libraries do not have, one line each."""
    return [*_missing_symbols(), *_missing_frames(), *_missing_privates()]


__all__ = ["missing"]
