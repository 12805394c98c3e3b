"""The agent host: sessions, the turn loop, events, transcripts, approval, config.

Nothing under this package imports a Jupyter library (a test guards it).
"""
