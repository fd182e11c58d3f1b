"""One folder per stage: each a Cloud Function entry point (main.py) beside its handler."""
