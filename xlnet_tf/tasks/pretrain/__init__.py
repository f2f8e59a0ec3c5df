"""Pretraining: the record writer (`data_utils.py`), the input pipeline with `_local_perm`, the LM loss."""
