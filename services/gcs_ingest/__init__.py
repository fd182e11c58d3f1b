"""Documents dropped into a Cloud Storage bucket: object finalize/delete events into the pipeline."""
