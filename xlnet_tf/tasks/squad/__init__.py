"""SQuAD 2.0 for XLNet, as the original `run_squad.py` / `squad_utils.py` / `function_builder.get_qa_outputs`.

- `examples`: SQuAD JSON -> SquadExample (`read_squad_examples`, `load_squad_data`).
- `data`: SquadExample -> InputFeatures (windows, labels, max-context), by `FeatureOptions`.
- `alignment`: the character alignment between raw paragraphs and their pieces (the banded LCS).
- `records`: TFRecords with the original's feature and file names, the `tf.data` reader, the evaluation cache.
- `postprocess`: head outputs -> n-best answers, null odds, predictions.json and friends.
- `evaluate`: the official SQuAD 2.0 evaluation with XLNet's threshold search.
- `task`: the QA head (start logits, end logits, answer class; the original's top-level scopes), its loss, the
  training task.
- `predict`: a fine-tuned checkpoint's beam on the evaluation features -> the prediction files and evaluation.
"""
