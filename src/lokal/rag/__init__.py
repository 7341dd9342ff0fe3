"""Retrieval-augmented generation: load, chunk, embed, store, retrieve, answer with citations."""
