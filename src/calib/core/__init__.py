"""The foundation every layer stands on: numerics, bins, compiled kernels, input validation, optional extras."""
