"""Records: what is kept of a decision (sanitized, scrubbed), what a probe observes on a route,
what the metrics count. Sans-I/O; imports the decision and the values.
"""
