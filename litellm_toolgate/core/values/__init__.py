"""Values: one call's argument text into exactly one strict JSON value, and that value against
its tool's schema (ECMA-262 patterns, the fast path, custom grammars). Sans-I/O; imports only
the core's errors and enums.
"""
