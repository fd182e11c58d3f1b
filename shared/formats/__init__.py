"""Document formats: the registry (:mod:`shared.formats.registry`) and the readers it names."""
