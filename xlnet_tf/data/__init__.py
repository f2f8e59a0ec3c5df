"""Data shared by every task: SentencePiece tokenization, the demo corpora, record file names and encoding."""
