"""Agent runtimes' stop hooks: read the runtime's input, post-flight, answer in its protocol.

May import: ``pipeline`` and everything below it.
"""
