"""The XLNet network: stateless ops, the head-major attention kernels, Keras layers, the Transformer-XL and heads."""
