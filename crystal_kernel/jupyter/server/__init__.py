"""Handlers of the Crystal jupyter_server extension (REST under ``/crystal/api/``)."""
