"""Model specs (`tiny`, `smollm2-135m`, `gguf:FILE`, a local checkpoint, a hub id) resolved offline first: the
embedded tiny model, real models shipped offline, the model cache."""
