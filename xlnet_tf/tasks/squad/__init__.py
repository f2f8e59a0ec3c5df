"""SQuAD 2.0 for XLNet, as the original `run_squad.py` / `squad_utils.py`: the data and post-processing half.

- `data`: SQuAD JSON -> SquadExample -> InputFeatures (windows, labels, max-context).
- `alignment`: the character alignment between raw paragraphs and their pieces (the banded LCS).
- `records`: TFRecords with the original's feature and file names, the `tf.data` reader, the evaluation cache.
- `postprocess`: head outputs -> n-best answers, null odds, predictions.json and friends.
- `evaluate`: the official SQuAD 2.0 evaluation with XLNet's threshold search.
"""
