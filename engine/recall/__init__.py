"""Recall: four retrieval arms, fusion, reranking, diversification and the token budget."""
