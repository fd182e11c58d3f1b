"""The cleaner stage: see :mod:`services.cleaner.handler`."""
