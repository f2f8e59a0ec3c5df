"""The XLNet network: stateless ops, the head-major attention kernels, the LayerNorm and dense row kernels, Keras
layers, the Transformer-XL and heads."""
