"""The shared vocabulary every room imports and that imports no room: paths, files, errors, params and their
validation, the variant table, conditioning schemes, registries, model references, the device policy and
process set-up, and the retrieval choices params may name."""
