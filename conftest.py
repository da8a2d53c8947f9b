"""Repository-wide pytest settings (the doctest run collects workbench/, widgets/ and recipes/)."""

import importlib.util

# The Triton kernel module imports Triton at the top; the CPU build of torch has none (GPU machines do).
collect_ignore = [] if importlib.util.find_spec("triton") else ["workbench/train/_spmm_triton.py"]
