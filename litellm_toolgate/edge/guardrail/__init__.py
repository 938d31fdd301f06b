"""The callback and the proxy guardrail: litellm's hooks, which gate decides a call, its tap,
the proxy's routes and held logs, and what litellm is told of each decision. Imports the
edge and the core, nothing above them.
"""
