"""How every room runs a model: model references (bundled weights, local paths, hub ids) and the inference context
that places a model by the device policy, processes over several devices, and the HF Trainer loop with
resumable checkpoints."""
