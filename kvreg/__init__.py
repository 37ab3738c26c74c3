"""kvreg: a capacity registry for LLM serving."""

__version__ = "0.1.0"
