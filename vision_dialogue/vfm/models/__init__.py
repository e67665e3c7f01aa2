"""One module per model family; each holds the real loading and inference code."""
