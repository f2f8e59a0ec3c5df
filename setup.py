"""Installs the `xlnet_tf` library. The CLIs (`data_utils.py`, `run_pretrain.py`, `run_classifier.py`)
run from the repository root."""

from setuptools import find_packages, setup

setup(
    name="xlnet-tf",
    version="0.1.0",
    description="XLNet in TensorFlow 2 / Keras 3, faithful to the original zihangdai/xlnet code",
    packages=find_packages(include=["xlnet_tf", "xlnet_tf.*"]),
    python_requires=">=3.10",
    install_requires=[
        "tensorflow>=2.21,<2.22",
        "tensorflow-text>=2.21,<2.22",
        "tensorboard>=2.21,<3",  # tf.summary scalars need it; TF 2.21 no longer installs it
        "sentencepiece>=0.2,<0.3",
        "absl-py>=2.0,<3",
        "numpy>=1.26,<3",
        "safetensors>=0.4,<1",  # HuggingFace model.safetensors (numpy API; no torch)
        "h5py>=3.10,<4",  # HuggingFace tf_model.h5
    ],
    extras_require={"test": ["pytest>=8,<10", "pytest-xdist>=3.5,<4"]},
)
