"""The attempt and its decision: one response body read off the wire, the calls it opens, their
states, what is withheld and what is released. Sans-I/O; imports the core's other rooms.
"""
