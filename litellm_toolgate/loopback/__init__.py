"""A loopback upstream and the requests that drive it, shared by the demo, the probe and the
replay of recordings. Imports only the core.
"""
