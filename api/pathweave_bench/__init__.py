"""Pathweave's benchmarks on real data (``pathweave bench ...``): above the product packages, which never import them."""
