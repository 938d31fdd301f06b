"""The run: the tool loop, its state, the tools, and the journal's stores and command line.
May import the policies, the edge and the core; the edge never imports the run.
"""
