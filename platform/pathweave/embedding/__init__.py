"""Text embedders: the catalog of installable models, the encoders (sentence-transformers,
ONNX Runtime), the ONNX export, and the record of which embedder a tenant's vectors come
from."""
