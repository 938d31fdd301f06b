"""The run's rules, sans-I/O: what a policy is asked and answers, policies built of policies,
the command allow-list, approval binding, the journal's transitions, the loop's bounds and
route escalation. Imports the core's other rooms; does no I/O.
"""
