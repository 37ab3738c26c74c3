"""`kvreg serve`: a local web page over the registry (what-if, registry tables, plans, procurement).

The page computes no figure: every number is a view row read through the same library functions
the CLI calls (kvreg.app.capacity, kvreg.app.plans, kvreg.app.registry), formatted by kvreg.export.text.
"""
