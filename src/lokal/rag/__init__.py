"""Retrieval: load, chunk, embed, store and search documents; passages and citation checks."""
