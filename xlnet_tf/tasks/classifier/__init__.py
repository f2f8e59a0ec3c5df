"""Classification and regression fine-tuning: processors, features, the head and loss, metrics, serving."""
