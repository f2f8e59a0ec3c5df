"""RACE (multiple-choice reading comprehension) as the original `run_race.py`.

`data`: the RACE directory layout -> examples -> features (the original's option aliasing kept by default,
`fix_option_aliasing=True` corrects it). `records`: the cached TFRecords and their `tf.data` reader. `task`: the
model with the original's head (`model/sequnece_summary`, `logits/dense`) and loss, the task for the training loop.
`evaluation`: eval (the original's `Eval | ...` numbers) and predict. `corpus`: a small RACE-format set built from
real IMDB review text (no RACE data can be installed offline).
"""
