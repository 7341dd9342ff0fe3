"""The language model's side: backends, prompts, the output parser, tool preselection, the
staged and constrained decisions, and ``generate_ai_message`` that puts them together."""
